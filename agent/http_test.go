package agent

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
	"github.com/raspi-mcp/raspi-mcp/internal/webguard"
)

// fakeTokens is a token file in memory: secret -> token. A test may change
// a token's role while a session is open, as revoking and re-creating a
// token of the same name would.
type fakeTokens struct {
	mu     sync.Mutex
	tokens map[string]bearer.Token
}

func (f *fakeTokens) Verify(secret string, now time.Time) (bearer.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.tokens[secret]
	if !ok {
		return bearer.Token{}, bearer.ErrUnknown
	}
	if !t.Expires.IsZero() && !now.Before(t.Expires) {
		return t, bearer.ErrExpired
	}
	return t, nil
}

func (f *fakeTokens) setRole(secret, role string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tokens[secret]
	t.Role = role
	f.tokens[secret] = t
}

func newFakeTokens() *fakeTokens {
	return &fakeTokens{tokens: map[string]bearer.Token{
		"s-admin":   {Name: "laptop", Role: bearer.RoleAdmin},
		"s-operate": {Name: "ha", Role: bearer.RoleOperate},
		"s-read":    {Name: "grafana", Role: bearer.RoleRead},
		"s-metrics": {Name: "prom", Role: bearer.RoleMetrics},
		"s-expired": {Name: "old", Role: bearer.RoleAdmin, Expires: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)},
	}}
}

// httpRig is a rig whose agent also serves HTTP on a loopback port.
type httpRig struct {
	*rig
	url    string // http(s)://127.0.0.1:PORT/mcp
	tokens *fakeTokens
	// dial connects an SDK client over the agent's Unix socket.
	dial func(opts *mcp.ClientOptions, version string) *mcp.ClientSession
}

// newHTTPRig starts the agent (socket and HTTP) with mod applied to its
// config and o (Tokens defaults to newFakeTokens).
func newHTTPRig(t *testing.T, mod func(*config.Config), o HTTPOptions) *httpRig {
	t.Helper()
	r := newSimRig(t, mod)
	dial := r.serveMany() // the socket and the agent's background work, as serve runs them
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ft, _ := o.Tokens.(*fakeTokens)
	if o.Tokens == nil {
		ft = newFakeTokens()
		o.Tokens = ft
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.a.ServeHTTPEndpoint(ctx, ln, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeHTTPEndpoint: %v", err)
		}
	})
	scheme := "http"
	if r.cfg.HTTP.TLS {
		scheme = "https"
	}
	return &httpRig{rig: r, url: scheme + "://" + ln.Addr().String() + "/mcp", tokens: ft, dial: dial}
}

// bearerRT adds a bearer token to every request.
type bearerRT struct {
	secret string
	base   http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.secret)
	return b.base.RoundTrip(r)
}

// connect is an SDK client over HTTP with secret, speaking version ("" is
// the client's latest, 2026-07-28).
func (h *httpRig) connect(t *testing.T, secret, version string, base http.RoundTripper) (*mcp.ClientSession, error) {
	t.Helper()
	if base == nil {
		base = http.DefaultTransport
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "1"}, nil)
	var so *mcp.ClientSessionOptions
	if version != "" {
		so = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: h.url, HTTPClient: &http.Client{Transport: bearerRT{secret, base}}, MaxRetries: -1}, so)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, nil
}

func (h *httpRig) mustConnect(t *testing.T, secret, version string) *mcp.ClientSession {
	t.Helper()
	s, err := h.connect(t, secret, version, nil)
	if err != nil {
		t.Fatalf("connect with %s (%q): %v", secret, version, err)
	}
	return s
}

