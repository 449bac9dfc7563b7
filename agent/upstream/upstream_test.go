package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// shortTimeout is the per-call timeout of clients whose calls are meant to
// time out. Their health pings share it, so it stays far above what a
// loopback round trip takes even on a busy machine.
const shortTimeout = 2 * time.Second

// newTestClient builds a Client with test-friendly timings.
func newTestClient(t *testing.T, o Options) *Client {
	t.Helper()
	if o.Name == "" {
		o.Name = "fake"
	}
	if o.Timeout == 0 {
		o.Timeout = hangGuard / 2 // answers arrive; a test that wants a timeout sets its own
	}
	if o.Logger == nil && testing.Verbose() {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return New(o)
}

func stats(t *testing.T, c *Client) statsOut {
	t.Helper()
	res, err := c.Call(context.Background(), "stats", nil, CallOptions{ReadOnly: true})
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	var s statsOut
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("stats: %v (%s)", err, b)
	}
	return s
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *upstream.Error", err, err)
	}
	return e
}

func toolNames(c *Client) []string {
	var names []string
	for _, t := range c.Tools() {
		names = append(names, t.Name)
	}
	return names
}

// TestTransports runs the same behaviour against every way of reaching an
// upstream: streamable HTTP (2025-11-25, stateful), streamable HTTP
// stateless (2026-07-28), the legacy HTTP+SSE transport (reached through the
// fallback), and stdio to a real child process.
func TestTransports(t *testing.T) {
	for _, mode := range []string{"streamable", "stateless", "sse", "stdio"} {
		t.Run(mode, func(t *testing.T) {
			leakCheck(t)
			var changed atomic.Int64
			o := Options{OnToolsChanged: func() { changed.Add(1) }}
			wantTransport := TransportStreamable
			switch mode {
			case "stdio":
				o.Command, o.Env = fakeCommand()
				wantTransport = TransportStdio
			case "sse":
				o.URL = startHTTPFake(t, mode, fakeConfig{}).URL()
				wantTransport = TransportSSE
			default:
				o.URL = startHTTPFake(t, mode, fakeConfig{}).URL()
			}
			c := newTestClient(t, o)
			runClient(t, c)
			waitUp(t, c)
			ctx := context.Background()

			st := c.Status()
			if st.Transport != wantTransport || st.Server != "fake 1.0" || st.Protocol == "" {
				t.Errorf("status = %+v; want transport %s, server \"fake 1.0\"", st, wantTransport)
			}
			t.Logf("protocol %s", st.Protocol)

			// The health ping must pass on every transport, or Run would
			// reconnect every PingInterval. (Under 2026-07-28 the SDK's Ping
			// omits the required _meta and the upstream answers with a
			// JSON-RPC error, which still proves it is alive.)
			c.mu.Lock()
			cur := c.cur
			c.mu.Unlock()
			if err := c.ping(ctx, cur); err != nil {
				t.Errorf("health ping: %v", err)
			}

			// Discovery followed pagination (page size 3) and sorted.
			names := toolNames(c)
			if len(names) != initialTools || !slices.IsSorted(names) {
				t.Fatalf("tools = %v (%d); want %d sorted", names, len(names), initialTools)
			}
			// The callback runs just after the session is published.
			eventually(t, "OnToolsChanged after discovery", func() bool { return changed.Load() == 1 })
			for _, tool := range c.Tools() {
				if tool.Name == "read" && (tool.Annotations == nil || !tool.Annotations.ReadOnlyHint || tool.Description != "reads") {
					t.Errorf("read tool lost its description or annotations: %+v", tool)
				}
			}

			t.Run("read", func(t *testing.T) {
				res, err := c.Call(ctx, "read", map[string]any{"q": "x"}, CallOptions{ReadOnly: true})
				if err != nil || resultText(res) != "read:x" {
					t.Fatalf("read = %v, %v", res, err)
				}
			})
			t.Run("write", func(t *testing.T) {
				res, err := c.Call(ctx, "write", nil, CallOptions{})
				if err != nil || resultText(res) != "wrote 1" {
					t.Fatalf("write = %v, %v", res, err)
				}
			})
			t.Run("isError is a result", func(t *testing.T) {
				res, err := c.Call(ctx, "fail", nil, CallOptions{})
				if err != nil || !res.IsError || resultText(res) != "boom" {
					t.Fatalf("fail = %+v, %v; want an isError result", res, err)
				}
			})
			t.Run("unknown tool is a protocol error", func(t *testing.T) {
				_, err := c.Call(ctx, "nope", nil, CallOptions{ReadOnly: true})
				e := asError(t, err)
				var werr *jsonrpc.Error
				if e.Kind != Protocol || e.Code != jsonrpc.CodeInvalidParams || e.Retryable || !errors.As(err, &werr) {
					t.Fatalf("err = %+v", e)
				}
				if !strings.HasPrefix(err.Error(), "upstream fake: ") || !strings.Contains(err.Error(), "unknown tool") {
					t.Errorf("message %q", err)
				}
			})
			t.Run("progress", func(t *testing.T) {
				type note struct {
					p, total float64
					msg      string
				}
				var mu sync.Mutex
				var got []note
				done := make(chan error, 1)
				go func() {
					_, err := c.Call(ctx, "progress", nil, CallOptions{Progress: func(p, total float64, msg string) {
						mu.Lock()
						got = append(got, note{p, total, msg})
						mu.Unlock()
					}})
					done <- err
				}()
				eventually(t, "3 progress notifications", func() bool {
					mu.Lock()
					defer mu.Unlock()
					return len(got) == 3
				})
				if _, err := c.Call(ctx, "progress_ack", nil, CallOptions{}); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				want := []note{{1, 3, "step 1"}, {2, 3, "step 2"}, {3, 3, "step 3"}}
				if !slices.Equal(got, want) {
					t.Errorf("progress = %v; want %v", got, want)
				}
			})
			t.Run("cancellation is forwarded", func(t *testing.T) {
				before := stats(t, c)
				cctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() {
					_, err := c.Call(cctx, "hang", nil, CallOptions{ReadOnly: true})
					done <- err
				}()
				eventually(t, "hang started", func() bool { return stats(t, c).Started == before.Started+1 })
				cancel()
				e := asError(t, <-done)
				if e.Kind != Canceled || e.Retryable {
					t.Fatalf("err = %+v", e)
				}
				eventually(t, "upstream handler cancelled", func() bool {
					return stats(t, c).Canceled == before.Canceled+1
				})
			})
			t.Run("timeout", func(t *testing.T) {
				// A client of its own with a short per-call timeout: c keeps
				// a hang guard for its calls, which must be answered
				// however slow the machine is. The HTTP fakes share their
				// counters across sessions; a stdio client has its own child.
				o := o
				o.OnToolsChanged = nil
				o.Timeout = shortTimeout
				short := newTestClient(t, o)
				runClient(t, short)
				waitUp(t, short)
				watch := c
				if mode == "stdio" {
					watch = short
				}
				before := stats(t, watch)
				_, err := short.Call(ctx, "hang", nil, CallOptions{ReadOnly: true})
				e := asError(t, err)
				if e.Kind != Timeout || !e.Retryable || !e.MayHaveRun ||
					!strings.Contains(err.Error(), fmt.Sprintf("no answer within %v; cancellation was sent", shortTimeout)) {
					t.Fatalf("err = %+v (%v)", e, err)
				}
				// The upstream handler was cancelled, and a timeout is not
				// retried, even for a read: the time budget is spent.
				eventually(t, "handler cancelled", func() bool {
					return stats(t, watch).Canceled == before.Canceled+1
				})
				if s := stats(t, watch); s.Started != before.Started+1 {
					t.Errorf("hang started %d times; want 1 (no retries)", s.Started-before.Started)
				}
			})
			t.Run("list_changed", func(t *testing.T) {
				n := changed.Load()
				if _, err := c.Call(ctx, "add_tool", nil, CallOptions{}); err != nil {
					t.Fatal(err)
				}
				eventually(t, "added tool discovered", func() bool {
					return slices.Contains(toolNames(c), "added_1")
				})
				eventually(t, "OnToolsChanged", func() bool { return changed.Load() == n+1 })
				res, err := c.Call(ctx, "added_1", nil, CallOptions{})
				if err != nil || resultText(res) != "added_1" {
					t.Fatalf("added_1 = %v, %v", res, err)
				}
			})
			t.Run("resources and prompts", func(t *testing.T) {
				rs, err := c.Resources(ctx)
				if err != nil || len(rs) != 1 || rs[0].URI != "fake://readme" {
					t.Fatalf("resources = %v, %v", rs, err)
				}
				rr, err := c.ReadResource(ctx, "fake://readme")
				if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "hello" {
					t.Fatalf("read resource = %v, %v", rr, err)
				}
				if _, err := c.ResourceTemplates(ctx); err != nil {
					t.Fatal(err)
				}
				ps, err := c.Prompts(ctx)
				if err != nil || len(ps) != 1 || ps[0].Name != "greet" {
					t.Fatalf("prompts = %v, %v", ps, err)
				}
				gp, err := c.GetPrompt(ctx, "greet", map[string]string{"who": "pi"})
				if err != nil || len(gp.Messages) != 1 || gp.Messages[0].Content.(*mcp.TextContent).Text != "hi pi" {
					t.Fatalf("get prompt = %v, %v", gp, err)
				}
			})
			st = c.Status()
			if st.State != StateUp || st.LastLatency <= 0 || st.P50Latency <= 0 || st.Reconnects != 0 {
				t.Errorf("final status %+v", st)
			}
		})
	}
}

