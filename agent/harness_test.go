package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/applog"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/hw/i2c"
	"github.com/raspi-mcp/raspi-mcp/hw/netinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
	"github.com/raspi-mcp/raspi-mcp/hw/pwm"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/internal/simrig"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
)

// rig is an agent on the simulated board (internal/simrig) with a real
// helper server, a real bbolt file and real sockets: only the power
// backend records instead of acting. The fields name the rig's parts the
// tests reach for.
type rig struct {
	t      testing.TB
	sim    *simrig.Rig
	dir    string
	cfg    *config.Config
	db     *store.DB
	pw     *power.Sim
	gpio   *gpio.Sim // survives helper restarts, like the pins of a real board
	pwm    *pwm.Sim
	bme    *i2c.BME280 // on bus 1 at 0x76, beside a TMP102 at 0x48 and plain registers at 0x50
	units  *units.Sim  // shared with the helper through its file, as in laptop mode
	appLog *applog.Ring
	a      *Agent
	helper *client.Client

	// simProcs, when set (newSimRig), is the simulated board's process
	// table, shared by the agent and the helper as in laptop mode; the
	// network is then the simulated one too. Otherwise both read this
	// machine's /proc, and the tests signal only their own children.
	simProcs *procs.Sim
}

func currentUser(t testing.TB) string {
	u, err := user.Current()
	if err != nil {
		return strconv.Itoa(os.Getuid())
	}
	return u.Username
}

func newRig(t testing.TB, mod func(*config.Config)) *rig {
	t.Helper()
	return newRigOn(t, mod, false)
}

// newSimRig is newRig on the simulated board's processes and network,
// exactly as `serve --sim` wires them: nothing of this machine is read.
func newSimRig(t testing.TB, mod func(*config.Config)) *rig {
	t.Helper()
	return newRigOn(t, mod, true)
}