func callHTTP(t *testing.T, s *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// post sends one raw JSON-RPC request; secret "" sends no Authorization.
func (h *httpRig) post(t *testing.T, secret, body string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// audit is every record, oldest first.
func (h *httpRig) audit(t *testing.T) []store.AuditRecord {
	t.Helper()
	recs, _, err := h.db.QueryAudit(store.AuditQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) > 1 && recs[0].Seq > recs[1].Seq {
		for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
			recs[i], recs[j] = recs[j], recs[i]
		}
	}
	return recs
}

const writeRelay = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"gpio_write_pin","arguments":{"pin":17,"value":"high"}}}`

// fixedClock keeps refusals alike within one burst however slow the
// machine is, and a token's bucket from refilling.
func fixedClock() time.Time { return time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC) }

// Both protocol eras over HTTP with a token: the socket's tools, a call, a
// dry run, a write, a denial, and audit records naming the token and the
// remote address.
func TestHTTPServesBothEras(t *testing.T) {
	h := newHTTPRig(t, nil, HTTPOptions{})
	sock := h.dial(nil, "")
	ctx := context.Background()
	want, err := sock.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		s := h.mustConnect(t, "s-operate", version)
		if got := s.InitializeResult().ProtocolVersion; got != version {
			t.Fatalf("negotiated %s, want %s", got, version)
		}
		tools, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// The lists are shaped by policy: the operate token is listed what
		// an operator may call (not the admin tools, nor change_* while no
		// critical tool is an operator's), the admin socket everything.
		op := mayNames(h.rig, identity.FromToken("ha", "operate", "", ""))
		if len(want.Tools) != len(h.rig.a.tools.All()) || len(tools.Tools) != len(op) {
			t.Fatalf("%s: %d tools over HTTP (the socket %d), want an operator's %d", version, len(tools.Tools), len(want.Tools), len(op))
		}
		for _, tl := range tools.Tools {
			if !op[tl.Name] {
				t.Errorf("%s: %s listed to an operate token", version, tl.Name)
			}
		}
		before := len(h.audit(t))
		dry := callHTTP(t, s, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "dry_run": true})
		if dry.IsError || level17(t, h.rig) != 0 {
			t.Fatalf("%s: dry run: error %v, pin %d", version, dry.IsError, level17(t, h.rig))
		}
		w := callHTTP(t, s, "gpio_write_pin", map[string]any{"pin": 17, "value": "high", "reason": "test " + version})
		if w.IsError || level17(t, h.rig) != 1 {
			t.Fatalf("%s: write: error %v, pin %d", version, w.IsError, level17(t, h.rig))
		}
		callHTTP(t, s, "gpio_write_pin", map[string]any{"pin": 17, "value": "low", "reason": "reset"})
		denied := callHTTP(t, s, "gpio_write_pin", map[string]any{"pin": 5, "value": "high"})
		wantErr(t, resultError(t, denied), CodePermissionDenied, map[string]any{"allowed_pins": []any{4.0, 17.0, 18.0, 27.0}, "parameter": "pin"})

		recs := h.audit(t)[before:]
		if len(recs) != 4 {
			t.Fatalf("%s: %d audit records, want 4: %+v", version, len(recs), recs)
		}
		for i, rec := range recs {
			if rec.Principal != "token:ha" || rec.Role != "operate" || !strings.HasPrefix(rec.Remote, "127.0.0.1:") {
				t.Errorf("%s: record %d: principal %q role %q remote %q", version, i, rec.Principal, rec.Role, rec.Remote)
			}
		}
		if !recs[0].DryRun || recs[3].Decision != store.DecisionDeny {
			t.Errorf("%s: records %+v", version, recs)
		}
		// The model's view of the trail shows where a call came from.
		tail := callHTTP(t, s, "logs_get_recent_audit_logs", map[string]any{"limit": 1})
		if b, _ := json.Marshal(tail.StructuredContent); !strings.Contains(string(b), `"remote":"127.0.0.1:`) {
			t.Errorf("%s: audit log entries lack the remote address: %s", version, b)
		}
	}
	if v, err := h.db.VerifyAudit(); err != nil || !v.OK {
		t.Fatalf("audit chain with remote addresses: %+v %v", v, err)
	}
}

// A read token calling a write gets the refusal a reader gets on the
// socket, and nothing changes.
func TestHTTPReadTokenRefusedAsOnSocket(t *testing.T) {
	h := newHTTPRig(t, nil, HTTPOptions{})
	args := map[string]any{"pin": 17, "value": "high"}
	_, sockErr := callAs[GPIOWriteOut](t, h.rig, reader, "gpio_write_pin", args)
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		s := h.mustConnect(t, "s-read", version)
		e := resultError(t, callHTTP(t, s, "gpio_write_pin", args))
		wantErr(t, e, CodePermissionDenied, sockErr.Details)
		if e.Message != strings.ReplaceAll(sockErr.Message, reader.Name, "token:grafana") {
			t.Errorf("%s: message %q, socket's %q", version, e.Message, sockErr.Message)
		}
		if level17(t, h.rig) != 0 {
			t.Fatalf("%s: a read token changed the pin", version)
		}
	}
}

