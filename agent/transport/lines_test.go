package transport

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/bridge"
	"github.com/raspi-mcp/raspi-mcp/internal/rpcid"
)

// wire is a line-level MCP client on the agent socket, for sending what the
// SDK client never would. Every read has a hang guard.
type wire struct {
	t    testing.TB
	conn *net.UnixConn
	br   *bufio.Reader
}

func dialWire(t testing.TB, sock string) *wire {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &wire{t: t, conn: c, br: bufio.NewReaderSize(c, 1<<20)}
}

func (w *wire) send(line string) {
	w.t.Helper()
	_ = w.conn.SetWriteDeadline(time.Now().Add(60 * time.Second))
	if _, err := w.conn.Write([]byte(line + "\n")); err != nil {
		w.t.Fatalf("send: %v", err)
	}
}

// recv returns the next line, or err if the agent closed or nothing came
// within the hang guard.
func (w *wire) recv() (string, error) {
	_ = w.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	s, err := w.br.ReadString('\n')
	if err != nil {
		return s, err
	}
	return strings.TrimSuffix(s, "\n"), nil
}

func (w *wire) mustRecv() string {
	w.t.Helper()
	s, err := w.recv()
	if err != nil {
		w.t.Fatalf("recv: %v (got %q)", err, s)
	}
	return s
}

// initialize runs the MCP handshake.
func (w *wire) initialize() {
	w.t.Helper()
	w.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
	if got := w.mustRecv(); !strings.Contains(got, `"id":0,"result"`) {
		w.t.Fatalf("initialize: %s", got)
	}
	w.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// answer is one decoded JSON-RPC response line, id kept raw.
type answer struct {
	ID    json.RawMessage `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Result json.RawMessage `json:"result"`
}

func decodeAnswer(t testing.TB, line string) answer {
	t.Helper()
	var a answer
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Fatalf("answer %q: %v", line, err)
	}
	return a
}

// An id go-sdk cannot carry back comes back byte for byte, with an error
// that says why; the session goes on.
func TestUnrepresentableIDsAreAnsweredUnderTheSameID(t *testing.T) {
	r := newRig(t, nil)
	w := dialWire(t, r.listen())
	w.initialize()
	for _, id := range []string{
		`123456789012345678901234567890`, `-123456789012345678901234567890`, `9007199254740993`,
		`1.5`, `1e400`, `1E2`, `-0`, `null`, `true`, `{"a":1}`, `[1]`, `"\ud800"`,
	} {
		w.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		got, err := w.recv()
		if err != nil {
			t.Fatalf("id %s: no answer: %v", id, err)
		}
		a := decodeAnswer(t, got)
		if string(a.ID) != id {
			t.Errorf("id %s answered under id %s: %.200s", id, a.ID, got)
		}
		if a.Error == nil || a.Error.Code != -32600 || !strings.Contains(a.Error.Message, "id") {
			t.Errorf("id %s: want -32600 that names the id, got %.200s", id, got)
		}
	}
	// Ids go-sdk does carry back are answered normally, byte for byte.
	for _, id := range []string{`9007199254740992`, `-9007199254740992`, `0`, `"x"`, `"\u00e9\ud83d\ude00"`} {
		w.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		a := decodeAnswer(t, w.mustRecv())
		var sent, back any
		_ = json.Unmarshal([]byte(id), &sent)
		_ = json.Unmarshal(a.ID, &back)
		if fmt.Sprint(sent) != fmt.Sprint(back) || a.Error != nil || a.Result == nil {
			t.Errorf("id %s: answered %s error %v", id, a.ID, a.Error)
		}
	}
	// A batch with one such id is refused whole, one error per request.
	w.send(`[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":1.5,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"}]`)
	var batch []answer
	if err := json.Unmarshal([]byte(w.mustRecv()), &batch); err != nil || len(batch) != 2 ||
		string(batch[0].ID) != "7" || string(batch[1].ID) != "1.5" || batch[0].Error == nil || batch[1].Error == nil {
		t.Fatalf("batch: %+v %v", batch, err)
	}
	// A client's response with such an id answers nothing: dropped, and the
	// session still works.
	w.send(`{"jsonrpc":"2.0","id":1e400,"result":{}}`)
	w.send(`{"jsonrpc":"2.0","id":8,"method":"ping"}`)
	if a := decodeAnswer(t, w.mustRecv()); string(a.ID) != "8" || a.Error != nil {
		t.Fatalf("ping after a stray response: %+v", a)
	}
}

// `raspi-mcp stdio` (bridge.Run) waits after its input ends only for answers
// that can come: each request below is answered under an id spelled
// differently from the one sent, refused under a null id, or never answered
// (a notification to the agent), and the bridge still exits long before its
// grace period.
func TestBridgeExitsWhenNoAnswerCanCome(t *testing.T) {
	r := newRig(t, nil)
	sock := r.listen()
	for name, line := range map[string]string{
		"beyond 64 bits":     `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}`,
		"exponent":           `{"jsonrpc":"2.0","id":1e400,"method":"ping"}`,
		"escaped string":     `{"jsonrpc":"2.0","id":"\u0041\/","method":"ping"}`,
		"invalid utf-8":      "{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"ping\"}",
		"upper-case ID":      `{"jsonrpc":"2.0","ID":5,"method":"ping"}`,
		"null id":            `{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		"lone surrogate":     `{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`,
		"batch with a float": `[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":3.5,"method":"ping"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			in := strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}` + "\n" +
				`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" + line + "\n")
			var out strings.Builder
			done := make(chan error, 1)
			go func() { done <- bridge.Run(in, &out, conn, 10*time.Minute) }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("bridge: %v", err)
				}
			case <-time.After(60 * time.Second):
				conn.Close()
				<-done
				t.Fatalf("bridge still waiting 60 s after its input ended; output:\n%.500s", out.String())
			}
			if !strings.Contains(out.String(), `"id":0,"result"`) {
				t.Fatalf("no initialize answer:\n%.500s", out.String())
			}
		})
	}
}

// rwc is a connection made of a reader and a writer, for the benchmark.
type rwc struct {
	io.Reader
	io.Writer
}

func (rwc) Close() error { return nil }

// BenchmarkLineFilter is what the agent adds to every line it reads before
// it is decoded: one scan of the top level and the id check.
func BenchmarkLineFilter(b *testing.B) {
	line := `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"process_list_processes","arguments":{"sort_by":"cpu","limit":20},"_meta":{"progressToken":42}}}` + "\n"
	const lines = 1000
	data := []byte(strings.Repeat(line, lines))
	log := slog.New(slog.DiscardHandler)
	b.SetBytes(int64(len(data)))
	// Nothing answers here: a closed done ends the wait for the answers
	// owed at the end of the input, which would cost drainGrace a loop.
	ended := make(chan struct{})
	close(ended)
	for b.Loop() {
		f := newLineFilter(rwc{bytes.NewReader(data), io.Discard}, rpcid.NewOwed(), log)
		f.done = ended
		for {
			if _, err := f.next(); err != nil {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}
