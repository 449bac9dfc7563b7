package webguard

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

const hangGuard = 60 * time.Second

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closedByServer reports whether the server ended conn: a read sees EOF
// or a reset, not the deadline.
func closedByServer(t *testing.T, conn net.Conn) bool {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	_, err := io.ReadAll(conn)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Per source and in total; over the total the longest idle connection
// makes room, and with none idle the new one is closed.
func TestConnsCaps(t *testing.T) {
	var mu sync.Mutex
	var refused []string
	c := &Conns{Total: 4, PerSource: 2, Refused: func(_ net.Addr, why string) { mu.Lock(); refused = append(refused, why); mu.Unlock() }}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), ConnState: c.ConnState}
	go srv.Serve(c.Listen(raw))
	t.Cleanup(func() { srv.Close() })
	addr := raw.Addr().String()

	a := dialFrom(t, "127.0.0.1", addr)
	dialFrom(t, "127.0.0.1", addr)
	waitUntil(t, "two connections counted", func() bool { return c.Open() == 2 })
	if third := dialFrom(t, "127.0.0.1", addr); !closedByServer(t, third) {
		t.Fatal("a third connection from one address was kept")
	}
	dialFrom(t, "127.0.0.2", addr)
	dialFrom(t, "127.0.0.2", addr)
	waitUntil(t, "four connections counted", func() bool { return c.Open() == 4 })
	if fifth := dialFrom(t, "127.0.0.3", addr); !closedByServer(t, fifth) {
		t.Fatal("a fifth connection over the total was kept with none idle")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 2 || !strings.Contains(refused[0], "max_conns_per_source") || !strings.Contains(refused[1], "none idle") {
		t.Fatalf("refusals %q", refused)
	}
	// a asks once and idles: the next newcomer takes its place.
	if _, err := io.WriteString(a, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(a)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	waitUntil(t, "a to be idle", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, ci := range c.open {
			if !ci.idleSince.IsZero() {
				return true
			}
		}
		return false
	})
	newcomer := dialFrom(t, "127.0.0.3", addr)
	_ = a.SetReadDeadline(time.Now().Add(hangGuard))
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("the idle connection still open")
	}
	if _, err := io.WriteString(newcomer, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = newcomer.SetReadDeadline(time.Now().Add(hangGuard))
	if resp, err := http.ReadResponse(bufio.NewReader(newcomer), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the newcomer: %v %v", resp, err)
	}
}

// A client that never reads fails the handler's write after the deadline
// instead of holding it.
func TestWriteDeadlineUnreadClient(t *testing.T) {
	done := make(chan error, 1)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		dw := NewWriteDeadline(w, 100*time.Millisecond)
		defer dw.Done()
		chunk := make([]byte, 32<<10)
		for range 4096 { // 128 MiB: more than any socket buffers
			if _, err := dw.Write(chunk); err != nil {
				done <- err
				return
			}
			if err := http.NewResponseController(dw).Flush(); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	})}
	go srv.Serve(raw)
	t.Cleanup(func() { srv.Close() })
	conn := dialFrom(t, "127.0.0.1", raw.Addr().String())
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("handler's write: %v, want a timeout", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the handler is still writing to a client that does not read")
	}
}
