package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// Issue 28, row 2 over HTTP: a client whose SSE stream stops being read
// delays only itself.

// stuckStream opens a 2025-11-25 session of secret subscribed to
// uriSummary, and its standalone GET stream on a connection with small
// socket buffers, which it reads up to the end of the response's headers
// and then never again.
func (h *httpRig) stuckStream(t *testing.T, secret string) net.Conn {
	t.Helper()
	id := h.rawSession(t, secret)
	hdr := map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": "2025-11-25"}
	sub := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":%q}}`, uriSummary)
	if resp, body := h.postRaw(t, secret, sub, hdr); resp.StatusCode != 200 || !strings.Contains(body, `"result"`) {
		t.Fatalf("subscribe: %d %s", resp.StatusCode, body)
	}
	// A small receive buffer and segment size (set before connecting, so
	// the window and MSS are small from the start): the kernel holds
	// little of what the client does not read, and the agent's writes
	// block soon.
	d := net.Dialer{Timeout: hangGuard, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			if serr == nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 536)
			}
		})
		return errors.Join(err, serr)
	}}
	host := strings.TrimSuffix(strings.TrimPrefix(h.url, "http://"), "/mcp")
	conn, err := d.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: %s\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n", host, secret, id)
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	var head []byte
	b := make([]byte, 1)
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		if _, err := conn.Read(b); err != nil {
			t.Fatalf("GET stream: %v after %q", err, head)
		}
		head = append(head, b[0])
	}
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 200")) {
		t.Fatalf("GET stream: %q", head)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return conn
}

// sendUpdates sends updates of uriSummary, one after another as the
// watcher does, until the test ends; it counts those sent. At the end,
// stuck is closed before the sender is waited for: a notifier blocked on
// it then fails its write. pace, when set, holds the next update until it
// says go.
func (h *httpRig) sendUpdates(t *testing.T, stuck net.Conn, pace func(sent int64) bool) *atomic.Int64 {
	var sent atomic.Int64
	stop := make(chan struct{})
	var sends sync.WaitGroup
	sends.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if pace != nil && !pace(sent.Load()) {
				time.Sleep(time.Millisecond)
				continue
			}
			h.a.updates.send(context.Background(), uriSummary)
			sent.Add(1)
		}
	})
	t.Cleanup(func() { close(stop); stuck.Close(); sends.Wait() })
	return &sent
}

// A client that stops reading its GET stream does not delay the updates
// of a session that reads: with the old front, go-sdk wrote each event
// into the stuck response under the stream's lock, one session after the
// other, and the notifier waited for http.write_timeout (here ten minutes)
// at every event once the kernel's buffers were full.
func TestHTTPStuckSubscriberDoesNotStopOthers(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) {
		c.HTTP.WriteTimeout = config.Duration(10 * time.Minute)
		c.HTTP.Burst = 1000
	}, HTTPOptions{})
	// The stuck one subscribes first.
	stuck := h.stuckStream(t, "s-operate")

	var got atomic.Int64
	c := mcp.NewClient(&mcp.Implementation{Name: "honest", Version: "1"}, &mcp.ClientOptions{
		ResourceUpdatedHandler: func(context.Context, *mcp.ResourceUpdatedNotificationRequest) { got.Add(1) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	honest, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url,
		HTTPClient: &http.Client{Transport: bearerRT{"s-admin", http.DefaultTransport}}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { honest.Close() })
	if err := honest.Subscribe(ctx, &mcp.SubscribeParams{URI: uriSummary}); err != nil {
		t.Fatal(err)
	}

	// The honest session's GET stream is open once it has an update.
	var before int64
	waitFor(t, "the honest session's first update", hangGuard, func() bool {
		h.a.updates.send(ctx, uriSummary)
		before++
		return got.Load() > 0
	})
	// The sender keeps at most a few hundred updates ahead of the honest
	// session (which reads them all, and may yet get some of those sent
	// before), so that the stuck stream's queue stays within its bound.
	sent := h.sendUpdates(t, stuck, func(sent int64) bool { return sent+before-got.Load() <= 256 })
	// Each update is an event of over 100 bytes on the stuck stream: fill
	// updates are far more than the small buffers of its connection hold
	// (the old front stalled at under a thousand) and less than its queue
	// bound, so it is stuck, not cut; the session that reads must then get
	// 8 more.
	const fill, more = 4000, 8
	deadline := time.Now().Add(hangGuard)
	for got.Load() < fill+more {
		if time.Now().After(deadline) {
			t.Fatalf("the session that reads got %d updates of %d sent in %v while another session's stream was stuck; want %d (the notifier waits on the stuck stream)",
				got.Load(), sent.Load()+before, hangGuard, fill+more)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The stuck stream was stuck all along: its events wait in its
	// queue, and it was not cut.
	if q := h.a.SocketLoad().Queued; q == 0 {
		t.Errorf("nothing waits for the stuck stream: the test did not fill its connection")
	}
	if n := h.streamCuts(t); n != 0 {
		t.Errorf("%d streams cut, want none: the stuck stream is within its bounds: %v", n, h.audit(t))
	}
}

// streamCuts counts the audit records of HTTP responses cut.
func (h *httpRig) streamCuts(t *testing.T) int {
	t.Helper()
	n := 0
	for _, rec := range h.audit(t) {
		if rec.Tool == "http" && strings.Contains(rec.Message, " cut: ") {
			n++
		}
	}
	return n
}

// A stream whose client reads nothing is ended once what waits for it
// passes its queue bound: what the agent holds for it is bounded, and
// freed; the cut is audited.
func TestHTTPStuckStreamCutAtQueueBound(t *testing.T) {
	const bound = 64 << 10
	h := newHTTPRig(t, func(c *config.Config) {
		c.HTTP.WriteTimeout = config.Duration(10 * time.Minute)
		c.Sessions.QueueBytes = bound
	}, HTTPOptions{})
	stuck := h.stuckStream(t, "s-operate")
	h.sendUpdates(t, stuck, nil)
	waitFor(t, "the stuck stream to be cut", hangGuard, func() bool { return h.streamCuts(t) > 0 })
	// Its connection ends: what the kernel held, then the end.
	_ = stuck.SetReadDeadline(time.Now().Add(hangGuard))
	_, err := io.Copy(io.Discard, stuck)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the cut stream's connection is still open")
	}
	// The updates go on; nothing waits for the cut stream any more.
	waitFor(t, "the cut stream's queue to be freed", hangGuard, func() bool { return h.a.SocketLoad().Queued == 0 })
	if m := h.a.SocketLoad().MaxQueued; m > bound {
		t.Errorf("the agent held %d bytes for a stuck stream at most, past its bound of %d", m, bound)
	}
	var msg string
	for _, rec := range h.audit(t) {
		if rec.Tool == "http" && strings.Contains(rec.Message, " cut: ") {
			msg = rec.Message
		}
	}
	if !strings.Contains(msg, "queue bound") || !strings.Contains(msg, "queue_bytes") {
		t.Errorf("the cut's record: %q, want it to name the queue bound", msg)
	}
}
