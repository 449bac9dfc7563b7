package agent

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// fakeLAN is an MCP server of the LAN, written with the go-sdk: a read
// tool, a write tool, a critical one, one with its own dry_run, and one
// that always fails. writes counts the calls that reached set_level.
type fakeLAN struct {
	srv      *mcp.Server
	http     *httptest.Server
	addr     string
	writes   atomic.Int64
	level    atomic.Int64
	canceled atomic.Int64
}

type levelIn struct {
	Level int `json:"level"`
}

type levelOut struct {
	Level int `json:"level"`
}

type sceneIn struct {
	Scene  string `json:"scene"`
	DryRun bool   `json:"dry_run,omitempty"`
}

type sceneOut struct {
	Applied bool   `json:"applied"`
	Scene   string `json:"scene"`
}

type slowIn struct {
	Hang bool `json:"hang,omitempty"`
}

func newFakeLAN(t *testing.T) *fakeLAN {
	f := &fakeLAN{srv: mcp.NewServer(&mcp.Implementation{Name: "fake-hs4", Version: "1.0"}, nil)}
	mcp.AddTool(f.srv, &mcp.Tool{Name: "devices.get_level", Description: "Read the level.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, levelOut, error) {
			return nil, levelOut{Level: int(f.level.Load())}, nil
		})
	mcp.AddTool(f.srv, &mcp.Tool{Name: "set_level", Description: "Set the level."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in levelIn) (*mcp.CallToolResult, levelOut, error) {
			f.writes.Add(1)
			f.level.Store(int64(in.Level))
			return nil, levelOut{Level: in.Level}, nil
		})
	mcp.AddTool(f.srv, &mcp.Tool{Name: "delete_all", Description: "Delete everything."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			f.writes.Add(1)
			return nil, struct{}{}, nil
		})
	mcp.AddTool(f.srv, &mcp.Tool{Name: "scene_apply", Description: "Apply a scene; has its own dry run."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in sceneIn) (*mcp.CallToolResult, sceneOut, error) {
			if !in.DryRun {
				f.writes.Add(1)
			}
			return nil, sceneOut{Applied: !in.DryRun, Scene: in.Scene}, nil
		})
	mcp.AddTool(f.srv, &mcp.Tool{Name: "slow_report", Description: "Takes its time, with progress.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, levelOut, error) {
			for i := range 3 {
				if tok := req.Params.GetProgressToken(); tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: 3})
				}
				time.Sleep(20 * time.Millisecond) // a long-running tool; the SDK may deliver a last notification after the result
			}
			if in.Hang {
				<-ctx.Done() // until the agent's timeout cancels it
				f.canceled.Add(1)
				return nil, levelOut{}, ctx.Err()
			}
			return nil, levelOut{Level: 3}, nil
		})
	mcp.AddTool(f.srv, &mcp.Tool{Name: "broken", Description: "Always fails.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the controller is busy"}}}, struct{}{}, nil
		})
	f.start(t, "127.0.0.1:0")
	return f
}

func (f *fakeLAN) start(t *testing.T, addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, nil)
	f.http = httptest.NewUnstartedServer(h)
	f.http.Listener = ln
	f.http.Start()
	f.addr = ln.Addr().String()
	srv := f.http
	// The agent's standing GET stream would hold Close until it times out.
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
}

// lanRig mounts f with a per-call timeout that is only a hang guard: its
// calls must be answered however busy the machine is.
func lanRig(t *testing.T, f *fakeLAN) (*rig, *mcp.ClientSession) {
	return lanRigWith(t, f, hangGuard/2, nil)
}

