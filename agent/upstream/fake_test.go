package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fake upstream is written with the go-sdk server, like the LAN servers
// we front. All its observable state is reachable through tools, so the
// same assertions work in-process (HTTP) and in a child process (stdio).

const stdioArg = "upstream-fake-stdio"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == stdioArg {
		// Re-executed as a stdio MCP server by the Command tests.
		f := newFake(3, false)
		err := f.srv.Run(context.Background(), &mcp.StdioTransport{})
		f.shutdown()
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake stdio server:", err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeCommand re-executes the test binary as a stdio server. Under -race the
// child would otherwise sleep 1s at exit (GORACE atexit_sleep_ms).
func fakeCommand() (argv, env []string) {
	return []string{os.Args[0], stdioArg}, []string{"GORACE=atexit_sleep_ms=0"}
}

type fake struct {
	srv      *mcp.Server
	writes   atomic.Int64
	started  atomic.Int64 // hang calls started
	canceled atomic.Int64 // hang calls that saw their ctx cancelled
	added    atomic.Int64
	ack      chan struct{} // releases one "progress" call
	stop     chan struct{} // closed on shutdown, releases hung handlers
	stopOnce sync.Once
}

type qIn struct {
	Q string `json:"q,omitempty"`
}

type statsOut struct {
	Started  int64 `json:"started"`
	Canceled int64 `json:"canceled"`
	Writes   int64 `json:"writes"`
	PID      int   `json:"pid"`
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// bulkTools is how many filler tools make discovery span several pages.
const bulkTools = 8

// newFake builds the fake upstream. quiet turns off tools/list_changed, like
// servers that never notify.
func newFake(pageSize int, quiet bool) *fake {
	f := &fake{ack: make(chan struct{}, 16), stop: make(chan struct{})}
	so := &mcp.ServerOptions{PageSize: pageSize}
	if quiet {
		so.Capabilities = &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}
	}
	f.srv = mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "1.0"}, so)
	s := f.srv
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "reads", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in qIn) (*mcp.CallToolResult, any, error) {
			return text("read:" + in.Q), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "write"},
		func(context.Context, *mcp.CallToolRequest, qIn) (*mcp.CallToolResult, any, error) {
			return text(fmt.Sprintf("wrote %d", f.writes.Add(1))), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "hang"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ qIn) (*mcp.CallToolResult, any, error) {
			f.started.Add(1)
			select {
			case <-ctx.Done():
				f.canceled.Add(1)
				return nil, nil, ctx.Err()
			case <-f.stop:
				return nil, nil, fmt.Errorf("shutting down")
			}
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail"},
		func(context.Context, *mcp.CallToolRequest, qIn) (*mcp.CallToolResult, any, error) {
			r := text("boom")
			r.IsError = true
			return r, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ qIn) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= 3 && tok != nil; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i)})
			}
			// Progress notifications are delivered asynchronously to the
			// client; the test releases us once it has seen them all.
			select {
			case <-f.ack:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-f.stop:
			}
			return text("done"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "progress_ack"},
		func(context.Context, *mcp.CallToolRequest, qIn) (*mcp.CallToolResult, any, error) {
			f.ack <- struct{}{}
			return text("ok"), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "stats"},
		func(context.Context, *mcp.CallToolRequest, qIn) (*mcp.CallToolResult, statsOut, error) {
			return nil, statsOut{Started: f.started.Load(), Canceled: f.canceled.Load(), Writes: f.writes.Load(), PID: os.Getpid()}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add_tool"},
		func(context.Context, *mcp.CallToolRequest, qIn) (*mcp.CallToolResult, any, error) {
			name := fmt.Sprintf("added_%d", f.added.Add(1))
			mcp.AddTool(s, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, qIn) (*mcp.CallToolResult, any, error) {
				return text(name), nil, nil
			})
			return text(name), nil, nil
		})
	for i := range bulkTools {
		mcp.AddTool(s, &mcp.Tool{Name: fmt.Sprintf("bulk_%02d", i)},
			func(context.Context, *mcp.CallToolRequest, qIn) (*mcp.CallToolResult, any, error) {
				return text("bulk"), nil, nil
			})
	}
	s.AddResource(&mcp.Resource{URI: "fake://readme", Name: "readme", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "hello"}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi " + req.Params.Arguments["who"]}}}}, nil
		})
	return f
}

// initialTools is the number of tools the fake starts with.
const initialTools = 8 + bulkTools

func (f *fake) shutdown() {
	f.stopOnce.Do(func() { close(f.stop) })
}

