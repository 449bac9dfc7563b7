package privhelper_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/power"
	"github.com/raspi-mcp/raspi-mcp/internal/unixsock"
	"github.com/raspi-mcp/raspi-mcp/privhelper"
	"github.com/raspi-mcp/raspi-mcp/privhelper/client"
	"github.com/raspi-mcp/raspi-mcp/privhelper/proto"
	"github.com/raspi-mcp/raspi-mcp/privhelper/witness"
)

// syncBuffer is a log sink the server's goroutines and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the JSON log records written so far.
func (b *syncBuffer) records(t testing.TB) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b.buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// find returns the first record at level whose msg contains substr.
func (b *syncBuffer) find(t testing.TB, level, substr string) map[string]any {
	t.Helper()
	for _, r := range b.records(t) {
		if r["level"] == level && bytes.Contains([]byte(r["msg"].(string)), []byte(substr)) {
			return r
		}
	}
	return nil
}

// shortDir returns a fresh directory with a short path, since Unix socket
// paths are limited to about 108 bytes and t.TempDir embeds the test name.
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ph")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// helper is a running server on a real Unix socket, backed by a power.Sim.
type helper struct {
	sock   string
	sim    *power.Sim
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// agentUID is the uid the test policies name as the agent: the test's own
// uid when not root (so the tests can connect at all), else an arbitrary one
// (root is let in regardless).
func agentUID() int {
	if uid := os.Geteuid(); uid != 0 {
		return uid
	}
	return 1000
}

// defaultPolicy lets the agent reboot and nothing else: every other switch
// is off, every allowlist empty.
func defaultPolicy() privhelper.Policy { return powerPolicy(agentUID(), true, false) }

// powerPolicy lets uid connect, with [system] reboot and shutdown as given
// ([system] enabled on) and every other switch off.
func powerPolicy(uid int, reboot, shutdown bool) privhelper.Policy {
	p := privhelper.Policy{AgentUID: uid}
	p.Config.Guard = config.Default().Guard // no button wired
	p.Config.System.Enabled, p.Config.System.Reboot, p.Config.System.Shutdown = true, reboot, shutdown
	return p
}

func startHelper(t testing.TB, sock string, pol privhelper.Policy) *helper {
	return startHelperWith(t, sock, privhelper.Options{Policy: pol})
}

// startHelperWith fills in Sim, logger, backend and version unless set.
func startHelperWith(t testing.TB, sock string, o privhelper.Options) *helper {
	t.Helper()
	h := &helper{sock: sock, logs: &syncBuffer{}, done: make(chan error, 1)}
	if o.Power == nil {
		h.sim = power.NewSim("")
		t.Cleanup(func() { h.sim.Close() })
		o.Power = h.sim
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if o.Backend == "" {
		o.Backend = "sim"
	}
	if o.Witness == nil {
		w, err := witness.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		o.Witness = w
	}
	if o.Version == "" {
		o.Version = "0.1.0"
	}
	if o.Updates.Catalog == nil {
		o.Updates = simUpdates(t, time.Minute)
	}
	if o.ConfigPath == "" {
		o.ConfigPath = filepath.Join(t.TempDir(), "config.toml")
		if err := os.WriteFile(o.ConfigPath, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := unixsock.Listen(sock, privhelper.SocketMode, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	srv := privhelper.NewServer(o)
	go func() { h.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { h.stop(t) })
	return h
}

// stop shuts the server down and waits for Serve to return. Idempotent.
func (h *helper) stop(t testing.TB) {
	t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("Serve returned %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Serve did not return after cancel")
	}
}

// hangGuard bounds waits for what must happen (an answer, a shutdown). It
// only keeps a broken build from hanging: a busy machine can stretch a
// millisecond's work to seconds, so no verdict may depend on speed.
const hangGuard = time.Minute

// newClient connects with hang-guard timeouts: a busy machine must not turn a
// slow hello into "unavailable". Tests of the client's own timeouts set theirs.
func newClient(t testing.TB, sock string) *client.Client {
	t.Helper()
	c := client.New(client.Options{Socket: sock, ClientName: "raspi-mcp/0.1.0-test", DialTimeout: hangGuard / 2, Timeout: hangGuard / 2})
	t.Cleanup(func() { c.Close() })
	return c
}

// protoErr asserts err is a *proto.Error with the given code and returns it.
func protoErr(t testing.TB, err error, code string) *proto.Error {
	t.Helper()
	var e *proto.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want *proto.Error %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("err = %v, want code %s", e, code)
	}
	return e
}

// raw is a bare protocol connection for sending what the client never would.
type raw struct {
	t    testing.TB
	conn net.Conn
	id   uint64
}

func dialRaw(t testing.TB, sock string) *raw {
	t.Helper()
	conn, err := net.DialTimeout("unix", sock, hangGuard)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(hangGuard))
	t.Cleanup(func() { conn.Close() })
	return &raw{t: t, conn: conn}
}

// call sends method with params and returns the response. A
// json.RawMessage is spliced into the envelope verbatim, so tests can send
// JSON that encoding/json would refuse to produce.
func (r *raw) call(method string, params any) proto.Response {
	r.t.Helper()
	p, ok := params.(json.RawMessage)
	if !ok {
		var err error
		if p, err = json.Marshal(params); err != nil {
			r.t.Fatal(err)
		}
	}
	r.id++
	m, _ := json.Marshal(method)
	r.writeBody(fmt.Appendf(nil, `{"id":%d,"method":%s,"params":%s}`, r.id, m, p))
	return r.read()
}

// writeBody sends body as one frame, unvalidated.
func (r *raw) writeBody(body []byte) {
	r.t.Helper()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := r.conn.Write(append(frame, body...)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) read() proto.Response {
	r.t.Helper()
	var resp proto.Response
	if err := proto.ReadFrame(r.conn, &resp); err != nil {
		r.t.Fatalf("read response: %v", err)
	}
	return resp
}

func (r *raw) hello() {
	r.t.Helper()
	resp := r.call(proto.Hello.Name, proto.HelloReq{Version: proto.Version, Client: "raw-test"})
	if resp.Error != nil {
		r.t.Fatalf("hello: %v", resp.Error)
	}
}

// expectClosed asserts the helper has closed the connection.
func (r *raw) expectClosed() {
	r.t.Helper()
	var resp proto.Response
	err := proto.ReadFrame(r.conn, &resp)
	if err == nil {
		r.t.Fatalf("connection still open; got %+v", resp)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		r.t.Fatalf("connection still open after %v: %v", hangGuard, err)
	}
}

func sockIn(t testing.TB) string { return filepath.Join(shortDir(t), "helper.sock") }