func newRigOn(t testing.TB, mod func(*config.Config), sim bool) *rig {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Laptop(dir, currentUser(t))
	if mod != nil {
		mod(&cfg)
	}
	s, err := simrig.Start(simrig.Options{Dir: dir, Config: cfg, Version: "test", Chips: []i2c.Chip{i2c.NewMemChip(0x50)}, HostProcesses: !sim,
		// A busy machine must not turn a slow hello, call or sim photo into "helper unavailable".
		HelperTimeout: hangGuard / 2, DialTimeout: hangGuard / 2, HandlerTimeout: hangGuard / 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := &rig{t: t, sim: s, dir: dir, cfg: s.Config, db: s.Store, pw: s.Power, gpio: s.Board.GPIO, pwm: s.Board.PWM,
		bme: s.Board.BME280, units: s.Agent.Units, simProcs: s.Agent.Procs, helper: s.Helper, appLog: applog.NewRing(100)}
	opts := Options{Config: r.cfg, Store: r.db, Sys: s.Agent.Sys, Helper: r.helper, CheckOutput: true, Version: "test", Mode: "sim",
		Units: r.units, Journal: r.units.Journal(), AppLog: r.appLog,
		Logger: slog.New(r.appLog.Handler(slog.NewTextHandler(io.Discard, nil), "agent"))}
	if sim {
		opts.SimProcs, opts.Net = s.Agent.Procs, s.Agent.Net
	} else {
		opts.Root, opts.Net = os.DirFS("/"), fixtureNet{root: os.DirFS("../hw/netinfo/testdata/pi4")}
	}
	if r.a, err = New(opts); err != nil {
		t.Fatal(err)
	}
	return r
}

// startHelper starts the helper server again after killHelper, as systemd
// restarts a crashed helper.
func (r *rig) startHelper() {
	r.t.Helper()
	if err := r.sim.StartHelper(); err != nil {
		r.t.Fatal(err)
	}
}

// killHelper ends the helper server; the board keeps its state.
func (r *rig) killHelper() {
	r.t.Helper()
	if err := r.sim.StopHelper(); err != nil {
		r.t.Error(err)
	}
}

// as runs one call as principal p, straight through the pipeline.
func (r *rig) as(p Principal, name string, args any) (*mcp.CallToolResult, map[string]any) {
	r.t.Helper()
	t, ok := r.a.tools.lookup(name)
	if !ok {
		r.t.Fatalf("no tool %s", name)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		r.t.Fatal(err)
	}
	res := r.a.invoke(context.Background(), t, &Call{Principal: p, CorrelationID: newCorrelationID()}, raw)
	return res, structured(r.t, res)
}

// structured is the result object, or {"error": ...} for an error result,
// taken from where clients find them.
func structured(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	var sc map[string]any
	if res.IsError {
		if res.StructuredContent != nil {
			t.Fatalf("error result carries structuredContent, which clients validate against outputSchema")
		}
		e, err := json.Marshal(res.Meta["error"])
		if err != nil {
			t.Fatal(err)
		}
		var em map[string]any
		_ = json.Unmarshal(e, &em)
		sc = map[string]any{"error": em}
		text := res.Content[0].(*mcp.TextContent).Text
		_, js, _ := strings.Cut(text, "\n")
		var fromText map[string]any
		if json.Unmarshal([]byte(js), &fromText) != nil || fmt.Sprint(fromText) != fmt.Sprint(sc) {
			t.Fatalf("text block error %q differs from _meta.error %v", js, sc)
		}
		return sc
	}
	_ = json.Unmarshal(res.StructuredContent.(json.RawMessage), &sc)
	return sc
}

var admin = Principal{Name: "alice", UID: 1000, Role: RoleAdmin}

// errCode returns the structured error code of a result, or "".
func errCode(res *mcp.CallToolResult, sc map[string]any) string {
	if !res.IsError {
		return ""
	}
	e, _ := sc["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (r *rig) auditCount() int {
	r.t.Helper()
	n, _, _, _, err := r.db.AuditCounts()
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// serve starts the agent on its socket and returns a connected SDK client session.
func (r *rig) serve() *mcp.ClientSession { return r.serveWith(nil) }

// serveWith is serve with the client's options (notification handlers).
func (r *rig) serveWith(opts *mcp.ClientOptions) *mcp.ClientSession {
	r.t.Helper()
	ln, err := unixsock.Listen(r.cfg.Agent.Socket, 0o660, -1, -1)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.a.Serve(ctx, ln); close(done) }()
	conn, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		r.t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	s, err := c.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { s.Close(); cancel(); <-done })
	return s
}

// hangGuard is how long a test waits for something that must happen before
// it gives up. It only keeps a broken build from hanging: on a busy shared
// machine a wait that usually takes milliseconds can take seconds, so no
// verdict may depend on how quickly a condition becomes true.
const hangGuard = 60 * time.Second

// waitFor polls ok until it holds. limit is what the wait normally needs;
// the test fails only once neither it nor hangGuard is left.
func waitFor(t *testing.T, what string, limit time.Duration, ok func() bool) {
	t.Helper()
	limit = max(limit, hangGuard)
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func storeQuery(limit int) store.AuditQuery { return store.AuditQuery{Limit: limit} }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// callHelperReboot goes straight to the helper, bypassing the agent's policy.
func callHelperReboot(r *rig) (any, error) {
	return client.Call(context.Background(), r.helper, proto.PowerSchedule, proto.PowerScheduleReq{Action: "reboot", DelaySeconds: 5, Reason: "bypass"})
}

// fixtureNet is the network of a fixture tree (a Pi 4 with eth0 and wlan0):
// tests must not depend on the machine's own interfaces.
type fixtureNet struct{ root fs.FS }

func (f fixtureNet) Interfaces(context.Context) ([]netinfo.Interface, error) {
	return netinfo.Interfaces(f.root, fixtureAddrs)
}
func (f fixtureNet) Routes(context.Context) ([]netinfo.Route, error) { return netinfo.Routes(f.root) }
func (f fixtureNet) DNSServers(context.Context) ([]string, error)    { return netinfo.DNSServers(f.root) }
func (f fixtureNet) Connections(_ context.Context, p []string) ([]netinfo.Conn, error) {
	return netinfo.Connections(f.root, p)
}
func (f fixtureNet) Neighbors(context.Context) ([]netinfo.Neighbor, error) {
	return netinfo.Neighbors(f.root)
}

func fixtureAddrs(name string) ([]netip.Prefix, error) {
	switch name {
	case "lo":
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.1/8")}, nil
	case "eth0":
		return []netip.Prefix{netip.MustParsePrefix("192.168.1.20/24")}, nil
	}
	return nil, nil
}
