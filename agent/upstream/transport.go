package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxJSONBody caps a plain JSON response. Event streams are capped per
// event by the SDK instead.
const maxJSONBody = 16 << 20

// newHTTPTransport returns a fresh transport for one connection attempt, so
// keep-alive connections to a server that has since restarted are never
// reused and a torn-down session leaves no idle connections behind.
func (c *Client) newHTTPTransport(rec *recorder) *http.Transport {
	d := &net.Dialer{Timeout: min(c.o.Timeout, 10*time.Second), KeepAlive: 30 * time.Second}
	t := &http.Transport{
		// No proxy: LAN upstreams are dialed directly, and a proxy would
		// make CheckAddrs meaningless.
		Proxy:               nil,
		DialContext:         c.dialer(d, rec),
		TLSHandshakeTimeout: min(c.o.Timeout, 10*time.Second),
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
		// HTTP/1.1 only, as the agent's own endpoint: MCP needs nothing
		// more, and the shipped binary carries no HTTP/2 (Makefile).
		Protocols: http1Only(),
	}
	// Without a pin, the default TLS config: system roots, names checked.
	if c.o.TLSFingerprint != "" {
		t.TLSClientConfig = c.pinnedTLS(rec)
	}
	return t
}

// dialer resolves the host itself, lets CheckAddrs vet the addresses, and
// dials only those addresses by IP, so the address connected to is the one
// that was checked (no DNS rebinding between check and connect).
func (c *Client) dialer(d *net.Dialer, rec *recorder) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		var ips []netip.Addr
		if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip.Unmap()}
		} else {
			found, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			if err != nil {
				return nil, err
			}
			for _, ip := range found {
				ips = append(ips, ip.Unmap())
			}
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("%s: no addresses", host)
		}
		if c.o.CheckAddrs != nil {
			if err := c.o.CheckAddrs(host, ips); err != nil {
				perr := &policyError{host: host, addrs: ips, err: err}
				rec.notePolicy(perr)
				return nil, perr
			}
		}
		var errs []error
		for _, ip := range ips {
			conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
			if err == nil {
				return conn, nil
			}
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		return nil, errors.Join(errs...)
	}
}

// policyError is a refusal by Options.CheckAddrs.
type policyError struct {
	host  string
	addrs []netip.Addr
	err   error
}

func (e *policyError) Error() string {
	return fmt.Sprintf("address policy refused %s (%v): %v", e.host, e.addrs, e.err)
}

func (e *policyError) Unwrap() error { return e.err }

// roundTripper adds the bearer token, keeps every request on the configured
// origin (an SSE server names its own message endpoint; the token must not
// follow it elsewhere), records what the connect phase saw, and watches the
// long-lived event streams whose end means the upstream went away.
type roundTripper struct {
	base   http.RoundTripper
	origin *url.URL
	token  string
	rec    *recorder
	sig    *signals
}

func (t *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != t.origin.Scheme || req.URL.Host != t.origin.Host {
		if req.Body != nil {
			req.Body.Close()
		}
		// Recorded, so the connect error names it whichever way the SDK
		// reports the failed request (its own error, or "connection closed").
		err := fmt.Errorf("refusing request to %s://%s: not the configured upstream", req.URL.Scheme, req.URL.Host)
		t.rec.notePolicy(err)
		return nil, err
	}
	ctx := req.Context()
	if wt, ok := ctx.Value(wireTraceKey{}).(*wireTrace); ok {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wt.wrote.Store(true) },
		})
	}
	req = req.Clone(ctx)
	if t.token != "" {
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	if req.Method == http.MethodDelete {
		return t.roundTripDelete(req)
	}
	listen := req.Method == http.MethodPost && isListen(req)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		noteUntrusted(t.rec, err)
		return nil, err
	}
	t.rec.noteResponse(req, resp)
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	switch {
	case ct == "text/event-stream" && ok && listen:
		// The 2026-07-28 protocol delivers list_changed on a
		// subscriptions/listen stream that the SDK opens once and never
		// reopens: when it ends, the session must be rebuilt.
		resp.Body = &watchBody{ReadCloser: resp.Body, ctx: req.Context(), onEnd: t.sig.markLost}
	case ct == "text/event-stream" && ok && req.Method == http.MethodGet:
		// The standalone stream (2025 protocol) or the SSE transport's
		// stream: its end is the earliest sign of an upstream restart.
		resp.Body = &watchBody{ReadCloser: resp.Body, ctx: req.Context(), onEnd: t.sig.kick}
	case ct != "text/event-stream":
		resp.Body = &capBody{ReadCloser: resp.Body, left: maxJSONBody}
	}
	return resp, nil
}

const deleteTimeout = time.Second