func TestNotRunning(t *testing.T) {
	leakCheck(t)
	c := New(Options{Name: "idle", URL: "http://127.0.0.1:1/mcp"})
	if st := c.Status(); st.State != StateConnecting || st.Endpoint != "http://127.0.0.1:1/mcp" {
		t.Errorf("status %+v", st)
	}
	_, err := c.Call(context.Background(), "write", nil, CallOptions{})
	e := asError(t, err)
	if e.Kind != Unavailable || !e.Retryable || e.MayHaveRun {
		t.Fatalf("err = %+v", e)
	}

	bad := New(Options{Name: "bad", URL: "ftp://x", Command: []string{"x"}})
	if bad.Status().State != StateDown {
		t.Errorf("invalid options: state %v", bad.Status().State)
	}
	_, err = bad.Call(context.Background(), "x", nil, CallOptions{ReadOnly: true})
	if e := asError(t, err); e.Kind != Unavailable || e.Retryable || !strings.Contains(err.Error(), "misconfigured") {
		t.Fatalf("err = %+v", e)
	}
	for _, o := range []Options{{URL: "ftp://x"}, {URL: "http://"}, {}, {Command: []string{""}}, {URL: "http://x", Timeout: -1}} {
		if o.Validate() == nil {
			t.Errorf("Validate(%+v) = nil", o)
		}
	}
}

