package privhelper_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
)

// leakCheck fails the test if goroutines started during it are still
// running once its cleanups are done. Register it first: cleanups run in
// reverse order, so it then runs last. The 60 s is a hang guard only.
func leakCheck(t testing.TB) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(60 * time.Second)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d running, %d before the test\n%s", runtime.NumGoroutine(), base, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// helperServes proves the helper still serves: a new client connects, says
// hello and gets its status.
func helperServes(t *testing.T, sock string) {
	t.Helper()
	c := client.New(client.Options{Socket: sock, ClientName: "raspi-mcp/fresh"})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := client.Call(ctx, c, proto.Status, proto.StatusReq{}); err != nil {
		t.Fatalf("helper no longer serves: %v", err)
	}
}

func frame(body string) string {
	return string(binary.BigEndian.AppendUint32(nil, uint32(len(body)))) + body
}

// outcome writes input, then a status request with id 999 as a probe, and
// returns the error codes of the answers that came before the probe's and
// whether the helper closed the connection instead of answering it.
func (r *raw) outcome(input string, halfClose bool) (codes []string, closed bool) {
	r.t.Helper()
	_ = r.conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.WriteString(r.conn, input); err != nil {
		closed = true // it closed while we were still writing
	} else if halfClose {
		_ = r.conn.(interface{ CloseWrite() error }).CloseWrite()
	} else if _, err := io.WriteString(r.conn, frame(`{"id":999,"method":"status","params":{}}`)); err != nil {
		closed = true
	}
	for {
		var resp proto.Response
		err := proto.ReadFrame(r.conn, &resp)
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
			return codes, true
		case err != nil:
			r.t.Fatalf("reading answers: %v", err)
		case resp.ID == 999:
			return codes, closed
		case resp.Error != nil:
			codes = append(codes, resp.Error.Code)
		default:
			codes = append(codes, "result")
		}
	}
}

// Every kind of malformed input on the helper socket gets a defined reaction
// and leaves the helper serving: after each, a new client's status call
// works. The table is the record of what each case does; in short: a frame
// that cannot be read (bad length, not JSON, unknown fields, a wrong type,
// a batch) is answered with invalid_argument under id 0 and the connection
// closed, since the stream cannot be trusted after it; a well-formed frame
// with a bad method or params is answered and the connection goes on; a
// peer that never says hello is closed after the hello timeout, one that
// half-closes is closed at once, after its answers.
func TestMalformedInputOnTheHelperSocket(t *testing.T) {
	leakCheck(t)
	h := startHelper(t, sockIn(t), defaultPolicy())
	helperServes(t, h.sock)

	hello := frame(`{"id":1,"method":"hello","params":{"version":` + fmt.Sprint(proto.Version) + `,"client":"raw"}}`)
	deep := strings.Repeat("[", 30000) + strings.Repeat("]", 30000)
	tenMB := string(binary.BigEndian.AppendUint32(nil, 10<<20)) + strings.Repeat("A", 10<<20)
	for _, tc := range []struct {
		name      string
		noHello   bool
		input     string
		halfClose bool
		codes     []string
		closed    bool
	}{
		{name: "garbage bytes", input: "\x00\xff\xfe\xfdgarbage", codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "garbage before hello", noHello: true, input: "\x00\xff\xfe\xfdgarbage", codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "invalid JSON", input: frame(`{!`), codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "empty frame", input: frame(``), codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "10 MB frame", input: tenMB, codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "100k nesting", input: frame(strings.Repeat("[", 100000)), codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "30k nesting in params", input: frame(`{"id":2,"method":"status","params":` + deep + `}`), codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "batch", input: frame(`[{"id":2,"method":"status","params":{}}]`), codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "id of a wrong type", input: frame(`{"id":"two","method":"status","params":{}}`), codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "id beyond 64 bits", input: frame(`{"id":123456789012345678901234567890,"method":"status","params":{}}`), codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "unknown field", input: frame(`{"id":2,"method":"status","params":{},"x":1}`), codes: []string{proto.CodeInvalidArgument}, closed: true},
		{name: "unknown method", input: frame(`{"id":2,"method":"no.such","params":{}}`), codes: []string{proto.CodeNotFound}},
		{name: "params of a wrong shape", input: frame(`{"id":2,"method":"power.schedule","params":"reboot"}`), codes: []string{proto.CodeInvalidArgument}},
		{name: "params with an unknown field", input: frame(`{"id":2,"method":"status","params":{"x":1}}`), codes: []string{proto.CodeInvalidArgument}},
		{name: "second hello", input: hello, codes: []string{proto.CodeFailedPrecondition}},
		{name: "request before hello", noHello: true, input: frame(`{"id":2,"method":"status","params":{}}`), codes: []string{proto.CodeFailedPrecondition}, closed: true},
		{name: "frame cut short, then half-close", input: string(binary.BigEndian.AppendUint32(nil, 100)) + `{"id":2,`, halfClose: true, closed: true},
		{name: "half-close before hello", noHello: true, halfClose: true, closed: true},
		{name: "half-close after a request", input: frame(`{"id":2,"method":"status","params":{}}`), halfClose: true, codes: []string{"result"}, closed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, h.sock)
			if !tc.noHello {
				r.hello()
			}
			codes, closed := r.outcome(tc.input, tc.halfClose)
			if closed != tc.closed || strings.Join(codes, ",") != strings.Join(tc.codes, ",") {
				t.Errorf("answers %v closed %v, want %v closed %v", codes, closed, tc.codes, tc.closed)
			}
			helperServes(t, h.sock)
		})
	}

	t.Run("peer that never speaks", func(t *testing.T) {
		r := dialRaw(t, h.sock)
		helperServes(t, h.sock) // served while the silent peer waits
		if codes, closed := r.outcome("", true); !closed || len(codes) != 0 {
			t.Fatalf("silent peer: answers %v closed %v", codes, closed)
		}
		// Without the half-close the helper closes it after its hello
		// timeout; the read below is bounded by the 60 s hang guard.
		s := dialRaw(t, h.sock)
		_ = s.conn.SetDeadline(time.Now().Add(60 * time.Second))
		var resp proto.Response
		if err := proto.ReadFrame(s.conn, &resp); !errors.Is(err, io.EOF) {
			t.Fatalf("silent peer: %v %+v, want the helper to close it", err, resp)
		}
		helperServes(t, h.sock)
	})
	t.Run("peer silent after hello", func(t *testing.T) {
		r := dialRaw(t, h.sock)
		r.hello()
		helperServes(t, h.sock) // kept open, as the agent's own connection is, and the others are served
		r.conn.Close()
	})
}