// lanRigWith mounts f with the given per-call timeout. A short one also
// bounds the health ping that follows a timed-out call, so keep it well above
// a loopback round trip on a busy machine.
func lanRigWith(t *testing.T, f *fakeLAN, timeout time.Duration, opts *mcp.ClientOptions) (*rig, *mcp.ClientSession) {
	r := newRig(t, func(c *config.Config) {
		c.Upstreams = []config.Upstream{{Name: "hs4", URL: "http://" + f.addr + "/mcp", Deny: []string{"hidden*"}, Timeout: config.Duration(timeout)}}
	})
	cs := r.serveWith(opts)
	// Tools are mounted one at a time: wait until our client lists every
	// one the upstream exposes, not just the first to appear.
	d := r.a.lan.domains[0]
	waitFor(t, "the upstream's tools", hangGuard, func() bool {
		want := 0
		for _, ut := range d.client.Tools() {
			if d.cfg.Exposes(ut.Name) {
				want++
			}
		}
		lt, err := cs.ListTools(context.Background(), nil)
		if err != nil || want == 0 {
			return false
		}
		n := 0
		for _, tl := range lt.Tools {
			if strings.HasPrefix(tl.Name, "hs4_") {
				n++
			}
		}
		return n == want
	})
	return r, cs
}

// A LAN upstream's whole path with a fake HS4 home controller: tools mounted under the prefix
// with names clients accept, read calls pass through, writes need the
// guards, dry runs never reach the upstream, critical tools need a change
// token, everything is audited, and an upstream error keeps our shape.
func TestLANToolsBehindPolicyAndAudit(t *testing.T) {
	f := newFakeLAN(t)
	r, cs := lanRig(t, f)

	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*mcp.Tool{}
	for _, tl := range tools.Tools {
		if strings.HasPrefix(tl.Name, "hs4_") {
			found[tl.Name] = tl
		}
	}
	for _, want := range []string{"hs4_devices_get_level", "hs4_set_level", "hs4_delete_all", "hs4_broken"} {
		if found[want] == nil {
			t.Fatalf("%s not listed; have %v", want, found)
		}
	}
	if !found["hs4_devices_get_level"].Annotations.ReadOnlyHint || found["hs4_set_level"].Annotations.ReadOnlyHint {
		t.Error("annotations not kept")
	}
	if !strings.Contains(string(mustJSON(t, found["hs4_set_level"].InputSchema)), `"confirm"`) {
		t.Errorf("write tool without guard arguments: %s", mustJSON(t, found["hs4_set_level"].InputSchema))
	}

	// A read, by a reader.
	reader := Principal{Name: "bob", UID: 1001, Role: RoleRead}
	n := r.auditCount()
	// An upstream's result is the upstream's shape (the fake's levelOut),
	// passed through as it came.
	res := r.call(t, reader, "hs4_devices_get_level", map[string]any{})
	if lv, e := decodeResult[levelOut](t, res); e != nil || lv.Level != 0 || res.Meta["upstream"] != "hs4" {
		t.Fatalf("read: %+v %v %v", lv, e, res.Meta)
	}
	// A write: role, then guards, then a dry run that sends nothing.
	_, e := callAs[levelOut](t, r, reader, "hs4_set_level", map[string]any{"level": 5, "confirm": true, "reason": "x"})
	wantErr(t, e, CodePermissionDenied, nil) // a reader wrote
	_, e = callAs[levelOut](t, r, operator, "hs4_set_level", map[string]any{"level": 5})
	wantErr(t, e, CodeFailedPrecondition, nil) // no confirm
	// set_level has no dry run of its own: the agent answers with its plan.
	if plan, e := callAs[lanPlan](t, r, operator, "hs4_set_level", map[string]any{"level": 5, "dry_run": true}); e != nil || !plan.DryRun || plan.Tool != "set_level" {
		t.Fatalf("dry run: %+v %v", plan, e)
	}
	if f.writes.Load() != 0 {
		t.Fatal("a refused or dry-run call reached the upstream")
	}
	if lv, e := callAs[levelOut](t, r, operator, "hs4_set_level", map[string]any{"level": 7, "confirm": true, "reason": "dim the hall"}); e != nil || lv.Level != 7 {
		t.Fatalf("write: %+v %v", lv, e)
	}
	if f.writes.Load() != 1 || f.level.Load() != 7 {
		t.Fatalf("upstream saw %d writes, level %d", f.writes.Load(), f.level.Load())
	}
	// *delete* is critical: admin and a change token.
	_, e = callAs[levelOut](t, r, admin, "hs4_delete_all", map[string]any{"confirm": true, "reason": "x"})
	wantErr(t, e, CodeFailedPrecondition, nil) // critical without token
	// The upstream's own failure, in our shape.
	res = r.call(t, reader, "hs4_broken", map[string]any{})
	if _, e := decodeResult[levelOut](t, res); !isCode(e, CodeFailedPrecondition) || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "busy") {
		t.Fatalf("upstream error: %+v", e)
	}
	if got := r.auditCount(); got != n+7 {
		t.Fatalf("%d audit records for 7 calls: every call to an upstream is audited, reads too", got-n)
	}
	recs, _, _ := r.a.store.QueryAudit(storeQuery(8))
	if recs[1].Tool != "hs4.delete_all" || recs[1].Decision != "deny" || recs[2].Tool != "hs4.set_level" || recs[2].Decision != "allow" || recs[2].Reason != "dim the hall" {
		t.Fatalf("audit: %+v", recs[:3])
	}

	// Status and capabilities show the domain.
	st, e := callAs[ServerStatus](t, r, admin, "manage_get_server_status", nil)
	if e != nil {
		t.Fatal(e)
	}
	if ups := st.Upstreams; len(ups) != 1 || ups[0].State != "up" || ups[0].Mounted != 6 {
		t.Fatalf("status upstreams: %+v", st.Upstreams)
	}
	caps, e := callAs[capabilities](t, r, admin, "system_get_capabilities", nil)
	if e != nil {
		t.Fatal(e)
	}
	seen := false
	for _, dm := range caps.Domains {
		seen = seen || (dm.Name == "hs4" && dm.Upstream != nil && len(dm.Tools) == 6)
	}
	if !seen {
		t.Fatal("capabilities do not list the hs4 domain")
	}
}