func TestBearerToken(t *testing.T) {
	leakCheck(t)
	const token = "s3cret-bearer-token"
	h := startHTTPFake(t, "streamable", fakeConfig{token: token})
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	var resolved atomic.Int64
	good := newTestClient(t, Options{URL: h.URL(), Logger: logger, Token: func() (string, error) {
		resolved.Add(1)
		return token, nil
	}})
	runClient(t, good)
	waitUp(t, good)
	if _, err := good.Call(context.Background(), "read", nil, CallOptions{ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	if resolved.Load() != 1 {
		t.Errorf("token resolved %d times; want once per connect", resolved.Load())
	}

	const wrong = "wrong-token-value"
	before := h.requests.Load()
	bad := newTestClient(t, Options{URL: h.URL(), Logger: logger, MinBackoff: time.Hour,
		Token: func() (string, error) { return wrong, nil }})
	runClient(t, bad)
	eventually(t, "connect failure", func() bool { return bad.Status().State == StateDown })
	st := bad.Status()
	if !strings.Contains(st.LastError, "401") || !strings.Contains(st.LastError, "token") {
		t.Errorf("LastError = %q; want a clear 401 message", st.LastError)
	}
	if st.Transport != "" {
		t.Errorf("transport %q after an auth failure", st.Transport)
	}
	_, err := bad.Call(context.Background(), "write", nil, CallOptions{})
	if e := asError(t, err); e.Kind != Unavailable || !e.Retryable || e.MayHaveRun || !strings.Contains(err.Error(), "401") {
		t.Errorf("call error = %v", err)
	}
	// discover + initialize, and no SSE fallback after a 401.
	if n := h.requests.Load() - before; n > 2 {
		t.Errorf("%d requests for a refused connect; want at most 2 (no SSE fallback)", n)
	}
	for _, s := range []string{st.LastError, fmt.Sprint(err), logs.String(), fmt.Sprintf("%+v", good.Status())} {
		if strings.Contains(s, token) || strings.Contains(s, wrong) {
			t.Errorf("token leaked: %s", s)
		}
	}
}

func TestCheckAddrs(t *testing.T) {
	leakCheck(t)
	h := startHTTPFake(t, "streamable", fakeConfig{})
	var mu sync.Mutex
	var seen []string
	refuse := newTestClient(t, Options{URL: h.URL(), MinBackoff: time.Hour,
		CheckAddrs: func(host string, addrs []netip.Addr) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("%s %v", host, addrs))
			return errors.New("loopback is not on the LAN")
		}})
	runClient(t, refuse)
	eventually(t, "refused connect", func() bool { return refuse.Status().State == StateDown })
	if st := refuse.Status(); !strings.Contains(st.LastError, "address policy refused 127.0.0.1") ||
		!strings.Contains(st.LastError, "loopback is not on the LAN") {
		t.Errorf("LastError = %q", st.LastError)
	}
	if n := h.requests.Load(); n != 0 {
		t.Errorf("upstream saw %d requests despite the refusal", n)
	}
	mu.Lock()
	if len(seen) == 0 || seen[0] != "127.0.0.1 [127.0.0.1]" {
		t.Errorf("CheckAddrs saw %v", seen)
	}
	mu.Unlock()

	var checked atomic.Int64
	allow := newTestClient(t, Options{URL: h.URL(), CheckAddrs: func(string, []netip.Addr) error {
		checked.Add(1)
		return nil
	}})
	runClient(t, allow)
	waitUp(t, allow)
	if checked.Load() == 0 {
		t.Error("CheckAddrs not called before connecting")
	}
}