// roundTripDelete sends the session-terminating DELETE. It is best effort:
// the SDK allows it 5s, and an SDK server's DELETE blocks until its running
// handlers return, so a hung upstream would hold up teardown and shutdown.
func (t *roundTripper) roundTripDelete(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(req.Context(), deleteTimeout)
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody releases a request's context when its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// isListen reports whether req carries a subscriptions/listen request.
func isListen(req *http.Request) bool {
	if req.GetBody == nil {
		return false
	}
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, 64<<10))
	if err != nil || !bytes.Contains(data, []byte(`"subscriptions/listen"`)) {
		return false
	}
	var msg struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(data, &msg) == nil && msg.Method == "subscriptions/listen"
}

// watchBody calls onEnd once when the stream ends for any reason other than
// our own cancellation.
type watchBody struct {
	io.ReadCloser
	ctx   context.Context
	onEnd func()
	once  sync.Once
}

func (b *watchBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && b.ctx.Err() == nil {
		b.once.Do(b.onEnd)
	}
	return n, err
}

// capBody fails a response body that grows past its cap instead of
// buffering whatever a broken upstream sends.
type capBody struct {
	io.ReadCloser
	left int64
}

func (b *capBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("upstream response larger than %d bytes", maxJSONBody)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		// Peek: a body that ends exactly at the cap is fine.
		var one [1]byte
		if m, _ := b.ReadCloser.Read(one[:]); m > 0 {
			return n, fmt.Errorf("upstream response larger than %d bytes", maxJSONBody)
		}
	}
	return n, err
}

// recorder remembers what one connection attempt saw on the wire, to turn
// the SDK's generic connect errors into decisions (fall back to SSE?) and
// clear messages (bad token, address policy).
type recorder struct {
	mu         sync.Mutex
	finished   bool
	postStatus []int
	getStatus  int
	getType    string
	authStatus int
	policyErr  error
}

func (r *recorder) noteResponse(req *http.Request, resp *http.Response) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.finished {
		return
	}
	switch req.Method {
	case http.MethodPost:
		r.postStatus = append(r.postStatus, resp.StatusCode)
	case http.MethodGet:
		if r.getStatus == 0 {
			r.getStatus = resp.StatusCode
			r.getType, _, _ = mime.ParseMediaType(resp.Header.Get("Content-Type"))
		}
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		r.authStatus = resp.StatusCode
	}
}

func (r *recorder) notePolicy(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.policyErr == nil {
		r.policyErr = err
	}
}

func (r *recorder) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = true
}

func (r *recorder) policy() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.policyErr
}

func (r *recorder) auth() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.authStatus == 0 {
		return nil
	}
	return fmt.Errorf("HTTP %d %s: the upstream refused our credentials; check its token",
		r.authStatus, http.StatusText(r.authStatus))
}

// wrongProtocol reports whether the server answered like one that does not
// speak kind: every streamable POST refused with 400/404/405 (an SSE
// server's message endpoint wants a session id), or an SSE GET refused or
// answered with something that is not an event stream.
func (r *recorder) wrongProtocol(kind string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	refused := func(code int) bool {
		return code == http.StatusBadRequest || code == http.StatusNotFound || code == http.StatusMethodNotAllowed
	}
	if kind == TransportSSE {
		return refused(r.getStatus) || (r.getStatus >= 200 && r.getStatus < 300 && r.getType != "text/event-stream")
	}
	if len(r.postStatus) == 0 {
		return false
	}
	for _, code := range r.postStatus {
		if !refused(code) {
			return false
		}
	}
	return true
}

// commandTransport starts Options.Command for one session. The child's
// stderr goes to the log, line by line, since stdout is the protocol.
func (c *Client) commandTransport() mcp.Transport {
	cmd := exec.Command(c.o.Command[0], c.o.Command[1:]...)
	cmd.Env = append(os.Environ(), c.o.Env...)
	cmd.Stderr = &lineLog{log: c.log}
	// Bound Wait if a grandchild keeps stderr open after the server exits.
	cmd.WaitDelay = 2 * time.Second
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
}

// lineLog logs a child's stderr one line at a time, truncating long lines.
type lineLog struct {
	log *slog.Logger
	buf []byte
}

const maxLogLine = 1024

func (l *lineLog) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxLogLine {
				l.emit(l.buf)
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.emit(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

func (l *lineLog) emit(line []byte) {
	s := strings.TrimRight(string(line), "\r")
	if len(s) > maxLogLine {
		s = s[:maxLogLine] + "…"
	}
	if s != "" {
		l.log.Info("upstream stderr", "line", s)
	}
}

// http1Only is the protocol set of HTTP/1.1 alone.
func http1Only() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return p
}
