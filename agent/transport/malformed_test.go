package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// leakCheck fails the test if goroutines started during it are still
// running once its cleanups are done. Register it first: cleanups run in
// reverse order, so it then runs last. The 60 s is a hang guard only.
func leakCheck(t testing.TB) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(60 * time.Second)
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

// freshSession proves the agent still serves: a new SDK client connects,
// initializes and runs a tool.
func freshSession(t *testing.T, sock string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("agent no longer accepts: %v", err)
	}
	s, err := mcp.NewClient(&mcp.Implementation{Name: "fresh", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: conn, Writer: conn}, nil)
	if err != nil {
		t.Fatalf("fresh session: initialize: %v", err)
	}
	defer s.Close()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("fresh session: tools/call: %v %+v", err, res)
	}
}

// Every kind of malformed input on the agent socket gets a defined reaction
// (an answer, or the end of that session) and leaves the agent serving: a
// fresh session initializes and runs a tool after each. The table is the
// record of what each case does; in short:
//
//	not JSON, not JSON-RPC, a batch after 2025-06-18, an empty batch,
//	a response without an id, two messages on a line -> session closed, no answer (a read error ends it, as in go-sdk)
//	a message cut short or split over lines,
//	100k unclosed brackets                       -> -32700 under a null id, then closed (lineFilter)
//	a 10 MB line                                 -> -32600 under a null id, then closed (the 4 MiB limit)
//	unknown method / params of a wrong shape     -> -32601 / -32602, the session goes on
//	tools/call before initialize                 -> an error (go-sdk's code 0), the session goes on
//	notifications of a wrong shape, unknown ones,
//	responses nobody asked for, blank lines      -> ignored, the session goes on
//	a batch under 2025-03-26, notifications in it -> answered as a batch (go-sdk's transport never answered one with a notification)
//	a peer that never speaks                     -> held open (one goroutine and fd), others unaffected
//	a peer that half-closes                      -> its session ends and the agent closes
func TestMalformedInputOnTheAgentSocket(t *testing.T) {
	const result = 1 // stands for an answer that is a result, not an error
	leakCheck(t)
	r := newRig(t, nil)
	sock := r.listen()
	freshSession(t, sock)

	big := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"x","arguments":{"s":"` + strings.Repeat("A", 10<<20) + `"}}}`
	for _, tc := range []struct {
		name     string
		version  string // protocol version to initialize with; "" sends the input before initialize
		input    string
		closed   bool   // the agent ends the session
		answers  []int  // error codes of the answers before the probe's (result: a result)
		contains string // in the first answer
	}{
		{name: "garbage bytes", version: "2025-06-18", input: "\x00\xff\xfe\x01garbage\x7f\n", closed: true},
		{name: "garbage before initialize", input: "\x00\xff\xfe\x01garbage\x7f\n", closed: true},
		{name: "invalid JSON", version: "2025-06-18", input: `{"jsonrpc":"2.0","id":1,"method":"ping"]` + "\n", closed: true},
		{name: "a message cut short", version: "2025-06-18", input: `{"jsonrpc":"2.0","id":1,"method":` + "\n", closed: true, answers: []int{-32700}, contains: "one line"},
		{name: "not JSON-RPC", version: "2025-06-18", input: `{"hello":"world"}` + "\n", closed: true},
		{name: "wrong version tag", version: "2025-06-18", input: `{"jsonrpc":"1.0","id":1,"method":"ping"}` + "\n", closed: true},
		{name: "10 MB line", version: "2025-06-18", input: big + "\n", closed: true, answers: []int{-32600}, contains: "longer than"},
		{name: "10 MB without a newline", version: "2025-06-18", input: big[:10<<20], closed: true, answers: []int{-32600}},
		{name: "100k nesting", version: "2025-06-18", input: strings.Repeat("[", 100000) + "\n", closed: true, answers: []int{-32700}},
		{name: "100k nesting, closed", version: "2025-06-18", input: strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n", closed: true},
		{name: "100k nesting in params", version: "2025-06-18", input: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}\n", closed: true},
		{name: "batch after 2025-06-18", version: "2025-06-18", input: `[{"jsonrpc":"2.0","id":1,"method":"ping"}]` + "\n", closed: true},
		{name: "batch under 2025-03-26", version: "2025-03-26", input: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]` + "\n", answers: []int{result}},
		{name: "empty batch", version: "2025-03-26", input: "[]\n", closed: true},
		{name: "batch with a notification under 2025-03-26", version: "2025-03-26", input: `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]` + "\n", answers: []int{result}},
		{name: "two messages on a line", version: "2025-06-18", input: `{"jsonrpc":"2.0","id":1,"method":"ping"} {"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n", closed: true},
		{name: "unknown method", version: "2025-06-18", input: `{"jsonrpc":"2.0","id":1,"method":"no/such"}` + "\n", answers: []int{-32601}},
		{name: "tools/call before initialize", input: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}` + "\n", answers: []int{0}}, // go-sdk's code 0: "invalid during session initialization"
		{name: "tools/call with params of a wrong shape", version: "2025-06-18", input: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}` + "\n", answers: []int{-32602}},
		{name: "notification of a wrong shape", version: "2025-06-18", input: `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":[1],"reason":7}}` + "\n"},
		{name: "notification with string params", version: "2025-06-18", input: `{"jsonrpc":"2.0","method":"notifications/initialized","params":"x"}` + "\n"},
		{name: "unknown notification", version: "2025-06-18", input: `{"jsonrpc":"2.0","method":"notifications/no_such","params":{}}` + "\n"},
		{name: "response nobody asked for", version: "2025-06-18", input: `{"jsonrpc":"2.0","id":77,"result":{}}` + "\n"},
		{name: "response without an id", version: "2025-06-18", input: `{"jsonrpc":"2.0","result":{}}` + "\n", closed: true},
		{name: "blank lines", version: "2025-06-18", input: "\n\r\n  \n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := dialWire(t, sock)
			if tc.version != "" {
				w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + tc.version + `","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
				if got := w.mustRecv(); !strings.Contains(got, `"id":0,"result"`) {
					t.Fatalf("initialize: %s", got)
				}
				w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			}
			answers, closed := w.outcome(tc.input, len(tc.answers))
			if closed != tc.closed {
				t.Errorf("closed = %v, want %v (answers %.300q)", closed, tc.closed, answers)
			}
			var codes []int
			for _, a := range answers {
				var e answer
				if bytes.HasPrefix([]byte(a), []byte("[")) {
					codes = append(codes, result) // a batch answer
					continue
				}
				e = decodeAnswer(t, a)
				if e.Error != nil {
					codes = append(codes, e.Error.Code)
				} else {
					codes = append(codes, result)
				}
			}
			if !slices.Equal(codes, tc.answers) {
				t.Errorf("answers %v, want %v: %.300q", codes, tc.answers, answers)
			}
			if tc.contains != "" && (len(answers) == 0 || !strings.Contains(answers[0], tc.contains)) {
				t.Errorf("answer lacks %q: %.300q", tc.contains, answers)
			}
			freshSession(t, sock)
		})
	}

	t.Run("peer that never speaks", func(t *testing.T) {
		silent := dialWire(t, sock)
		freshSession(t, sock)
		freshSession(t, sock)
		silent.conn.Close()
	})
	t.Run("peer that half-closes", func(t *testing.T) {
		w := dialWire(t, sock)
		if err := w.conn.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if s, err := w.recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("after a half-close: %q %v, want the agent to close", s, err)
		}
		freshSession(t, sock)
	})
	t.Run("peer that half-closes after initialize", func(t *testing.T) {
		w := dialWire(t, sock)
		w.initialize()
		if err := w.conn.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if s, err := w.recv(); !errors.Is(err, io.EOF) {
			t.Fatalf("after a half-close: %q %v, want the agent to close", s, err)
		}
		freshSession(t, sock)
	})
}

// outcome sends input, then a ping as a probe, and returns the lines that
// came before the probe's answer and whether the agent closed instead.
// The agent serves requests concurrently, so the probe's answer may overtake
// the input's: reading goes on until the probe and at least want answers
// have come, or the connection ends (a missing answer fails by hangGuard).
func (w *wire) outcome(input string, want int) (answers []string, closed bool) {
	_ = w.conn.SetWriteDeadline(time.Now().Add(60 * time.Second))
	if _, err := w.conn.Write([]byte(input)); err != nil {
		closed = true // it closed while we were still writing
	} else if _, err := w.conn.Write([]byte(`{"jsonrpc":"2.0","id":"probe","method":"ping"}` + "\n")); err != nil {
		closed = true
	}
	probed := false
	for {
		s, err := w.recv()
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				return answers, true
			}
			w.t.Fatalf("reading answers: %v", err)
		}
		if strings.Contains(s, `"id":"probe"`) {
			probed = true
		} else {
			answers = append(answers, s)
		}
		if probed && len(answers) >= want {
			return answers, closed
		}
	}
}