// endCooldown makes an open breaker's cooldown run out now, as if its time
// had passed: the test controls when the trial call happens, not the clock.
func endCooldown(c *Client) {
	c.mu.Lock()
	c.openUntil = time.Now()
	c.mu.Unlock()
}

func TestBreaker(t *testing.T) {
	leakCheck(t)
	h := startHTTPFake(t, "streamable", fakeConfig{})
	// The cooldown never ends by itself within the test (endCooldown ends it).
	c := newTestClient(t, Options{URL: h.URL(), BreakerCooldown: time.Hour})
	runClient(t, c)
	waitUp(t, c)
	ctx := context.Background()

	// isError results and protocol errors are answers, not failures.
	for range 6 {
		_, _ = c.Call(ctx, "fail", nil, CallOptions{})
		_, _ = c.Call(ctx, "nope", nil, CallOptions{})
	}
	if st := c.Status(); st.ConsecutiveFailures != 0 || st.State != StateUp {
		t.Fatalf("after answered errors: %+v", st)
	}
	// Writes the upstream refuses with 503 are failures, and never retried.
	failWrites := func(n int) {
		t.Helper()
		h.failNext.Store(int64(n))
		for i := range n {
			_, err := c.Call(ctx, "write", nil, CallOptions{})
			if e := asError(t, err); e.Kind != Unavailable || e.Retryable || !e.MayHaveRun || !strings.Contains(err.Error(), "outcome unknown") {
				t.Fatalf("failing write %d: %+v (%v)", i, e, err)
			}
		}
	}
	failWrites(DefaultBreakerThreshold)
	st := c.Status()
	if st.State != StateBreakerOpen || st.ConsecutiveFailures != DefaultBreakerThreshold || !st.BreakerRetryAt.After(time.Now()) {
		t.Fatalf("status after %d failures: %+v", DefaultBreakerThreshold, st)
	}
	// An open breaker answers at once, without sending anything upstream.
	sent := h.toolCalls.Load()
	_, err := c.Call(ctx, "read", nil, CallOptions{ReadOnly: true})
	e := asError(t, err)
	if e.Kind != Unavailable || !e.Retryable || e.MayHaveRun || e.RetryAfter <= 0 || !strings.Contains(err.Error(), "circuit breaker open") {
		t.Fatalf("breaker error = %+v (%v)", e, err)
	}
	if n := h.toolCalls.Load() - sent; n != 0 {
		t.Errorf("open breaker sent %d calls upstream", n)
	}
	// After the cooldown one trial call goes through and closes the breaker.
	endCooldown(c)
	if _, err := c.Call(ctx, "read", nil, CallOptions{ReadOnly: true}); err != nil {
		t.Fatalf("trial call: %v", err)
	}
	if st := c.Status(); st.State != StateUp || st.ConsecutiveFailures != 0 {
		t.Fatalf("after recovery: %+v", st)
	}
	// A failed trial re-opens it at once.
	failWrites(DefaultBreakerThreshold)
	endCooldown(c)
	sent = h.toolCalls.Load()
	failWrites(1)
	if _, err := c.Call(ctx, "read", nil, CallOptions{}); !strings.Contains(fmt.Sprint(err), "circuit breaker open") {
		t.Fatalf("after failed trial: %v", err)
	}
	if n := h.toolCalls.Load() - sent; n != 1 {
		t.Errorf("%d calls went upstream around the trial; want the trial alone", n)
	}
}

