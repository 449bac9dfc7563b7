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
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/applog"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/camera"
	"github.com/raspi-mcp/raspi-mcp/hw/gpio"
	"github.com/raspi-mcp/raspi-mcp/hw/i2c"
	"github.com/raspi-mcp/raspi-mcp/hw/netinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/hw/pwm"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
	"github.com/raspi-mcp/raspi-mcp/hw/units"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
)

// rig is an agent on the simulated board with a real helper server, a real
// bbolt file and real sockets: only the power backend records instead of acting.
type rig struct {
	t      testing.TB
	dir    string
	cfg    *config.Config
	db     *store.DB
	pw     *power.Sim
	gpio   *gpio.Sim // survives helper restarts, like the pins of a real board
	pwm    *pwm.Sim
	bus    *i2c.SimBus // bus 1: BME280 at 0x76, TMP102 at 0x48, plain registers at 0x50
	bme    *i2c.BME280
	units  *units.Sim // shared with the helper through its file, as in laptop mode
	appLog *applog.Ring
	a      *Agent
	helper *client.Client

	protectedUIDs []int // the helper's resolved [process] protected_users

	mu         sync.Mutex
	stopHelper context.CancelFunc
	helperDone chan struct{}
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
	dir := t.TempDir()
	cfg := config.Laptop(dir, currentUser(t))
	if mod != nil {
		mod(&cfg)
	}
	db, err := store.Open(cfg.Agent.State, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, dir: dir, cfg: &cfg, db: db, pw: power.NewSim(""), gpio: gpio.NewSim(28), pwm: pwm.NewSim()}
	r.bme = i2c.NewBME280(0x76)
	r.bus = i2c.NewSimBus(r.bme, i2c.NewTMP102(0x48), i2c.NewMemChip(0x50))
	if r.units, err = units.NewSim(filepath.Join(dir, "units.json")); err != nil {
		t.Fatal(err)
	}
	r.startHelper()
	// A busy machine must not turn a slow hello or call into "helper unavailable".
	r.helper = client.New(client.Options{Socket: cfg.Helper.Socket, ClientName: "raspi-mcp/test", DialTimeout: hangGuard / 2, Timeout: hangGuard / 2})
	r.appLog = applog.NewRing(100)
	r.a, err = New(Options{Config: &cfg, Store: db, Sys: sysinfo.NewSim(sysinfo.SimOptions{}), Helper: r.helper,
		Version: "test", Mode: "sim", Logger: slog.New(r.appLog.Handler(slog.NewTextHandler(io.Discard, nil), "agent")),
		Units: r.units, Journal: r.units.Journal(), Root: os.DirFS("/"), Net: fixtureNet{root: os.DirFS("../hw/netinfo/testdata/pi4")}, AppLog: r.appLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		r.killHelper()
		r.helper.Close()
		r.pw.Close()
		db.Close()
	})
	return r
}

func (r *rig) startHelper() {
	r.t.Helper()
	ln, err := privhelper.Listen(r.cfg.Helper.Socket)
	if err != nil {
		r.t.Fatal(err)
	}
	// The helper opens the simulated systemd on its own, as the binary does.
	helperUnits, err := units.NewSim(filepath.Join(r.dir, "units.json"))
	if err != nil {
		r.t.Fatal(err)
	}
	srv := privhelper.NewServer(privhelper.Options{
		Hardware: privhelper.Hardware{GPIO: privhelper.GPIOFrom(r.gpio), PWM: privhelper.PWMFrom(r.pwm),
			I2C:    privhelper.I2CFrom(i2c.NewSimOpener(map[int]*i2c.SimBus{1: r.bus}), r.dir),
			Camera: privhelper.CameraFrom(camera.NewSim(r.cfg.Camera.MediaRoot), os.Getuid())},
		HardwarePolicy: privhelper.HardwarePolicy{GPIO: r.cfg.GPIO, I2C: r.cfg.I2C, Camera: r.cfg.Camera},
		HandlerTimeout: hangGuard / 2, // a busy machine can take seconds to encode a sim photo
		Policy:         privhelper.Policy{AgentUID: os.Getuid(), Reboot: r.cfg.System.Reboot, Poweroff: r.cfg.System.Shutdown},
		Power:          r.pw, Backend: "sim", Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Ops:       privhelper.Ops{Units: privhelper.UnitsFrom(helperUnits), Processes: privhelper.ProcessesFrom("/")},
		OpsPolicy: privhelper.OpsPolicy{Service: r.cfg.Service, Process: r.cfg.Process, ProtectedUIDs: r.protectedUIDs, ProtectedNames: r.cfg.Process.ProtectedUsers},
	})
	_ = srv.ApplySafeStates(context.Background()) // as the helper binary does at start
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = srv.Serve(ctx, ln); close(done) }()
	r.mu.Lock()
	r.stopHelper, r.helperDone = cancel, done
	r.mu.Unlock()
}

func (r *rig) killHelper() {
	r.mu.Lock()
	stop, done := r.stopHelper, r.helperDone
	r.stopHelper = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
		<-done
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
	ln, err := privhelper.Listen(r.cfg.Agent.Socket)
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