// Every request of a session acts as its own token: a token whose role
// drops mid-session is refused on its next call.
func TestHTTPPrincipalPerRequest(t *testing.T) {
	h := newHTTPRig(t, nil, HTTPOptions{})
	s := h.mustConnect(t, "s-operate", "2025-11-25")
	args := map[string]any{"pin": 17, "value": "high", "dry_run": true}
	if res := callHTTP(t, s, "gpio_write_pin", args); res.IsError {
		t.Fatalf("operate dry run refused: %+v", resultError(t, res))
	}
	h.tokens.setRole("s-operate", bearer.RoleRead)
	wantErr(t, resultError(t, callHTTP(t, s, "gpio_write_pin", args)), CodePermissionDenied, nil)
	// Another token cannot use the session at all.
	ok, err := h.connect(t, "s-admin", "2025-11-25", sessionStealer{id: sessionID(t, s)})
	if err == nil {
		ok.Close()
		t.Fatal("a session opened by one token was usable with another")
	}
}

func sessionID(t *testing.T, s *mcp.ClientSession) string {
	t.Helper()
	if s.ID() == "" {
		t.Fatal("no session id")
	}
	return s.ID()
}

// sessionStealer sends every request inside an existing session.
type sessionStealer struct{ id string }

func (st sessionStealer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Mcp-Session-Id", st.id)
	return http.DefaultTransport.RoundTrip(r)
}

// Missing, unknown and expired tokens get 401 with a challenge, a metrics
// token 403; nothing runs, and a burst of refusals is recorded once.
func TestHTTPRefusesBadTokens(t *testing.T) {
	h := newHTTPRig(t, nil, HTTPOptions{Now: fixedClock})
	before := len(h.audit(t))
	for _, c := range []struct {
		secret, challenge string
		status            int
	}{
		{"", `Bearer realm="raspi-mcp"`, 401},
		{"s-nobody", `Bearer realm="raspi-mcp", error="invalid_token", error_description="unknown or revoked token; make one on the device with raspi-mcp token create"`, 401},
		{"s-expired", `Bearer realm="raspi-mcp", error="invalid_token", error_description="token expired; make one on the device with raspi-mcp token create"`, 401},
		{"s-metrics", `Bearer realm="raspi-mcp", error="insufficient_scope"`, 403},
	} {
		for range 5 {
			resp := h.post(t, c.secret, writeRelay, nil)
			if resp.StatusCode != c.status || resp.Header.Get("WWW-Authenticate") != c.challenge {
				t.Fatalf("%q: %d %q, want %d %q", c.secret, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), c.status, c.challenge)
			}
		}
		if _, err := h.connect(t, c.secret, "", nil); err == nil {
			t.Fatalf("%q: an SDK client connected", c.secret)
		}
	}
	if level17(t, h.rig) != 0 {
		t.Fatal("a refused request changed the pin")
	}
	recs := h.audit(t)[before:]
	// One record per kind of refusal, not one per request.
	want := map[string]string{"anonymous": CodeUnauthenticated, "token:old": CodeUnauthenticated, "token:prom": CodePermissionDenied}
	got := map[string]string{}
	for _, rec := range recs {
		if rec.Tool != "http" || rec.Decision != store.DecisionDeny || !strings.HasPrefix(rec.Remote, "127.0.0.1:") {
			t.Errorf("record %+v", rec)
		}
		if _, dup := got[rec.Principal]; dup && rec.Principal != "anonymous" {
			t.Errorf("refusals of %s recorded more than once", rec.Principal)
		}
		got[rec.Principal] = rec.ErrorCode
	}
	if len(recs) != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%d refusal records %v, want one each of %v", len(recs), got, want)
	}
}