// TestTimeoutOpensBreaker: a call that gets no answer in time counts as a
// failure too, is cancelled upstream, and a write is not retried.
func TestTimeoutOpensBreaker(t *testing.T) {
	leakCheck(t)
	h := startHTTPFake(t, "streamable", fakeConfig{})
	c := newTestClient(t, Options{URL: h.URL(), Timeout: shortTimeout, BreakerThreshold: 1, BreakerCooldown: time.Hour})
	runClient(t, c)
	waitUp(t, c)
	ctx := context.Background()
	_, err := c.Call(ctx, "hang", nil, CallOptions{})
	e := asError(t, err)
	if e.Kind != Timeout || e.Retryable || !e.MayHaveRun ||
		!strings.Contains(err.Error(), "may already have taken effect (outcome unknown; not retried)") ||
		!strings.HasPrefix(err.Error(), fmt.Sprintf(`upstream fake: tools/call "hang": no answer within %v`, shortTimeout)) {
		t.Fatalf("hang: %+v (%v)", e, err)
	}
	_, err = c.Call(ctx, "read", nil, CallOptions{ReadOnly: true})
	if e := asError(t, err); e.Kind != Unavailable || e.MayHaveRun || !strings.Contains(err.Error(), "circuit breaker open") {
		t.Fatalf("after a timeout: %+v (%v)", e, err)
	}
	f := h.fake()
	eventually(t, "the hung handler cancelled", func() bool { return f.canceled.Load() == 1 })
	if n := f.started.Load(); n != 1 {
		t.Errorf("%d hang calls reached the upstream; want 1", n)
	}
}

