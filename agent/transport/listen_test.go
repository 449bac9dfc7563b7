package transport

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// modernMeta is the _meta a 2026-07-28 client puts on every request
// (SEP-2575), as go-sdk's client writes it.
const modernMeta = `"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"wire","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`

// openModern starts a session the way open says and opens a
// subscriptions/listen, as 2026-07-28 clients (Claude Code, Copilot CLI,
// the Inspector) do, waiting for its acknowledgement: from then on the
// listen is in flight until the client cancels it or leaves. open is
// "server/discover", the 2026-07-28 opening (go-sdk's client's), or
// "initialize" asking for 2026-07-28 (go-sdk settles on 2025-11-25, the
// latest version initialize negotiates, but serves the listen alike).
func openModern(t *testing.T, w *wire, open string) {
	t.Helper()
	switch open {
	case "initialize":
		w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
		if got := w.mustRecv(); !strings.Contains(got, `"id":0,"result"`) {
			t.Fatalf("initialize: %s", got)
		}
		w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	case "server/discover":
		w.send(`{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{` + modernMeta + `}}`)
		if got := w.mustRecv(); !strings.Contains(got, `"id":0,"result"`) || !strings.Contains(got, `"2026-07-28"`) {
			t.Fatalf("server/discover: %s", got)
		}
	}
	w.send(`{"jsonrpc":"2.0","id":"listen","method":"subscriptions/listen","params":{` + modernMeta + `,"notifications":{"toolsListChanged":true}}}`)
	if got := w.mustRecv(); !strings.Contains(got, `"notifications/subscriptions/acknowledged"`) || !strings.Contains(got, `"toolsListChanged":true`) {
		t.Fatalf("subscriptions/listen not acknowledged: %s", got)
	}
}

// readToEnd reads what the agent still sends until it closes the
// connection; it fails if the hang guard (wire.recv's read deadline) ends
// the wait first.
func readToEnd(t *testing.T, w *wire) []string {
	t.Helper()
	var lines []string
	for {
		s, err := w.recv()
		if errors.Is(err, io.EOF) {
			return lines
		}
		if err != nil {
			t.Fatalf("the agent did not close the session after the client closed its input: %v; read %q", err, lines)
		}
		lines = append(lines, s)
	}
}

// A 2026-07-28 client that leaves with its subscriptions/listen open (it
// closes its input; the listen ends only when the client cancels it or
// leaves) is not held for the drain's grace: no answer it waits for is
// owed. The grace here is 10 minutes and the hang guard one: only a
// session that does not wait for the listen ends in time.
func TestInputEndWithListenOpen(t *testing.T) {
	for _, open := range []string{"initialize", "server/discover"} {
		t.Run(open, func(t *testing.T) {
			r := newRig(t, nil)
			r.d.drainGrace = 10 * time.Minute
			w := dialWire(t, r.listen())
			openModern(t, w, open)
			// An ordinary request answered before the end is no longer owed.
			w.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + modernMeta + `,"name":"echo","arguments":{}}}`)
			if a := decodeAnswer(t, w.mustRecv()); string(a.ID) != "1" || a.Error != nil {
				t.Fatalf("echo: %+v", a)
			}
			if err := w.conn.CloseWrite(); err != nil {
				t.Fatal(err)
			}
			readToEnd(t, w)
		})
	}
}

// A request still running when a client with a listen open closes its
// input is answered before the session ends: the drain still holds the end
// of the input back from go-sdk (which would cancel the request and drop
// its answer) for the requests the client does wait for. The tool is let
// go only once the agent has read the end of the input.
func TestInputEndAnswersRequestsInFlightWithListenOpen(t *testing.T) {
	r := newRig(t, nil)
	r.d.drainGrace = 10 * time.Minute
	ended := make(chan struct{})
	r.d.inputEnded = func() { close(ended) }
	started, release := make(chan struct{}), make(chan struct{})
	cancelled := make(chan error, 1)
	mcp.AddTool(r.server, &mcp.Tool{Name: "wait", Description: "Answers once the test lets it go."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, map[string]any, error) {
			close(started)
			select {
			case <-release:
				return nil, map[string]any{"done": true}, nil
			case <-ctx.Done():
				cancelled <- context.Cause(ctx)
				return nil, nil, ctx.Err()
			}
		})
	w := dialWire(t, r.listen())
	openModern(t, w, "server/discover")
	w.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + modernMeta + `,"name":"wait","arguments":{}}}`)
	guard := time.NewTimer(60 * time.Second)
	defer guard.Stop()
	select {
	case <-started:
	case <-guard.C:
		t.Fatal("the tool call did not start")
	}
	if err := w.conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-guard.C:
		t.Fatal("the agent did not read the end of the input")
	}
	select {
	case err := <-cancelled:
		t.Fatalf("the call in flight was cancelled at the end of the input: %v", err)
	default:
	}
	close(release)
	lines := readToEnd(t, w)
	answered := false
	for _, l := range lines {
		if a := decodeAnswer(t, l); string(a.ID) == "7" {
			if a.Error != nil || !strings.Contains(string(a.Result), `"done":true`) {
				t.Fatalf("call in flight answered %s", l)
			}
			answered = true
		}
	}
	if !answered {
		t.Fatalf("the call in flight at the end of the input was not answered; the agent sent %q", lines)
	}
}
