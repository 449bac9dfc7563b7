package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
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
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	"github.com/raspi-mcp/raspi-mcp/internal/chartpng"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/internal/promexp"
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

	mu       sync.Mutex
	sessions map[Principal]*mcp.ClientSession // callAs's, one per principal
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

func newRigOn(t testing.TB, mod func(*config.Config), sim bool, board ...func(*simrig.Options)) *rig {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Laptop(dir, currentUser(t))
	// Most tests exercise the client's channel (confirm and reason, change
	// tokens, elicitation), as an owner who lowered critical to the client
	// has it; approvals_test.go puts critical calls to the device.
	cfg.Guard.Critical = config.ChannelClient
	if mod != nil {
		mod(&cfg)
	}
	// Written out as `serve --sim` does, so both sides can reload it.
	cfgPath := writeConfig(t, dir, cfg)
	so := simrig.Options{Dir: dir, Config: cfg, ConfigPath: cfgPath, Version: "test", Chips: []i2c.Chip{i2c.NewMemChip(0x50)}, HostProcesses: !sim,
		// A busy machine must not turn a slow hello, call or sim photo into "helper unavailable".
		HelperTimeout: hangGuard / 2, DialTimeout: hangGuard / 2, HandlerTimeout: hangGuard / 2}
	for _, b := range board {
		b(&so)
	}
	s, err := simrig.Start(so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r := &rig{t: t, sim: s, dir: dir, cfg: s.Config, db: s.Store, pw: s.Power, gpio: s.Board.GPIO, pwm: s.Board.PWM,
		bme: s.Board.BME280, units: s.Agent.Units, simProcs: s.Agent.Procs, helper: s.Helper, appLog: applog.NewRing(100)}
	opts := Options{Config: r.cfg, ConfigPath: cfgPath, Store: r.db, Sys: s.Agent.Sys, Helper: r.helper, CheckOutput: true, Version: "test", Mode: "sim",
		Units: r.units, Journal: r.units.Journal(), AppLog: r.appLog, Apt: s.Agent.Apt, MetricsRenderer: promexp.New(), ChartRenderer: chartpng.Renderer{},
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
	t, ok := r.a.tools.Lookup(name)
	if !ok {
		r.t.Fatalf("no tool %s", name)
	}
	raw, err := json.Marshal(args)
	if err != nil {
		r.t.Fatal(err)
	}
	res := r.a.invoke(context.Background(), t, &tool.Call{Principal: p, CorrelationID: tool.NewCorrelationID()}, raw)
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

var (
	admin    = Principal{Name: "alice", UID: 1000, Role: RoleAdmin}
	operator = Principal{Name: "op", UID: 1002, Role: RoleOperate}
	reader   = Principal{Name: "bob", UID: 1001, Role: RoleRead}
)

// session is a real MCP client session served by the agent as principal p.
// It runs over in-memory transports, so the principal is given here where
// the socket would take it from the peer's credentials; everything after
// that (the SDK's framing, the agent's middleware, its handlers) is what a
// client on the socket meets. The client offers no elicitation, so high and
// critical calls stand on their guard arguments alone, as with a client
// that cannot ask a person (elicit_test.go covers the person's answer). The
// rig keeps one session per principal for its whole life; t is the test
// that asks.
func (r *rig) session(t testing.TB, p Principal) *mcp.ClientSession {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.sessions[p]; ok {
		return s
	}
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := r.a.server.Connect(identity.NewContext(ctx, p), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.t.Cleanup(func() { cs.Close(); ss.Wait() })
	if r.sessions == nil {
		r.sessions = map[Principal]*mcp.ClientSession{}
	}
	r.sessions[p] = cs
	return cs
}

// call is one tools/call as p over its session; a protocol error fails t.
// The timeout only guards against a hang.
func (r *rig) call(t testing.TB, p Principal, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	res, err := r.session(t, p).CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// callAs calls tool as p through a real MCP client session and reads the
// result as the contract says a client finds it: structuredContent decoded
// into the tool's own Out, or _meta.error into a tool.Error. Exactly one of
// the two is set. A field the result has and Out lacks fails t, so a
// result cannot carry what its outputSchema does not promise.
func callAs[Out any](t testing.TB, r *rig, p Principal, tool string, args any) (Out, *tool.Error) {
	t.Helper()
	return decodeResult[Out](t, r.call(t, p, tool, args))
}

// decodeResult is callAs's reading of a result the test already holds.
func decodeResult[Out any](t testing.TB, res *mcp.CallToolResult) (Out, *tool.Error) {
	t.Helper()
	var out Out
	if res.IsError {
		return out, resultError(t, res)
	}
	if res.Meta["error"] != nil {
		t.Fatalf("a successful result carries _meta.error: %v", res.Meta["error"])
	}
	strictDecode(t, "structuredContent", res.StructuredContent, &out)
	return out, nil
}

// resultError is the tool.Error of an error result, from _meta.error, after
// checking the text block carries the same object and structuredContent
// none (clients validate that against outputSchema).
func resultError(t testing.TB, res *mcp.CallToolResult) *tool.Error {
	t.Helper()
	if res.StructuredContent != nil {
		t.Fatalf("error result carries structuredContent, which clients validate against outputSchema")
	}
	var te tool.Error
	strictDecode(t, "_meta.error", res.Meta["error"], &te)
	var fromText struct{ Error tool.Error }
	text := res.Content[0].(*mcp.TextContent).Text
	first, js, _ := strings.Cut(text, "\n")
	strictDecode(t, "the text block", json.RawMessage(js), &fromText)
	if first != "error "+te.Code+": "+te.Message {
		t.Fatalf("text block's summary %q does not say %s: %s", first, te.Code, te.Message)
	}
	if d := cmp.Diff(te, fromText.Error); d != "" {
		t.Fatalf("text block's error differs from _meta.error (-meta +text):\n%s", d)
	}
	return &te
}

// diff fails t when got is not want, naming what.
func diff(t testing.TB, what string, want, got any, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// wantErr stops t unless e is an error with code, and fails it unless,
// when details is not nil, e has exactly those details (numbers as JSON
// decodes them: float64).
func wantErr(t testing.TB, e *tool.Error, code string, details map[string]any) {
	t.Helper()
	switch {
	case e == nil:
		t.Fatalf("succeeded, want %s", code)
	case e.Code != code:
		t.Fatalf("got %s (%s), want %s", e.Code, e.Message, code)
	case details != nil:
		if d := cmp.Diff(details, e.Details); d != "" {
			t.Errorf("%s details (-want +got):\n%s", code, d)
		}
	}
}

// strictDecode decodes v (a value or raw JSON) into dst, refusing unknown fields.
func strictDecode(t testing.TB, what string, v, dst any) {
	t.Helper()
	b, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(dst); err != nil {
		t.Fatalf("%s does not decode into %T: %v\n%s", what, dst, err, b)
	}
}

// errCode returns the structured error code of a result, or "".
func errCode(res *mcp.CallToolResult, sc map[string]any) string {
	if !res.IsError {
		return ""
	}
	e, _ := sc["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// verifyAudit checks the rig's audit chain against the helper's witness, as
// logs.verify_audit_chain does, without a call that would add a record.
func (r *rig) verifyAudit() (AuditVerifyOut, error) { return VerifyFile(r.a.store, r.a.witness.path) }

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
	return r.serveMany()(opts, "")
}

// serveMany starts the agent once and returns a dialer for many clients,
// each with its own options and protocol version ("" lets the client choose).
func (r *rig) serveMany() func(opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	r.t.Helper()
	ln, err := unixsock.Listen(r.cfg.Agent.Socket, 0o660, -1, -1)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.a.Serve(ctx, ln); close(done) }()
	r.t.Cleanup(func() { cancel(); <-done })
	return func(opts *mcp.ClientOptions, version string) *mcp.ClientSession {
		r.t.Helper()
		conn, err := net.Dial("unix", r.cfg.Agent.Socket)
		if err != nil {
			r.t.Fatal(err)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
		var so *mcp.ClientSessionOptions
		if version != "" {
			so = &mcp.ClientSessionOptions{ProtocolVersion: version}
		}
		s, err := c.Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, so)
		if err != nil {
			r.t.Fatal(err)
		}
		if got := s.InitializeResult().ProtocolVersion; version != "" && got != version {
			r.t.Fatalf("negotiated %s, want %s", got, version)
		}
		r.t.Cleanup(func() { s.Close() })
		return s
	}
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