func TestReadRetries(t *testing.T) {
	leakCheck(t)
	h := startHTTPFake(t, "streamable", fakeConfig{})
	c := newTestClient(t, Options{URL: h.URL()})
	runClient(t, c)
	waitUp(t, c)
	ctx := context.Background()

	// A read that hits a transient 503 is retried and succeeds.
	h.failNext.Store(1)
	res, err := c.Call(ctx, "read", map[string]any{"q": "again"}, CallOptions{ReadOnly: true})
	if err != nil || resultText(res) != "read:again" {
		t.Fatalf("read = %v, %v", res, err)
	}
	// Two retries at most.
	h.failNext.Store(5)
	_, err = c.Call(ctx, "read", nil, CallOptions{ReadOnly: true})
	if e := asError(t, err); e.Kind != Unavailable || !e.Retryable {
		t.Fatalf("err = %+v", e)
	}
	if n := h.failNext.Load(); n != 2 {
		t.Errorf("%d attempts; want 3", 5-n)
	}
	// A write is never retried, and since the upstream received it its
	// outcome is reported as unknown.
	h.failNext.Store(1)
	_, err = c.Call(ctx, "write", nil, CallOptions{})
	e := asError(t, err)
	if e.Kind != Unavailable || e.Retryable || !e.MayHaveRun || !strings.Contains(err.Error(), "outcome unknown") {
		t.Fatalf("write err = %+v (%v)", e, err)
	}
	h.failNext.Store(0)
	if s := stats(t, c); s.Writes != 0 {
		t.Errorf("writes = %d", s.Writes)
	}
}

// TestRestart kills the upstream mid-session and starts a new one on the
// same address: in-flight and new calls fail Unavailable, the tool list is
// kept, and the client reconnects by itself.
func TestRestart(t *testing.T) {
	for _, mode := range []string{"streamable", "stateless", "sse"} {
		t.Run(mode, func(t *testing.T) {
			leakCheck(t)
			h := startHTTPFake(t, mode, fakeConfig{})
			var changed atomic.Int64
			c := newTestClient(t, Options{URL: h.URL(), OnToolsChanged: func() { changed.Add(1) }})
			runClient(t, c)
			waitUp(t, c)
			ctx := context.Background()
			transport := c.Status().Transport
			if _, err := c.Call(ctx, "read", nil, CallOptions{ReadOnly: true}); err != nil {
				t.Fatal(err)
			}

			inflight := make(chan error, 1)
			go func() {
				_, err := c.Call(ctx, "hang", nil, CallOptions{})
				inflight <- err
			}()
			eventually(t, "hang started", func() bool { return h.fake().started.Load() == 1 })

			h.stop()
			// The call fails because its connection was cut, not because
			// its (hang guard) timeout ran out: that would be a Timeout.
			e := asError(t, <-inflight)
			if e.Kind != Unavailable || !strings.Contains(e.Error(), "outcome unknown") {
				t.Errorf("in-flight call: %+v (%v)", e, e)
			}
			_, err := c.Call(ctx, "read", nil, CallOptions{ReadOnly: true})
			if e := asError(t, err); e.Kind != Unavailable || !e.Retryable {
				t.Errorf("call while down: %+v", e)
			}
			eventually(t, "down", func() bool { return c.Status().State == StateDown })
			if n := len(c.Tools()); n != initialTools {
				t.Errorf("tools while down = %d; want the last known %d", n, initialTools)
			}

			h.start()
			restarted := time.Now()
			eventually(t, "reconnect", func() bool {
				_, err := c.Call(ctx, "read", nil, CallOptions{ReadOnly: true})
				return err == nil
			})
			t.Logf("%s: calls work %v after the restart", mode, time.Since(restarted).Round(time.Millisecond))
			st := c.Status()
			if st.State != StateUp || st.Reconnects < 1 || st.Transport != transport {
				t.Errorf("status after restart: %+v", st)
			}
			if changed.Load() != 1 {
				t.Errorf("OnToolsChanged fired %d times; the list did not change", changed.Load())
			}
			// list_changed still works on the new session.
			if _, err := c.Call(ctx, "add_tool", nil, CallOptions{}); err != nil {
				t.Fatal(err)
			}
			eventually(t, "list_changed after restart", func() bool {
				return slices.Contains(toolNames(c), "added_1")
			})
		})
	}
}

