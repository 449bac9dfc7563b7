package agent

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
)

// TestServeStopEndsOpenSessions: a session's descriptor is the session's own
// (internal/rawio), out of reach of the listener's shutdown sweep, so the
// session must end itself when the agent stops: Serve returns, and the
// client sees its connection closed, while the client still holds it open.
func TestServeStopEndsOpenSessions(t *testing.T) {
	r := newSimRig(t, nil)
	ln, err := unixsock.Listen(r.cfg.Agent.Socket, 0o660, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.a.Serve(ctx, ln) }()
	conn, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// An answered request proves the session is up before the stop.
	if _, err := conn.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("ping answer %q, %v", line, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Serve did not return with a session open")
	}
	if rest, err := br.ReadString('\n'); err == nil {
		t.Fatalf("the session still answers after the stop: %q", rest)
	}
}
