package agent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// messages collects a client's notifications/message and progress.
type messages struct {
	mu       sync.Mutex
	events   []map[string]any
	progress []*mcp.ProgressNotificationParams
}

func (m *messages) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			d, _ := req.Params.Data.(map[string]any)
			m.mu.Lock()
			m.events = append(m.events, d)
			m.mu.Unlock()
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			m.mu.Lock()
			m.progress = append(m.progress, req.Params)
			m.mu.Unlock()
		},
	}
}

func (m *messages) has(event string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.events {
		if e["event"] == event {
			return true
		}
	}
	return false
}

func TestDenialOfTheClientsOwnCallIsShown(t *testing.T) {
	r := newRig(t, nil)
	var m messages
	s := r.serveMany()(m.options(), "2025-11-25")
	ctx := context.Background()
	if err := s.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	// A high-risk call without confirm is refused by policy.
	res, _ := r.asSession(s, "service_control_service", map[string]any{"service_name": "nginx", "action": "restart"})
	if _, e := decodeResult[serviceControlOut](t, res); e == nil || e.Code != CodeFailedPrecondition {
		t.Fatalf("restart without confirm: %+v", e)
	}
	waitFor(t, "the denial message", 60*time.Second, func() bool { return m.has("call_denied") })
}

func TestHelperDownAndUpAreShown(t *testing.T) {
	r := newRig(t, nil)
	r.a.watch.every = 50 * time.Millisecond
	var m messages
	s := r.serveMany()(m.options(), "2025-11-25")
	if err := s.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	r.killHelper()
	waitFor(t, "helper_down", 60*time.Second, func() bool { return m.has("helper_down") })
	if m.has("helper_up") {
		t.Fatal("helper_up before the helper came back")
	}
	r.startHelper()
	waitFor(t, "helper_up", 60*time.Second, func() bool { return m.has("helper_up") })
}

func TestSlowToolReportsProgress(t *testing.T) {
	r := newRig(t, nil)
	var m messages
	s := r.serveMany()(m.options(), "2025-11-25")
	p := &mcp.CallToolParams{Name: "logs_query_journal", Arguments: map[string]any{"limit": 5}}
	p.SetProgressToken("tok-1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, p)
	if err != nil || res.IsError {
		t.Fatalf("journal: %v %v", err, res)
	}
	waitFor(t, "start and finish progress", 60*time.Second, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return slices.ContainsFunc(m.progress, func(n *mcp.ProgressNotificationParams) bool { return strings.Contains(n.Message, "finished") })
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	// Each notification has its own, growing progress value.
	seen := map[float64]bool{}
	for i, n := range m.progress {
		if n.ProgressToken != "tok-1" || seen[n.Progress] {
			t.Fatalf("progress %d: %+v", i, n)
		}
		seen[n.Progress] = true
	}
	if len(m.progress) < 2 {
		t.Fatalf("%d progress notifications, want start and finish", len(m.progress))
	}
	// Without a token, nothing is sent.
	before := len(m.progress)
	m.mu.Unlock()
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "logs_query_journal", Arguments: map[string]any{"limit": 5}}); err != nil || res.IsError {
		t.Fatalf("journal: %v", err)
	}
	m.mu.Lock()
	if len(m.progress) != before {
		t.Fatalf("progress without a token: %d", len(m.progress)-before)
	}
}

// A LAN upstream's high and critical tools ask the person the same way, and
// the upstream going down and coming back is shown.
func TestLANToolsAskThePersonAndUpstreamStateIsShown(t *testing.T) {
	f := newFakeLAN(t)
	r := newRig(t, func(c *config.Config) {
		c.Upstreams = []config.Upstream{{Name: "hs4", URL: "http://" + f.addr + "/mcp", Timeout: config.Duration(time.Second)}}
	})
	r.a.watch.every = 50 * time.Millisecond
	var m messages
	answer := "decline"
	opts := m.options()
	opts.ElicitationHandler = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: answer, Content: map[string]any{"confirm": true}}, nil
	}
	s := r.serveMany()(opts, "2025-11-25")
	if err := s.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the upstream's tools", 60*time.Second, func() bool {
		_, ok := r.a.tools.Lookup("hs4_delete_all")
		return ok
	})
	// Critical upstream tool: the person's answer stands in for the token.
	// delete_all answers an empty object (lan_test.go's fake upstream).
	res, _, rec := callOnce(t, r, s, "hs4_delete_all", map[string]any{"reason": "reset"})
	if _, e := decodeResult[struct{}](t, res); e == nil || e.Code != CodePermissionDenied || rec.Decision != store.DecisionDeclined || f.writes.Load() != 0 {
		t.Fatalf("declined upstream call: %+v %+v", e, rec)
	}
	answer = "accept"
	res, _, rec = callOnce(t, r, s, "hs4_delete_all", map[string]any{"reason": "reset"})
	if _, e := decodeResult[struct{}](t, res); e != nil || rec.Decision != store.DecisionAllow || rec.Elicitation == "" || f.writes.Load() != 1 {
		t.Fatalf("accepted upstream call: %+v %+v", e, rec)
	}
	addr := f.addr
	f.http.CloseClientConnections()
	f.http.Close()
	waitFor(t, "upstream_down", 60*time.Second, func() bool { return m.has("upstream_down") })
	f.start(t, addr)
	waitFor(t, "upstream_up", 60*time.Second, func() bool { return m.has("upstream_up") })
}
