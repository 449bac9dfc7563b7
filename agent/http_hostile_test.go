package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/transport"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
)

// The attacks of issue 28 on the HTTP endpoint, each as a test.

const initBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// rawSession opens a 2025-11-25 session with raw requests (two of the
// token's budget: initialize and initialized) and returns its id.
func (h *httpRig) rawSession(t *testing.T, secret string) string {
	t.Helper()
	resp := h.post(t, secret, initBody, nil)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || id == "" {
		t.Fatalf("initialize with %s: %d, session %q", secret, resp.StatusCode, id)
	}
	if resp := h.post(t, secret, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": id}); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return id
}

// postRaw is post with a header deleted when its value is "".
func (h *httpRig) postRaw(t *testing.T, secret, body string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+secret)
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// batchOf is a JSON-RPC batch of n dry-run writes of pin 17 (each audited).
func batchOf(n, firstID int) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"gpio_write_pin","arguments":{"pin":17,"value":"high","dry_run":true}}}`, firstID+i)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

func (h *httpRig) writesAudited(t *testing.T) int {
	t.Helper()
	n := 0
	for _, rec := range h.audit(t) {
		if rec.Tool == "gpio.write_pin" {
			n++
		}
	}
	return n
}

// Attack 1: a batch over http.max_batch is refused before any of it runs,
// with a JSON-RPC error; one at the cap runs.
func TestHTTPBatchCap(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.Burst = 1000 }, HTTPOptions{Now: fixedClock})
	id := h.rawSession(t, "s-operate")
	noVersion := map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": ""}
	resp, body := h.postRaw(t, "s-operate", batchOf(33, 1), noVersion)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `"code":-32600`) || !strings.Contains(body, "http.max_batch") {
		t.Errorf("a batch of 33: %d %s; want 400 with a JSON-RPC error naming http.max_batch", resp.StatusCode, body)
	}
	if n := h.writesAudited(t); n != 0 {
		t.Fatalf("a refused batch ran %d calls", n)
	}
	if resp, body := h.postRaw(t, "s-operate", batchOf(32, 100), noVersion); resp.StatusCode != 200 || strings.Count(body, `"result"`) != 32 {
		t.Fatalf("a batch of 32: %d, %d results", resp.StatusCode, strings.Count(body, `"result"`))
	}
	if n := h.writesAudited(t); n != 32 {
		t.Fatalf("a batch of 32 ran %d calls", n)
	}
}

// Attack 3: every call of a batch counts against the token's rate; a batch
// over what is left of the burst is refused whole, and runs nothing.
func TestHTTPBatchCountsAgainstRate(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.Burst = 40 }, HTTPOptions{Now: fixedClock})
	id := h.rawSession(t, "s-operate") // 2 of 40
	noVersion := map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": ""}
	if resp, _ := h.postRaw(t, "s-operate", batchOf(30, 1), noVersion); resp.StatusCode != 200 {
		t.Fatalf("a batch of 30 within the burst: %d", resp.StatusCode)
	}
	resp, body := h.postRaw(t, "s-operate", batchOf(11, 100), noVersion) // 8 left
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a batch of 11 with 8 left: %d, Retry-After %q, %s; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if n := h.writesAudited(t); n != 30 {
		t.Fatalf("%d calls ran, want the first batch's 30 and none of the refused one", n)
	}
	// The refused batch took nothing of the budget: 8 still fit.
	if resp, _ := h.postRaw(t, "s-operate", batchOf(8, 200), noVersion); resp.StatusCode != 200 {
		t.Fatalf("a batch of 8 with 8 left: %d", resp.StatusCode)
	}
}

// A batch larger than the burst can never fit: 429 whole, nothing runs.
func TestHTTPBatchOverBurst(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.Burst, c.HTTP.MaxBatch = 40, 64 }, HTTPOptions{Now: fixedClock})
	id := h.rawSession(t, "s-operate")
	resp, body := h.postRaw(t, "s-operate", batchOf(41, 1), map[string]string{"Mcp-Session-Id": id, "Mcp-Protocol-Version": ""})
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "http.burst") {
		t.Errorf("a batch of 41 over a burst of 40: %d %s", resp.StatusCode, body)
	}
	if n := h.writesAudited(t); n != 0 {
		t.Fatalf("a batch over the burst ran %d calls", n)
	}
}

// Attack 5: 5,000 unauthenticated requests from 5,000 addresses write a
// record (one burst of one kind), not one per address.
func TestHTTPUnauthenticatedFloodAuditBounded(t *testing.T) {
	h := newHTTPRig(t, nil, HTTPOptions{Now: fixedClock})
	handler := h.a.httpHandler(HTTPOptions{Tokens: newFakeTokens(), Now: fixedClock})
	before := len(h.audit(t))
	for i := range 5000 {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(writeRelay))
		req.RemoteAddr = fmt.Sprintf("10.%d.%d.%d:%d", i>>16&255, i>>8&255, i&255, 1024+i)
		if i%2 == 1 {
			req.Header.Set("Authorization", "Bearer s-guess-"+fmt.Sprint(i))
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("request %d: %d", i, rec.Code)
		}
	}
	recs := h.audit(t)[before:]
	if len(recs) != 1 {
		t.Fatalf("%d audit records for 5,000 unauthenticated requests, want 1", len(recs))
	}
}

// The flood's count reaches the record of the next window.
func TestHTTPFloodCountedIntoNextRecord(t *testing.T) {
	var mu sync.Mutex
	now := fixedClock()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := newHTTPRig(t, nil, HTTPOptions{Now: clock})
	handler := h.a.httpHandler(HTTPOptions{Tokens: newFakeTokens(), Now: clock})
	send := func(i int) {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/mcp", strings.NewReader(writeRelay))
		req.RemoteAddr = fmt.Sprintf("10.0.%d.%d:4000", i>>8&255, i&255)
		handler.ServeHTTP(httptest.NewRecorder(), req)
	}
	before := len(h.audit(t))
	for i := range 300 {
		send(i)
	}
	mu.Lock()
	now = now.Add(2 * transport.RefusalWindow)
	mu.Unlock()
	send(999)
	recs := h.audit(t)[before:]
	if len(recs) != 2 || !strings.Contains(recs[1].Message, "299 alike from 256 or more sources") {
		t.Fatalf("records %d: %+v", len(recs), recs)
	}
}

// Attack 6: one token cannot take every session: at its own cap it loses
// its longest idle session, and another token still gets one.
func TestHTTPSessionCapPerToken(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.MaxSessions, c.HTTP.Burst = 5, 1000 }, HTTPOptions{Now: fixedClock})
	var ids []string
	for range 8 {
		ids = append(ids, h.rawSession(t, "s-read"))
	}
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	if resp, _ := h.postRaw(t, "s-read", ping, map[string]string{"Mcp-Session-Id": ids[0]}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the read token's oldest idle session: %d, want 404 (closed for its newer ones)", resp.StatusCode)
	}
	if resp, _ := h.postRaw(t, "s-read", ping, map[string]string{"Mcp-Session-Id": ids[7]}); resp.StatusCode != 200 {
		t.Errorf("the read token's newest session: %d", resp.StatusCode)
	}
	h.rawSession(t, "s-operate")
	if n := h.a.doors.HTTPSessions(); n > 5 {
		t.Fatalf("%d sessions open, over the cap of 5", n)
	}
}

// A session with a stream open is not idle: at its cap the token is
// refused rather than lose it.
func TestHTTPSessionCapPerTokenBusy(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.MaxSessionsPerToken, c.HTTP.Burst = 1, 1000 }, HTTPOptions{Now: fixedClock})
	id := h.rawSession(t, "s-read")
	stream := h.openStream(t, "s-read", id)
	defer stream.Close()
	if resp, _ := h.postRaw(t, "s-read", initBody, nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a second session of a token at its cap of 1, the first streaming: %d, want 503", resp.StatusCode)
	}
}

// openStream opens the session's GET stream and returns its body once the
// server answered 200.
func (h *httpRig) openStream(t *testing.T, secret, id string) io.ReadCloser {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	return resp.Body
}

// endsWithin reads body to its end in the background and reports whether
// it ended (rather than hangGuard passing).
func endsWithin(body io.Reader) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, body)
		ch <- err
	}()
	return ch
}

// Attack 12: revoking a token ends its open stream and session; its next
// request is 401.
func TestHTTPRevokeEndsStreams(t *testing.T) {
	h := newHTTPRig(t, nil, HTTPOptions{Recheck: 50 * time.Millisecond})
	id := h.rawSession(t, "s-read")
	stream := h.openStream(t, "s-read", id)
	defer stream.Close()
	ended := endsWithin(stream)
	h.tokens.mu.Lock()
	delete(h.tokens.tokens, "s-read")
	h.tokens.mu.Unlock()
	select {
	case <-ended:
	case <-time.After(hangGuard):
		t.Fatal("a revoked token's stream is still open")
	}
	waitFor(t, "the revoked token's session to close", hangGuard, func() bool { return h.a.doors.HTTPSessions() == 0 })
	if resp, _ := h.postRaw(t, "s-read", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, map[string]string{"Mcp-Session-Id": id}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the revoked token's next request: %d", resp.StatusCode)
	}
}

// ... and so does its expiry.
func TestHTTPExpiryEndsStreams(t *testing.T) {
	// go-sdk checks a token's expiry against the wall clock too: the
	// test's clock starts there and jumps.
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	tokens := newFakeTokens()
	tokens.tokens["s-short"] = bearer.Token{Name: "short", Role: bearer.RoleRead, Expires: now.Add(time.Hour)}
	h := newHTTPRig(t, nil, HTTPOptions{Now: clock, Tokens: tokens, Recheck: 50 * time.Millisecond})
	id := h.rawSession(t, "s-short")
	stream := h.openStream(t, "s-short", id)
	defer stream.Close()
	ended := endsWithin(stream)
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	select {
	case <-ended:
	case <-time.After(hangGuard):
		t.Fatal("an expired token's stream is still open")
	}
}

// Attack 13: connections are capped per source address and in total on
// the real listener; a silent connection is cut at the header timeout.
func TestHTTPConnectionCaps(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) {
		c.HTTP.ReadHeaderTimeout = config.Duration(time.Hour) // only the caps may close these
		c.HTTP.MaxConns, c.HTTP.MaxConnsPerSource = 6, 3
	}, HTTPOptions{Now: fixedClock})
	addr := strings.TrimSuffix(strings.TrimPrefix(h.url, "http://"), "/mcp")
	dial := func(src string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial from %s: %v", src, err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		_ = c.SetReadDeadline(time.Now().Add(hangGuard))
		_, err := io.ReadAll(c)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}
	var first net.Conn
	for i := range 3 {
		c := dial("127.0.0.1")
		if i == 0 {
			first = c
		}
	}
	if !closed(dial("127.0.0.1")) {
		t.Fatal("a fourth connection from one address was kept")
	}
	for range 3 {
		dial("127.0.0.2")
	}
	if !closed(dial("127.0.0.3")) {
		t.Fatal("a seventh connection over the total was kept")
	}
	// The connections let in still work.
	if _, err := io.WriteString(first, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer s-read\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	_ = first.SetReadDeadline(time.Now().Add(hangGuard))
	if resp, err := http.ReadResponse(bufio.NewReader(first), nil); err != nil || resp.StatusCode == 0 {
		t.Fatalf("a connection within the caps: %v", err)
	}
}

// A connection that sends nothing is closed at the header timeout.
func TestHTTPSilentConnectionCut(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.ReadHeaderTimeout = config.Duration(200 * time.Millisecond) }, HTTPOptions{})
	conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(h.url, "http://"), "/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	_, err = io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept a silent connection open")
	}
}

// Attack 1's other half: a token's requests in flight are capped, streams
// included.
func TestHTTPInFlightCap(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.MaxInFlight, c.HTTP.Burst = 2, 1000 }, HTTPOptions{Now: fixedClock})
	a, b := h.rawSession(t, "s-read"), h.rawSession(t, "s-read")
	sa, sb := h.openStream(t, "s-read", a), h.openStream(t, "s-read", b)
	defer sa.Close()
	defer sb.Close()
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	if resp, _ := h.postRaw(t, "s-read", ping, map[string]string{"Mcp-Session-Id": a}); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a third request in flight over a cap of 2: %d", resp.StatusCode)
	}
	if resp, _ := h.postRaw(t, "s-operate", ping, map[string]string{"Mcp-Protocol-Version": "2026-07-28"}); resp.StatusCode == http.StatusTooManyRequests {
		t.Fatal("another token refused for the read token's streams")
	}
	sa.Close()
	waitFor(t, "the closed stream to free its slot", hangGuard, func() bool {
		resp, _ := h.postRaw(t, "s-read", ping, map[string]string{"Mcp-Session-Id": b})
		return resp.StatusCode == 200
	})
}

// The same through the real token file, as `raspi-mcp token revoke`
// changes it.
func TestHTTPRevokeThroughTokenFile(t *testing.T) {
	file := &bearer.File{Path: filepath.Join(t.TempDir(), "tokens.toml")}
	secret, _, err := file.Create("dash", bearer.RoleRead, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h := newHTTPRig(t, nil, HTTPOptions{Tokens: file, Recheck: 50 * time.Millisecond})
	id := h.rawSession(t, secret)
	stream := h.openStream(t, secret, id)
	defer stream.Close()
	ended := endsWithin(stream)
	if err := file.Revoke("dash"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(hangGuard):
		t.Fatal("a token revoked in the file still has its stream open")
	}
	if resp, _ := h.postRaw(t, secret, `{"jsonrpc":"2.0","id":7,"method":"ping"}`, map[string]string{"Mcp-Session-Id": id}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the revoked token's next request: %d", resp.StatusCode)
	}
}