// httpFake serves a fake over HTTP on a fixed loopback address, so it can be
// stopped and started again "after a restart" at the same address.
type httpFake struct {
	t         testing.TB
	mode      string // "streamable", "stateless" or "sse"
	cfg       fakeConfig
	addr      string
	requests  atomic.Int64
	toolCalls atomic.Int64 // tools/call POSTs received, refused or not
	failNext  atomic.Int64 // answer this many tools/call POSTs with 503
	auths     atomic.Int64 // requests that carried an Authorization header
	serverLog syncBuffer   // the HTTPS server's own errors (TLS handshakes)

	mu sync.Mutex
	f  *fake
	ts *httptest.Server
}

type fakeConfig struct {
	token string // bearer token the server requires, if set
	quiet bool   // no tools/list_changed
	// cert, if set, serves HTTPS with this certificate.
	cert *tls.Certificate
}

func startHTTPFake(t testing.TB, mode string, cfg fakeConfig) *httpFake {
	t.Helper()
	h := &httpFake{t: t, mode: mode, cfg: cfg, addr: "127.0.0.1:0"}
	h.start()
	t.Cleanup(h.stop)
	return h
}

func (h *httpFake) URL() string {
	if h.cfg.cert != nil {
		return "https://" + h.addr + "/mcp"
	}
	return "http://" + h.addr + "/mcp"
}

func (h *httpFake) fake() *fake {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.f
}

func (h *httpFake) start() {
	h.t.Helper()
	f := newFake(3, h.cfg.quiet)
	var mh http.Handler
	switch h.mode {
	case "streamable":
		mh = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv }, nil)
	case "stateless":
		mh = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.srv },
			&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true})
	case "sse":
		mh = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return f.srv }, nil)
	default:
		h.t.Fatalf("unknown mode %q", h.mode)
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		if r.Header.Get("Authorization") != "" {
			h.auths.Add(1)
		}
		if h.cfg.token != "" && r.Header.Get("Authorization") != "Bearer "+h.cfg.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				h.toolCalls.Add(1)
				if h.failNext.Load() > 0 && h.failNext.Add(-1) >= 0 {
					http.Error(w, "busy", http.StatusServiceUnavailable)
					return
				}
			}
		}
		mh.ServeHTTP(w, r)
	})
	var l net.Listener
	var err error
	deadline := time.Now().Add(hangGuard)
	for {
		l, err = net.Listen("tcp", h.addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // the old socket may linger briefly
	}
	if err != nil {
		h.t.Fatalf("listen %s: %v", h.addr, err)
	}
	ts := httptest.NewUnstartedServer(handler)
	ts.Listener.Close()
	ts.Listener = l
	if h.cfg.cert != nil {
		ts.Config.ErrorLog = log.New(&h.serverLog, "", 0)
		ts.TLS = &tls.Config{Certificates: []tls.Certificate{*h.cfg.cert}}
		ts.StartTLS()
	} else {
		ts.Start()
	}
	h.mu.Lock()
	h.f, h.ts, h.addr = f, ts, l.Addr().String()
	h.mu.Unlock()
}

// stop kills the server like a crash: connections are cut and every server
// session is closed.
func (h *httpFake) stop() {
	h.mu.Lock()
	ts, f := h.ts, h.f
	h.ts = nil
	h.mu.Unlock()
	if ts == nil {
		return
	}
	// Cut the connections before releasing hung handlers, so their
	// answers cannot reach the client, as in a crash.
	ts.CloseClientConnections()
	f.shutdown()
	ts.Close()
	for ss := range f.srv.Sessions() {
		_ = ss.Close()
	}
}

func (h *httpFake) restart() {
	h.stop()
	h.start()
}

// leakCheck fails the test if goroutines started during it are still
// running once its cleanups are done. Register it first: cleanups run in
// reverse order, so it then runs last.
func leakCheck(t testing.TB) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(hangGuard)
		for {
			n := runtime.NumGoroutine()
			if n <= base {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d running, %d before the test\n%s", n, base, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// hangGuard is how long a test waits for something that must happen before
// it gives up. It only keeps a broken build from hanging: on a busy shared
// machine a wait that usually takes milliseconds can take seconds, so no
// verdict may depend on how quickly a condition becomes true.
const hangGuard = 60 * time.Second

// eventually polls cond until it holds; it fails the test only after
// hangGuard.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", hangGuard, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// runClient starts c.Run and stops it (waiting for it) at cleanup.
func runClient(t testing.TB, c *Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(hangGuard):
			t.Error("Run did not return after its context was cancelled")
		}
	})
}

func waitUp(t testing.TB, c *Client) {
	t.Helper()
	eventually(t, "upstream up", func() bool { return c.Status().State == StateUp })
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
