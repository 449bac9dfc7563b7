package transport

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// rig is the doors of a bare mcp.Server with two tools of its own, on a
// socket in a temporary directory: no agent, store or helper, so the
// framing and line filter tests run in seconds.
type rig struct {
	t      testing.TB
	cfg    *config.Config
	server *mcp.Server
	d      *Doors

	mu      sync.Mutex
	refused []Refusal // what the doors asked to audit
}

// newRig makes the doors with mod applied to the laptop config, whose
// [roles] map the user running the test.
func newRig(t testing.TB, mod func(*config.Config)) *rig {
	t.Helper()
	name := strconv.Itoa(os.Getuid())
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	cfg := config.Laptop(t.TempDir(), name)
	if mod != nil {
		mod(&cfg)
	}
	r := &rig{t: t, cfg: &cfg}
	r.server = mcp.NewServer(&mcp.Implementation{Name: "transport-test", Version: "1"}, &mcp.ServerOptions{
		Logger: slog.New(slog.DiscardHandler), HasTools: true,
	})
	// echo answers with its arguments.
	mcp.AddTool(r.server, &mcp.Tool{Name: "echo", Description: "Answers with its arguments."},
		func(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, map[string]any, error) {
			return nil, in, nil
		})
	r.d = New(Options{Server: r.server, Config: func() *config.Config { return r.cfg }, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Audit: func(rf Refusal) { r.mu.Lock(); r.refused = append(r.refused, rf); r.mu.Unlock() }})
	r.server.AddReceivingMiddleware(PrincipalMiddleware, r.d.InFlightMiddleware)
	return r
}

// listen serves the doors on their socket and returns the path; the cleanup
// stops them and waits for the serving to end.
func (r *rig) listen() string {
	r.t.Helper()
	ln, err := unixsock.Listen(r.cfg.Agent.Socket, 0o660, -1, -1)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = unixsock.Serve(ctx, ln, slog.New(slog.DiscardHandler), r.d.ServeConn); close(done) }()
	r.t.Cleanup(func() { cancel(); <-done })
	return r.cfg.Agent.Socket
}
