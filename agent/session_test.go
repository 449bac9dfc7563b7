package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/internal/handover"
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

// handedSession starts the agent, connects as the bridge does and hands it a
// pair of pipes: the test holds the client's ends (it writes requests to in
// and reads answers from out) and the socket, the bridge's lifeline.
func handedSession(t *testing.T) (conn *net.UnixConn, in, out *os.File) {
	t.Helper()
	r := newSimRig(t, nil)
	r.serveMany() // the agent on its socket
	c, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		t.Fatal(err)
	}
	conn = c.(*net.UnixConn)
	t.Cleanup(func() { conn.Close() })
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := handover.Send(conn, inR, outW); err != nil {
		t.Fatal(err)
	}
	// The agent holds its own copies now; as a bridge that has handed
	// over, the test keeps none of the agent's ends.
	inR.Close()
	outW.Close()
	t.Cleanup(func() { inW.Close(); outR.Close() })
	return conn, inW, outR
}

// readsToEOF reads r to its end, or fails after the hang guard.
func readsToEOF(t *testing.T, what string, r io.Reader) string {
	t.Helper()
	got := make(chan string, 1)
	go func() { b, _ := io.ReadAll(r); got <- string(b) }()
	select {
	case s := <-got:
		return s
	case <-time.After(hangGuard):
		t.Fatalf("%s: not closed", what)
		return ""
	}
}

// A session handed over by `raspi-mcp stdio` runs on the SSH session's own
// pipes: a real client lists and calls tools through them, and when it
// closes its input the agent ends the session and closes the socket, which
// is what lets the bridge exit.
func TestHandedOverSession(t *testing.T) {
	conn, in, out := handedSession(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: out, Writer: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := s.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools/list: %d tools, %v", len(tools.Tools), err)
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "system_get_basic_info", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("system_get_basic_info: %v %+v", err, res)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if rest := readsToEOF(t, "the bridge's socket", conn); rest != "" {
		t.Fatalf("the agent wrote %q to the bridge's socket", rest)
	}
}

// The end of the client's input does not cost it answers: requests still
// running when it comes are answered first (go-sdk alone would drop them).
func TestHandedOverSessionAnswersAfterEOF(t *testing.T) {
	_, in, out := handedSession(t)
	reqs := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"system_get_health_snapshot","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"process_list_processes","arguments":{"limit":50}}}`,
	}, "\n") + "\n"
	if _, err := in.WriteString(reqs); err != nil {
		t.Fatal(err)
	}
	in.Close()
	lines := strings.Split(strings.TrimSpace(readsToEOF(t, "the session's stdout", out)), "\n")
	ids := map[string]bool{}
	for _, l := range lines {
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON on stdout: %q", l)
		}
		ids[string(m.ID)] = true
	}
	if len(lines) != 4 || !ids["1"] || !ids["2"] || !ids["3"] || !ids["4"] {
		t.Fatalf("want the answers to ids 1-4, got %d lines:\n%.2000s", len(lines), strings.Join(lines, "\n"))
	}
}

// When the bridge goes (killed with its SSH session), the agent ends the
// session and lets go of the pipes, so sshd sees the session's output end.
func TestHandedOverSessionEndsWithTheBridge(t *testing.T) {
	conn, in, out := handedSession(t)
	if _, err := in.WriteString(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(out)
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("ping answer %q, %v", line, err)
	}
	conn.Close()
	if rest := readsToEOF(t, "the session's stdout", br); rest != "" {
		t.Fatalf("more output after the bridge went: %q", rest)
	}
}

// A handover that does not fit (here a file for stdin) is refused with a
// line on the socket that says why, and no session runs.
func TestHandoverRefused(t *testing.T) {
	r := newSimRig(t, nil)
	r.serveMany()
	c, err := net.Dial("unix", r.cfg.Agent.Socket)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.UnixConn)
	defer conn.Close()
	f, err := os.CreateTemp(t.TempDir(), "stdin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outW.Close()
	if err := handover.Send(conn, f, outW); err != nil {
		t.Fatal(err)
	}
	got := readsToEOF(t, "the refused socket", conn)
	if !strings.Contains(got, "handover: refused: stdin: not a pipe or a socket") {
		t.Fatalf("refusal %q", got)
	}
}