// A refused token reads as such where clients show it: the 401's challenge
// and body say why and how to get a token (within RFC 6750's character set
// for error_description), and the OAuth paths a TS-SDK client probes after
// a 401 answer 404 with an OAuth error saying there is no OAuth, which the
// SDK puts in the error it reports. Other paths stay a plain 404.
func TestHTTPRefusalSaysHowToGetAToken(t *testing.T) {
	h := newHTTPRig(t, nil, HTTPOptions{Now: fixedClock})
	base := strings.TrimSuffix(h.url, "/mcp")
	do := func(method, path, secret string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(writeRelay))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, c := range []struct{ secret, why string }{{"", "no bearer token"}, {"s-nobody", "unknown or revoked token"}, {"s-expired", "token expired"}} {
		resp, body := do(http.MethodPost, "/mcp", c.secret)
		if resp.StatusCode != 401 || !strings.Contains(body, c.why) || !strings.Contains(body, "raspi-mcp token create") || !strings.Contains(body, "Authorization: Bearer") {
			t.Errorf("%q: %d %q, want 401 with why and how to get a token", c.secret, resp.StatusCode, body)
		}
		ch := resp.Header.Get("WWW-Authenticate")
		if c.secret != "" && !strings.Contains(ch, "raspi-mcp token create") {
			t.Errorf("%q: challenge %q lacks the fix", c.secret, ch)
		}
		_, desc, _ := strings.Cut(ch, `error_description="`)
		desc = strings.TrimSuffix(desc, `"`)
		if strings.ContainsAny(desc, "\"\\") || strings.ContainsFunc(desc, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			t.Errorf("%q: error_description %q outside RFC 6750's characters", c.secret, desc)
		}
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/.well-known/oauth-protected-resource/mcp"},
		{http.MethodGet, "/.well-known/oauth-protected-resource"},
		{http.MethodGet, "/.well-known/oauth-authorization-server"},
		{http.MethodGet, "/.well-known/openid-configuration"},
		{http.MethodGet, "/mcp/.well-known/openid-configuration"},
		{http.MethodPost, "/register"},
		{http.MethodGet, "/authorize"},
	} {
		resp, body := do(c.method, c.path, "")
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if err := json.Unmarshal([]byte(body), &e); resp.StatusCode != 404 || err != nil || e.Error == "" ||
			!strings.Contains(e.Description, "does not use OAuth") || !strings.Contains(e.Description, "raspi-mcp token create") {
			t.Errorf("%s %s: %d %q (%v), want 404 with an OAuth error saying there is none", c.method, c.path, resp.StatusCode, body, err)
		}
	}
	if resp, body := do(http.MethodGet, "/favicon.ico", ""); resp.StatusCode != 404 || strings.Contains(body, "OAuth") {
		t.Errorf("/favicon.ico: %d %q, want a plain 404", resp.StatusCode, body)
	}
	if level17(t, h.rig) != 0 {
		t.Fatal("a refused request changed the pin")
	}
}

// Host and Origin must name this device; the body is capped.
func TestHTTPGuards(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) {
		c.HTTP.Names = []string{"pi.local"}
		c.HTTP.MaxBodyBytes = 4096
	}, HTTPOptions{Now: fixedClock})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for name, c := range map[string]struct {
		hdr    map[string]string
		body   string
		status int
	}{
		"loopback host":     {nil, ping, 200},
		"configured name":   {map[string]string{"Host": "pi.local:8765", "Origin": "https://pi.local"}, ping, 200},
		"foreign host":      {map[string]string{"Host": "evil.example:8765"}, ping, 403},
		"foreign origin":    {map[string]string{"Origin": "http://evil.example"}, ping, 403},
		"rebinding":         {map[string]string{"Host": "attacker.example", "Origin": "http://attacker.example"}, ping, 403},
		"body over the cap": {nil, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"` + strings.Repeat("a", 5000) + `"}}}`, 413},
	} {
		if resp := h.post(t, "s-read", c.body, c.hdr); resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d", name, resp.StatusCode, c.status)
		}
	}
	// A chunked body has no length to refuse up front: it is cut as read.
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"x":"` + strings.Repeat("a", 8000) + `"}}}`))
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, h.url, pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer s-read")
	resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("chunked body over the cap: %d", resp.StatusCode)
	}
	codes := map[string]int{}
	for _, rec := range h.audit(t) {
		if rec.Tool == "http" {
			codes[rec.Message[:8]]++
		}
	}
	if codes["HTTP 403"] != 1 || codes["HTTP 413"] != 1 {
		t.Errorf("guard refusals recorded %v, want one 403 and one 413 (once per burst)", codes)
	}
}

// A client that sends its headers too slowly is cut.
func TestHTTPSlowClientCut(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) {
		c.HTTP.ReadHeaderTimeout = config.Duration(200 * time.Millisecond)
	}, HTTPOptions{})
	conn, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(h.url, "http://"), "/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(hangGuard))
	// The server answers (408) or just closes; either way the connection
	// ends without the rest of the headers, which never come.
	rest, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept a slow client's connection open")
	}
	if len(rest) > 0 && !bytes.HasPrefix(rest, []byte("HTTP/1.1 408")) {
		t.Fatalf("answer to a slow client: %q", rest)
	}
}