// TestStdioRestart kills the child process; the client starts a new one.
func TestStdioRestart(t *testing.T) {
	leakCheck(t)
	cmd, env := fakeCommand()
	c := newTestClient(t, Options{Command: cmd, Env: env})
	runClient(t, c)
	waitUp(t, c)
	pid := stats(t, c).PID
	if pid == os.Getpid() || pid == 0 {
		t.Fatalf("stats pid %d", pid)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "new process", func() bool {
		res, err := c.Call(context.Background(), "stats", nil, CallOptions{ReadOnly: true})
		if err != nil {
			if e := asError(t, err); e.Kind != Unavailable {
				t.Fatalf("while restarting: %v", err)
			}
			return false
		}
		var s statsOut
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &s)
		return s.PID != pid && s.PID != 0
	})
	if st := c.Status(); st.Reconnects != 1 || st.LastError == "" {
		t.Errorf("status %+v", st)
	}
}

func TestStdioCommandMissing(t *testing.T) {
	leakCheck(t)
	c := newTestClient(t, Options{Command: []string{"/nonexistent/mcp-server"}, MinBackoff: time.Hour})
	runClient(t, c)
	eventually(t, "down", func() bool { return c.Status().State == StateDown })
	if st := c.Status(); !strings.Contains(st.LastError, "/nonexistent/mcp-server") {
		t.Errorf("LastError %q", st.LastError)
	}
}

// TestPollsWithoutListChanged: an upstream that never sends list_changed is
// relisted on every health tick instead.
func TestPollsWithoutListChanged(t *testing.T) {
	leakCheck(t)
	h := startHTTPFake(t, "streamable", fakeConfig{quiet: true})
	var changed atomic.Int64
	c := newTestClient(t, Options{URL: h.URL(), PingInterval: 20 * time.Millisecond, OnToolsChanged: func() { changed.Add(1) }})
	runClient(t, c)
	waitUp(t, c)
	if _, err := c.Call(context.Background(), "add_tool", nil, CallOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "polled tool list", func() bool { return slices.Contains(toolNames(c), "added_1") })
	if n := changed.Load(); n != 2 {
		t.Errorf("OnToolsChanged fired %d times; want 2 (discovery, one change)", n)
	}
	if st := c.Status(); st.Reconnects != 0 {
		t.Errorf("reconnected %d times while polling", st.Reconnects)
	}
}

// TestSSEEndpointElsewhere: an SSE server names its own message endpoint.
// One that points at another host must not get our requests (or token).
func TestSSEEndpointElsewhere(t *testing.T) {
	leakCheck(t)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: endpoint\ndata: http://198.51.100.7:9/steal\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	var mu sync.Mutex
	var hosts []string
	c := newTestClient(t, Options{URL: ts.URL + "/mcp", MinBackoff: time.Hour,
		Token: func() (string, error) { return "secret-token", nil },
		CheckAddrs: func(host string, _ []netip.Addr) error {
			mu.Lock()
			defer mu.Unlock()
			hosts = append(hosts, host)
			return nil
		}})
	runClient(t, c)
	eventually(t, "refused connect", func() bool { return c.Status().State == StateDown })
	if st := c.Status(); !strings.Contains(st.LastError, "refusing request to http://198.51.100.7:9") {
		t.Errorf("LastError = %q", st.LastError)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range hosts {
		if h != "127.0.0.1" {
			t.Errorf("dialed %s", h)
		}
	}
}