// The rest of the call path: an upstream's own dry_run is passed through, a
// hanging call is cut at the timeout and cancelled upstream, progress
// reaches our client, and a tool the upstream adds shows up in our list.
func TestLANDryRunPassThroughTimeoutProgressListChanged(t *testing.T) {
	f := newFakeLAN(t)
	var progress atomic.Int64
	changed := make(chan struct{}, 8)
	r, cs := lanRigWith(t, f, 2*time.Second, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	// scene_apply has dry_run itself: the upstream answers the dry run.
	sc, e := callAs[sceneOut](t, r, operator, "hs4_scene_apply", map[string]any{"scene": "evening", "dry_run": true})
	if e != nil || sc.Applied || sc.Scene != "evening" || f.writes.Load() != 0 {
		t.Fatalf("pass-through dry run: %+v %v (writes %d)", sc, e, f.writes.Load())
	}

	// Progress, through a real client session.
	params := &mcp.CallToolParams{Name: "hs4_slow_report", Arguments: map[string]any{}}
	params.SetProgressToken("p1")
	cr, err := cs.CallTool(context.Background(), params)
	if err != nil || cr.IsError {
		t.Fatalf("slow_report: %v %v", err, cr)
	}
	waitFor(t, "progress forwarded", 5*time.Second, func() bool { return progress.Load() >= 1 })

	// Hangs past the 2 s timeout: unavailable, and the upstream's handler is cancelled.
	_, e = callAs[levelOut](t, r, admin, "hs4_slow_report", map[string]any{"hang": true})
	wantErr(t, e, CodeUnavailable, nil) // a hanging call
	waitFor(t, "cancellation upstream", 5*time.Second, func() bool { return f.canceled.Load() == 1 })

	// The upstream adds a tool: our client hears list_changed and sees it.
	for len(changed) > 0 {
		<-changed
	}
	mcp.AddTool(f.srv, &mcp.Tool{Name: "new_thing", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, levelOut, error) {
			return nil, levelOut{Level: 1}, nil
		})
	select {
	case <-changed:
	case <-time.After(hangGuard):
		t.Fatal("no tools/list_changed reached our client")
	}
	waitFor(t, "hs4_new_thing listed", 5*time.Second, func() bool {
		lt, err := cs.ListTools(context.Background(), nil)
		return err == nil && slices.ContainsFunc(lt.Tools, func(x *mcp.Tool) bool { return x.Name == "hs4_new_thing" })
	})
}

// A down upstream makes only its own tools answer unavailable; they work
// again once it is back, without restarting the agent.
func TestLANUpstreamRestart(t *testing.T) {
	f := newFakeLAN(t)
	r, _ := lanRig(t, f)
	addr := f.addr
	t0 := time.Now()
	f.http.CloseClientConnections()
	f.http.Close()

	_, e := callAs[levelOut](t, r, admin, "hs4_devices_get_level", map[string]any{})
	wantErr(t, e, CodeUnavailable, nil) // a down upstream
	if _, e := callAs[HealthSnapshot](t, r, admin, "system_get_health_snapshot", nil); e != nil {
		t.Fatalf("a local tool failed while an upstream is down: %v", e)
	}
	f.start(t, addr)
	waitFor(t, "the upstream reconnected", 15*time.Second, func() bool { return r.a.lanStatus()[0].State == "up" })
	if _, e := callAs[levelOut](t, r, admin, "hs4_devices_get_level", map[string]any{}); e != nil {
		t.Fatalf("after the restart: %v", e)
	}
	t.Logf("back %v after the upstream stopped", time.Since(t0))
}

// An upstream named like a local namespace never starts.
func TestLANNameCollidesWithLocal(t *testing.T) {
	cfg := config.Laptop(t.TempDir(), "me")
	cfg.Upstreams = []config.Upstream{{Name: "gpio", URL: "http://127.0.0.1:1/mcp"}}
	if err := cfg.CheckUpstreamNames([]string{"gpio"}); err == nil {
		t.Fatal("gpio accepted as an upstream name")
	}
}

func TestLANWireNames(t *testing.T) {
	for in, want := range map[string]string{
		"devices.list":          "hs4_devices_list",
		"getDevice":             "hs4_getdevice",
		"get-sum":               "hs4_get_sum",
		strings.Repeat("x", 60): "hs4_" + strings.Repeat("x", 35) + "_",
	} {
		got := lanWireName("hs4", in)
		if !strings.HasPrefix(got, want) || len(got) > 48 || !tool.SnakeName.MatchString(got) {
			t.Errorf("lanWireName(%q) = %q, want %q...", in, got, want)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An upstream that is down from the start costs nothing but its own tools:
// the agent serves, status says what is wrong, capabilities list the domain.
func TestLANDownFromTheStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	r := newRig(t, func(c *config.Config) {
		c.Upstreams = []config.Upstream{{Name: "hook", URL: "http://" + addr + "/mcp"}}
	})
	r.serve()
	if _, e := callAs[HealthSnapshot](t, r, admin, "system_get_health_snapshot", nil); e != nil {
		t.Fatalf("a local tool failed: %v", e)
	}
	waitFor(t, "the upstream reported down", 5*time.Second, func() bool {
		st := r.a.lanStatus()[0]
		return st.State == "down" && st.LastError != ""
	})
	caps, e := callAs[capabilities](t, r, admin, "system_get_capabilities", nil)
	if e != nil {
		t.Fatal(e)
	}
	found := false
	for _, dm := range caps.Domains {
		found = found || (dm.Name == "hook" && dm.Upstream != nil && dm.Upstream.State == "down")
	}
	if !found {
		t.Fatalf("capabilities: %+v", caps.Domains)
	}
}