// A token over its rate gets 429 with Retry-After; other tokens go on.
func TestHTTPRateLimit(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.Rate, c.HTTP.Burst = 0.5, 3 }, HTTPOptions{Now: fixedClock})
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for i := range 3 {
		if resp := h.post(t, "s-read", ping, nil); resp.StatusCode != 200 {
			t.Fatalf("request %d within the burst: %d", i, resp.StatusCode)
		}
	}
	resp := h.post(t, "s-read", ping, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("over the rate: %d, Retry-After %q; want 429 and 2", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if resp := h.post(t, "s-operate", ping, nil); resp.StatusCode != 200 {
		t.Fatalf("another token: %d", resp.StatusCode)
	}
}

// At most max_sessions sessions; a stateless client needs none.
func TestHTTPSessionCap(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.MaxSessions = 1 }, HTTPOptions{})
	first := h.mustConnect(t, "s-read", "2025-11-25")
	// Another token: the read token at its own cap would give up its idle
	// session instead (TestHTTPSessionCapPerToken).
	if _, err := h.connect(t, "s-operate", "2025-11-25", nil); err == nil {
		t.Fatal("a second session opened over the cap")
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	if resp := h.post(t, "s-operate", init, nil); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("initialize over the cap: %d", resp.StatusCode)
	}
	modern := h.mustConnect(t, "s-read", "2026-07-28")
	callHTTP(t, modern, "system_get_capabilities", nil)
	first.Close()
	waitFor(t, "the closed session to leave", hangGuard, func() bool { return h.a.doors.HTTPSessions() == 0 })
	h.mustConnect(t, "s-read", "2025-11-25")
}

// With tls = true the agent makes a certificate; a client pinning its
// fingerprint connects, one that trusts only the system's roots does not.
func TestHTTPSelfSignedTLS(t *testing.T) {
	h := newHTTPRig(t, func(c *config.Config) { c.HTTP.TLS = true }, HTTPOptions{})
	waitFor(t, "the endpoint to serve", hangGuard, func() bool { return h.a.doors.HTTPStatus() != nil })
	st := h.a.doors.HTTPStatus()
	if !strings.HasPrefix(st.URL, "https://") || !strings.HasPrefix(st.Fingerprint, "sha256:") {
		t.Fatalf("status %+v", st)
	}
	fi, err := os.Stat(filepath.Join(filepath.Dir(h.cfg.Agent.State), webguard.KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	pinned := &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // replaced by the pin below
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 || webguard.Fingerprint(raw[0]) != st.Fingerprint {
				return errors.New("certificate does not match the pinned fingerprint")
			}
			return nil
		}}}
	s, err := h.connect(t, "s-read", "", pinned)
	if err != nil {
		t.Fatalf("pinned client: %v", err)
	}
	callHTTP(t, s, "system_get_capabilities", nil)
	var ue x509.UnknownAuthorityError
	if _, err := h.connect(t, "s-read", "", &http.Transport{}); err == nil || !errors.As(err, &ue) {
		t.Fatalf("client without the pin: %v, want an unknown authority error", err)
	}
	other := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, VerifyPeerCertificate: func([][]byte, [][]*x509.Certificate) error {
		return errors.New("pinned to another certificate")
	}}}
	if _, err := h.connect(t, "s-read", "", other); err == nil {
		t.Fatal("a client pinned to another certificate connected")
	}
	// HTTP/1.1 whatever the client offers: the shipped binary has no HTTP/2.
	u, err := url.Parse(st.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if p := c.ConnectionState().NegotiatedProtocol; p == "h2" {
		t.Errorf("the endpoint agreed to %q", p)
	}
}

// A listener reachable from the network is refused without TLS, unless
// insecure_plaintext is set, also when systemd made it.
func TestHTTPRefusesPlaintextOffLoopback(t *testing.T) {
	r := newSimRig(t, nil)
	ln := fakeListener{addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 10), Port: 8765}}
	err := r.a.ServeHTTPEndpoint(context.Background(), ln, HTTPOptions{Tokens: newFakeTokens()})
	if err == nil || !strings.Contains(err.Error(), "insecure_plaintext") {
		t.Fatalf("plaintext on 192.0.2.10: %v", err)
	}
	c := config.Laptop(t.TempDir(), "pi")
	c.HTTP.Listen = "0.0.0.0:8765"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "http.listen") {
		t.Fatalf("config check of plaintext 0.0.0.0: %v", err)
	}
	c.HTTP.InsecurePlaintext = true
	if err := c.Validate(); err != nil {
		t.Fatalf("insecure_plaintext set on purpose: %v", err)
	}
}

// fakeListener only has an address; Accept fails.
type fakeListener struct{ addr net.Addr }

func (f fakeListener) Accept() (net.Conn, error) { return nil, errors.New("fake listener") }
func (f fakeListener) Close() error              { return nil }
func (f fakeListener) Addr() net.Addr            { return f.addr }

// /metrics: 404 without a handler; loopback without a token; a token of
// any role.
func TestHTTPMetricsAuth(t *testing.T) {
	h := newHTTPRig(t, nil, HTTPOptions{})
	get := func(url, secret string) int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if secret != "" {
			req.Header.Set("Authorization", "Bearer "+secret)
		}
		resp, err := (&http.Client{Timeout: hangGuard}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	metricsURL := strings.TrimSuffix(h.url, "/mcp") + "/metrics"
	if got := get(metricsURL, ""); got != 404 {
		t.Fatalf("/metrics without a handler: %d", got)
	}
	m := newHTTPRig(t, nil, HTTPOptions{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "up 1\n") })})
	metricsURL = strings.TrimSuffix(m.url, "/mcp") + "/metrics"
	for secret, want := range map[string]int{"": 200, "s-metrics": 200, "s-read": 200, "s-nobody": 401} {
		if got := get(metricsURL, secret); got != want {
			t.Errorf("/metrics with %q: %d, want %d", secret, got, want)
		}
	}
	// Off loopback a token is needed: the rule, through a request that
	// looks remote.
	req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr, req.Host = "192.0.2.7:40000", "127.0.0.1"
	rec := &statusRecorder{header: http.Header{}}
	m.a.httpHandler(HTTPOptions{Tokens: newFakeTokens(), Metrics: http.NotFoundHandler()}).ServeHTTP(rec, req)
	if rec.status != 401 {
		t.Fatalf("/metrics from the LAN without a token: %d", rec.status)
	}
}

type statusRecorder struct {
	header http.Header
	status int
}

func (s *statusRecorder) Header() http.Header { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = 200
	}
	return len(b), nil
}
func (s *statusRecorder) WriteHeader(c int) { s.status = c }

// BenchmarkHTTPCall is one trivial call over loopback HTTP (2026-07-28,
// stateless) and over the Unix socket, reporting each path's p50 and p99
// and what HTTP adds.
func BenchmarkHTTPCall(b *testing.B) {
	r := newSimRig(b, func(c *config.Config) { c.HTTP.Rate, c.HTTP.Burst = 10000, 100000 })
	sock := r.serveMany()(nil, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.a.ServeHTTPEndpoint(ctx, ln, HTTPOptions{Tokens: newFakeTokens()}) }()
	b.Cleanup(func() { cancel(); <-done })
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	hs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + ln.Addr().String() + "/mcp",
		HTTPClient: &http.Client{Transport: bearerRT{"s-read", http.DefaultTransport}}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer hs.Close()
	params := &mcp.CallToolParams{Name: "system_get_capabilities"}
	call := func(s *mcp.ClientSession) time.Duration {
		start := time.Now()
		if _, err := s.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	// Interleaved, so both paths see the same load on a shared machine.
	viaHTTP, viaSock := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		viaHTTP = append(viaHTTP, call(hs))
		viaSock = append(viaSock, call(sock))
	}
	b.StopTimer()
	hp50, hp99 := percentiles(viaHTTP)
	sp50, sp99 := percentiles(viaSock)
	b.ReportMetric(float64(hp50.Microseconds()), "http-p50-µs")
	b.ReportMetric(float64(hp99.Microseconds()), "http-p99-µs")
	b.ReportMetric(float64(sp50.Microseconds()), "socket-p50-µs")
	b.ReportMetric(float64(sp99.Microseconds()), "socket-p99-µs")
	b.ReportMetric(float64((hp50 - sp50).Microseconds()), "added-p50-µs")
	b.ReportMetric(float64((hp99 - sp99).Microseconds()), "added-p99-µs")
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)-1, len(s)*99/100)]
}
