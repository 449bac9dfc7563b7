package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
	"github.com/raspi-mcp/raspi-mcp/internal/errcode"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
	"github.com/raspi-mcp/raspi-mcp/internal/webguard"
)

// The HTTP endpoint serves the agent's one *mcp.Server, and so the same
// tools, resources, prompts, policy and audit as the Unix socket; only how
// the principal is learned differs: from the request's bearer token rather
// than the socket's peer credentials, and anew for every request.

// TokenVerifier checks a bearer secret at now and says whose it is; the
// token file (bearer.File) is one. ErrUnknown and ErrExpired are the
// caller's fault (401); any other error is the device's (503).
type TokenVerifier interface {
	Verify(secret string, now time.Time) (bearer.Token, error)
}

// HTTPOptions are what the HTTP endpoint needs beyond the agent's config.
type HTTPOptions struct {
	Tokens TokenVerifier
	// Metrics serves /metrics; nil: /metrics is 404.
	Metrics http.Handler
	// Now is the clock for token expiry, rate limits and refusal bursts;
	// nil: time.Now.
	Now func() time.Time
	// Recheck is how often the tokens of open streams and sessions are
	// checked again, so a revoked or expired token's end theirs; 0:
	// defaultRecheck.
	Recheck time.Duration
}

// defaultRecheck: a revoked token's streams end within two seconds, for a
// stat of the token file and a hash per token in use.
const defaultRecheck = 2 * time.Second

// HTTPStatus is the endpoint as `raspi-mcp status` shows it.
type HTTPStatus struct {
	URL string `json:"url" jsonschema:"where MCP is served over HTTP"`
	// Fingerprint is the SHA-256 of the TLS certificate clients pin.
	Fingerprint string `json:"tls_fingerprint,omitempty" jsonschema:"sha256 of the TLS certificate, for clients to pin"`
}

// RefusalWindow is how long refusals alike are recorded once: at the HTTP
// front those of the same principal and status, from any address; on the
// socket an unmapped uid's connections (refusalGate) and a principal's
// sessions cut for a bound.
const RefusalWindow = time.Minute

// maxRefusalRecords caps the refusal records of all kinds together per
// refusalWindow: the fsyncs a flood can cause, whatever it varies.
const maxRefusalRecords = 30

// realm names the endpoint in WWW-Authenticate.
const realm = `Bearer realm="raspi-mcp"`

// modernVersion is the first protocol revision without sessions
// (2026-07-28): go-sdk serves it only from a stateless handler, and the
// 2025-11-25 era only from a stateful one.
const modernVersion = "2026-07-28"

type httpFront struct {
	d        *Doors
	cfg      config.HTTP
	o        HTTPOptions
	guard    *webguard.Guard
	limiter  *webguard.Limiter
	bursts   *webguard.Bursts
	sessions *mcp.StreamableHTTPHandler // 2025-11-25 and older: Mcp-Session-Id
	modern   *mcp.StreamableHTTPHandler // 2026-07-28: stateless

	mu       sync.Mutex
	opening  int                     // sessions being created, not yet in the server's list
	tokens   map[string]*tokenLive   // by token name, while it has requests or sessions opening
	live     map[string]*sessionLive // HTTP sessions by id, with whose token opened them
	reqs     map[*liveReq]struct{}   // requests being served
	opened   uint64                  // sessions opened so far: each one's seq
	sweeping bool                    // a sweep goroutine runs
	stop     <-chan struct{}         // closed when the endpoint stops; nil: never
}

// tokenLive is what one token has going on.
type tokenLive struct {
	inFlight int // requests being served, open streams included
	opening  int // sessions it is opening
}

// sessionLive is an HTTP session as the front knows it: whose it is and
// whether it is in use.
type sessionLive struct {
	id, token, secret string
	last              time.Time // of its last request's start or end
	seq               uint64    // order of opening: ties of last go to the first opened
	busy              int       // requests of it being served (a GET stream is one)
}

// liveReq is a request being served, to end when its token stops being
// valid.
type liveReq struct {
	secret string
	cancel context.CancelFunc
}

type tokenKey struct{}

// callerKey carries the verified token and its secret (to check it again
// while its requests and sessions live).
type callerKey struct{}

type caller struct {
	tok    bearer.Token
	secret string
}

// HTTPHandler is the endpoint: /mcp and /metrics behind the LAN guards.
func (d *Doors) HTTPHandler(o HTTPOptions) http.Handler {
	_, h := d.newHTTPFront(o)
	return h
}

func (d *Doors) newHTTPFront(o HTTPOptions) (*httpFront, http.Handler) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Recheck <= 0 {
		o.Recheck = defaultRecheck
	}
	cfg := d.conf().HTTP
	f := &httpFront{d: d, cfg: cfg, o: o,
		limiter: webguard.NewLimiter(cfg.Rate, cfg.Burst),
		bursts:  &webguard.Bursts{Window: RefusalWindow, Max: maxRefusalRecords},
		tokens:  map[string]*tokenLive{}, live: map[string]*sessionLive{}, reqs: map[*liveReq]struct{}{}}
	f.guard = &webguard.Guard{Names: cfg.Names, MaxBody: cfg.MaxBodyBytes, Refused: func(r *http.Request, status int, why string) {
		f.refused(r, "", identity.RoleNone, status, httpCode(status), why)
	}}
	server := func(*http.Request) *mcp.Server { return d.server }
	sdk := mcp.StreamableHTTPOptions{
		// The guard checks Host against the configured names, which the
		// SDK's own loopback-only check does not know.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        cfg.MaxBodyBytes,
		SessionTimeout:             cfg.SessionIdle.D(),
		// A 2026-07-28 call whose client went away stops, rather than
		// running on for nobody.
		PropagateRequestCancellation: true,
	}
	f.sessions = mcp.NewStreamableHTTPHandler(server, &sdk)
	sdk.Stateless, sdk.SessionTimeout = true, 0
	f.modern = mcp.NewStreamableHTTPHandler(server, &sdk)

	// The SDK copies the TokenInfo of each request's context into the
	// request it hands the server (RequestExtra), where PrincipalMiddleware
	// finds it; only its own middleware can put it there.
	carry := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		if ti, ok := ctx.Value(tokenKey{}).(*auth.TokenInfo); ok {
			return ti, nil
		}
		return nil, auth.ErrInvalidToken
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})

	mux := http.NewServeMux()
	mux.Handle("/mcp", f.authenticate(false, carry(http.HandlerFunc(f.serveMCP))))
	mux.Handle("/metrics", f.metrics())
	mux.HandleFunc("/", notFound) // OAuth probes learn there is none (noauth.go)
	return f, f.guard.Wrap(mux)
}

// authenticate admits requests with a valid token (for /mcp, of an MCP
// role), rate-limited per token (each message of a JSON-RPC batch counts)
// and, for /mcp, with a cap on the token's requests in flight; anything
// else is refused before it runs.
func (f *httpFront) authenticate(metrics bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := f.o.Now()
		tok, secret, status, why := f.verify(r, now)
		if _, mcpRole := identity.ParseRole(tok.Role); status == 0 && !metrics && !mcpRole {
			status, why = http.StatusForbidden, fmt.Sprintf("token %q (role %s) may only scrape /metrics", tok.Name, tok.Role)
		}
		if status != 0 {
			f.deny(w, r, tok, status, why)
			return
		}
		p := identity.FromToken(tok.Name, tok.Role, tok.Profile, r.RemoteAddr)
		n := 1
		if !metrics && r.Method == http.MethodPost {
			var ok bool
			if n, ok = f.countBatch(w, r, p); !ok {
				return
			}
		}
		if ok, after := f.limiter.AllowN(tok.Name, n, now); !ok {
			msg := fmt.Sprintf("token %q is over its rate of %g calls per second (http.rate, http.burst); this request carries %d", tok.Name, f.cfg.Rate, n)
			if after > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(after/time.Second)))
			} else {
				msg = fmt.Sprintf("a batch of %d calls is over token %q's burst of %d (http.burst) and can never fit; send at most %d at once", n, tok.Name, f.limiter.Burst(), f.limiter.Burst())
			}
			http.Error(w, msg, http.StatusTooManyRequests)
			f.refused(r, p.Name, p.Role, http.StatusTooManyRequests, errcode.ResourceExhausted, "rate limit")
			return
		}
		ctx := r.Context()
		if !metrics {
			var done func()
			var ok bool
			if ctx, done, ok = f.enter(ctx, tok.Name, secret); !ok {
				w.Header().Set("Retry-After", "1")
				http.Error(w, fmt.Sprintf("token %q has %d requests in flight, the most allowed (http.max_in_flight); wait for one to end", tok.Name, f.cfg.MaxInFlight), http.StatusTooManyRequests)
				f.refused(r, p.Name, p.Role, http.StatusTooManyRequests, errcode.ResourceExhausted, "requests in flight")
				return
			}
			defer done()
			ctx = context.WithValue(ctx, callerKey{}, caller{tok: tok, secret: secret})
		}
		ti := &auth.TokenInfo{UserID: p.Name, Expiration: tok.Expires, Extra: map[string]any{"principal": p}}
		if metrics {
			// A client that stops reading fails the write that blocks,
			// rather than holding the handler for as long as the
			// connection lives.
			dw := webguard.NewWriteDeadline(w, f.cfg.WriteTimeout.D())
			defer dw.Done()
			next.ServeHTTP(dw, r.WithContext(context.WithValue(ctx, tokenKey{}, ti)))
			return
		}
		// MCP answers and stream events are queued (queuedWriter): go-sdk
		// writes each under its stream's lock, and notifies the sessions
		// one after another, so a client that stops reading must not hold
		// the write.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		qw := f.queuedWriter(w, r, p, cancel)
		defer qw.Close()
		next.ServeHTTP(qw, r.WithContext(context.WithValue(ctx, tokenKey{}, ti)))
	})
}

// queuedWriter wraps the ResponseWriter of an MCP request so that go-sdk's
// writes and flushes never wait for the client: they are queued, up to
// [sessions] queue_bytes for the request and total_queue_bytes with the
// socket sessions' queues, and one goroutine of the request's writes them
// out, each write within http.write_timeout. Past a bound, or when a write
// fails, the request's context is cancelled, which ends its stream; a cut
// for a bound or a stall is logged and audited once a principal a minute.
// Plain JSON answers take the same path: one write each, drained within
// write_timeout when the handler returns, as the deadline alone did.
func (f *httpFront) queuedWriter(w http.ResponseWriter, r *http.Request, p identity.Principal, cancel context.CancelFunc) *webguard.Queued {
	lim := f.d.conf().Sessions
	return webguard.NewQueued(w, webguard.QueueLimits{
		Bytes: lim.QueueBytes, Total: lim.TotalQueueBytes, Add: f.d.guard.addQueued,
		Deadline: f.cfg.WriteTimeout.D(),
	}, cancel, func(why string) {
		f.streamCut(r, p, why+" ([sessions] queue_bytes, total_queue_bytes; http.write_timeout)")
	})
}

// streamCut logs the cut of a response whose client does not read it and,
// once a principal a minute (with the count of those left out), audits it.
func (f *httpFront) streamCut(r *http.Request, p identity.Principal, why string) {
	f.d.log.Warn("http: cut a response", "remote", r.RemoteAddr, "principal", p.Name, "method", r.Method, "why", why)
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	v := f.bursts.Check(p.Name+"|cut", host, f.o.Now())
	if !v.Record {
		return
	}
	msg := fmt.Sprintf("HTTP %s %s cut: %s", r.Method, r.URL.Path, why)
	if v.LeftOut > 0 {
		msg += fmt.Sprintf(" (and %d cuts of this principal not recorded since the last)", v.LeftOut)
	}
	f.d.audit(Refusal{Principal: p.Name, Role: p.Role.String(), Tool: "http", Code: errcode.ResourceExhausted, Message: msg, Remote: r.RemoteAddr,
		In: map[string]any{"method": r.Method, "path": r.URL.Path}})
}

// countBatch reads the body of a POST and counts its JSON-RPC messages; a
// batch over http.max_batch is refused here, before go-sdk starts a
// goroutine per call and holds each answer. ok is false when the request
// was answered.
func (f *httpFront) countBatch(w http.ResponseWriter, r *http.Request, p identity.Principal) (n int, ok bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) { // the guard has recorded it
			http.Error(w, fmt.Sprintf("request body over the cap of %d bytes (http.max_body_bytes)", mbe.Limit), http.StatusRequestEntityTooLarge)
			return 0, false
		}
		http.Error(w, "cannot read the request body", http.StatusBadRequest)
		return 0, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	n = batchLen(body, f.cfg.MaxBatch+1)
	if n > f.cfg.MaxBatch {
		why := fmt.Sprintf("a JSON-RPC batch of more than %d messages; at most %d in one request (http.max_batch)", f.cfg.MaxBatch, f.cfg.MaxBatch)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":%s}}`, strconv.Quote(why))
		f.refused(r, p.Name, p.Role, http.StatusBadRequest, errcode.InvalidArgument, why)
		return 0, false
	}
	return n, true
}

// batchLen counts the messages of a JSON-RPC body, counting no further
// than upTo: the elements of a top-level array, else 1. It scans without
// decoding, so a body of a million tiny elements costs no allocation;
// malformed JSON counts as whatever it looks like, and go-sdk refuses it.
func batchLen(body []byte, upTo int) int {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '[' {
		return 1
	}
	if rest := bytes.TrimLeft(b[1:], " \t\r\n"); len(rest) > 0 && rest[0] == ']' {
		return 1
	}
	n, depth, inString, escaped := 1, 0, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
		case ']', '}':
			if depth--; depth == 0 {
				return n
			}
		case ',':
			if depth == 1 {
				if n++; n >= upTo {
					return n
				}
			}
		}
	}
	return n
}

// enter counts a request of the token in flight, or says it has too many;
// done ends it. The request's context is cancelled when its token is
// revoked or expires.
func (f *httpFront) enter(ctx context.Context, name, secret string) (context.Context, func(), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.tokenLocked(name)
	if t.inFlight >= f.cfg.MaxInFlight {
		f.dropTokenLocked(name)
		return nil, nil, false
	}
	t.inFlight++
	ctx, cancel := context.WithCancel(ctx)
	lr := &liveReq{secret: secret, cancel: cancel}
	f.reqs[lr] = struct{}{}
	f.sweepLocked()
	return ctx, func() {
		cancel()
		f.mu.Lock()
		defer f.mu.Unlock()
		t.inFlight--
		delete(f.reqs, lr)
		f.dropTokenLocked(name)
	}, true
}

func (f *httpFront) tokenLocked(name string) *tokenLive {
	t := f.tokens[name]
	if t == nil {
		t = &tokenLive{}
		f.tokens[name] = t
	}
	return t
}

// dropTokenLocked forgets a token with nothing going on.
func (f *httpFront) dropTokenLocked(name string) {
	if t := f.tokens[name]; t != nil && t.inFlight == 0 && t.opening == 0 {
		delete(f.tokens, name)
	}
}

// verify reads the Authorization header; status is 0 for a valid token.
func (f *httpFront) verify(r *http.Request, now time.Time) (tok bearer.Token, secret string, status int, why string) {
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	secret = strings.TrimSpace(secret)
	if !ok || !strings.EqualFold(scheme, "bearer") || secret == "" {
		return bearer.Token{}, "", http.StatusUnauthorized, "no bearer token"
	}
	if f.o.Tokens == nil {
		return bearer.Token{}, "", http.StatusServiceUnavailable, "this agent has no token file"
	}
	tok, err := f.o.Tokens.Verify(secret, now)
	switch {
	case err == nil:
		return tok, secret, 0, ""
	case errors.Is(err, bearer.ErrExpired):
		return tok, "", http.StatusUnauthorized, "token expired"
	case errors.Is(err, bearer.ErrUnknown):
		return bearer.Token{}, "", http.StatusUnauthorized, "unknown or revoked token"
	default:
		f.d.log.Error("http: cannot check bearer tokens", "file", f.cfg.Tokens, "err", err)
		return bearer.Token{}, "", http.StatusServiceUnavailable, "the token file cannot be read; see the agent's log"
	}
}

// deny answers an authentication failure as RFC 6750 asks: 401 with a
// challenge (error="invalid_token" when a token came and was refused), 403
// for a token whose role may not use the path; the body says why and, for
// a 401, how to get a token (noauth.go: what clients make of it).
func (f *httpFront) deny(w http.ResponseWriter, r *http.Request, tok bearer.Token, status int, why string) {
	switch {
	case status == http.StatusUnauthorized && why == "no bearer token":
		w.Header().Set("WWW-Authenticate", realm)
	case status == http.StatusUnauthorized:
		// Codex shows only this header: the fix rides in it too.
		w.Header().Set("WWW-Authenticate", realm+`, error="invalid_token", error_description="`+why+`; `+challengeFix+`"`)
	case status == http.StatusForbidden:
		w.Header().Set("WWW-Authenticate", realm+`, error="insufficient_scope"`)
	}
	http.Error(w, deniedBody(status, why), status)
	name := ""
	if tok.Name != "" {
		name = "token:" + tok.Name
	}
	f.refused(r, name, identity.RoleNone, status, httpCode(status), why)
}

// serveMCP hands a request to the handler of its protocol era, after the
// session caps for requests that would open a session.
func (f *httpFront) serveMCP(w http.ResponseWriter, r *http.Request) {
	c, _ := r.Context().Value(callerKey{}).(caller)
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" && r.Header.Get("Mcp-Protocol-Version") >= modernVersion {
		f.modern.ServeHTTP(w, r)
		return
	}
	if sid != "" {
		f.touch(sid, c.tok.Name, 1)
		defer f.touch(sid, c.tok.Name, -1)
		f.sessions.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost {
		f.sessions.ServeHTTP(w, r)
		return
	}
	victim, refusal := f.reserve(c.tok.Name)
	if refusal != "" {
		w.Header().Set("Retry-After", "60")
		http.Error(w, refusal, http.StatusServiceUnavailable)
		p, _ := principalOfTokenInfo(auth.TokenInfoFromContext(r.Context()))
		f.refused(r, p.Name, p.Role, http.StatusServiceUnavailable, errcode.ResourceExhausted, "session cap: "+refusal)
		return
	}
	if victim != "" {
		f.d.log.Info("http: closed a token's longest idle session for its new one (http.max_sessions_per_token)", "token", c.tok.Name, "session", victim)
		f.closeSessions([]string{victim})
	}
	id := ""
	defer func() { f.release(c, id) }()
	f.sessions.ServeHTTP(w, r)
	// The header map outlives the answer: the id go-sdk gave the session.
	id = w.Header().Get("Mcp-Session-Id")
}

// reserve claims room for one more session of token; release gives the
// claim back once the new session is in the server's list (or failed). A
// token at its own cap gives up its longest idle session (victim, for the
// caller to close): a client that forgets its sessions then costs only
// itself; with none idle, or the endpoint at its cap, refusal says why.
func (f *httpFront) reserve(token string) (victim, refusal string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pruneLocked()
	t := f.tokenLocked(token)
	var mine []*sessionLive
	for _, s := range f.live {
		if s.token == token {
			mine = append(mine, s)
		}
	}
	if len(mine)+t.opening >= min(f.cfg.MaxSessionsPerToken, f.cfg.MaxSessions) {
		// Longest idle first, then the first opened: a coarse clock (or
		// a test's fixed one) leaves many alike, and map order must not
		// choose.
		var oldest *sessionLive
		for _, s := range mine {
			if s.busy == 0 && (oldest == nil || s.last.Before(oldest.last) || s.last.Equal(oldest.last) && s.seq < oldest.seq) {
				oldest = s
			}
		}
		if oldest == nil {
			f.dropTokenLocked(token)
			return "", fmt.Sprintf("token %q has %d MCP sessions open, the most one token may (http.max_sessions_per_token), none idle; close one", token, len(mine)+t.opening)
		}
		delete(f.live, oldest.id)
		victim = oldest.id
	} else if f.d.HTTPSessions()+f.opening >= f.cfg.MaxSessions {
		f.dropTokenLocked(token)
		return "", fmt.Sprintf("%d MCP sessions are open, the most allowed (http.max_sessions); close one, or let an idle one expire", f.cfg.MaxSessions)
	}
	f.opening++
	t.opening++
	return victim, ""
}

func (f *httpFront) release(c caller, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opening--
	if t := f.tokens[c.tok.Name]; t != nil {
		t.opening--
	}
	f.dropTokenLocked(c.tok.Name)
	if id != "" {
		f.opened++
		f.live[id] = &sessionLive{id: id, token: c.tok.Name, secret: c.secret, last: f.o.Now(), seq: f.opened}
		f.sweepLocked()
	}
}

// touch marks a request of session id starting (+1) or ending (-1).
func (f *httpFront) touch(id, token string, delta int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.live[id]; s != nil && s.token == token {
		s.busy += delta
		s.last = f.o.Now()
	}
}

// pruneLocked forgets sessions the server no longer has (closed by their
// client, or idle past http.session_idle).
func (f *httpFront) pruneLocked() {
	if len(f.live) == 0 {
		return
	}
	open := map[string]bool{}
	for ss := range f.d.server.Sessions() {
		if id := ss.ID(); id != "" {
			open[id] = true
		}
	}
	for id := range f.live {
		if !open[id] {
			delete(f.live, id)
		}
	}
}

// closeSessions closes the server's sessions of these ids.
func (f *httpFront) closeSessions(ids []string) {
	if len(ids) == 0 {
		return
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var close []*mcp.ServerSession
	for ss := range f.d.server.Sessions() {
		if want[ss.ID()] {
			close = append(close, ss)
		}
	}
	for _, ss := range close {
		_ = ss.Close()
	}
}

// sweepLocked starts the sweep unless it runs: while the front has
// requests or sessions, their tokens are checked again every Recheck.
func (f *httpFront) sweepLocked() {
	if f.sweeping {
		return
	}
	f.sweeping = true
	go func() {
		tick := time.NewTicker(f.o.Recheck)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if !f.sweep() {
					return
				}
			case <-f.stop:
				f.mu.Lock()
				f.sweeping = false
				f.mu.Unlock()
				return
			}
		}
	}()
}

// sweep ends the requests and sessions of tokens no longer valid (revoked,
// expired, or no longer of an MCP role): a revoked token's open stream
// must not go on receiving. It reports false, and the sweeping stops, when
// nothing is left to check.
func (f *httpFront) sweep() bool {
	f.mu.Lock()
	f.pruneLocked()
	secrets := map[string]bool{}
	for lr := range f.reqs {
		secrets[lr.secret] = true
	}
	for _, s := range f.live {
		secrets[s.secret] = true
	}
	if len(secrets) == 0 {
		f.sweeping = false
		f.mu.Unlock()
		return false
	}
	f.mu.Unlock()
	now := f.o.Now()
	gone := map[string]bool{}
	for secret := range secrets {
		if !f.stillValid(secret, now) {
			gone[secret] = true
		}
	}
	if len(gone) == 0 {
		return true
	}
	var cancels []context.CancelFunc
	var ids, names []string
	f.mu.Lock()
	for lr := range f.reqs {
		if gone[lr.secret] {
			cancels = append(cancels, lr.cancel)
		}
	}
	for id, s := range f.live {
		if gone[s.secret] {
			ids, names = append(ids, id), append(names, s.token)
			delete(f.live, id)
		}
	}
	f.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	f.closeSessions(ids)
	f.d.log.Info("http: a token is no longer valid: ended its requests and sessions", "requests", len(cancels), "sessions", len(ids), "tokens", names)
	return true
}

// stillValid checks a secret in use again. A token file that cannot be
// read ends nothing: new requests are refused (503) until it is fixed, and
// what runs was admitted when it could be read.
func (f *httpFront) stillValid(secret string, now time.Time) bool {
	tok, err := f.o.Tokens.Verify(secret, now)
	if errors.Is(err, bearer.ErrUnknown) || errors.Is(err, bearer.ErrExpired) {
		return false
	}
	if err != nil {
		return true
	}
	_, mcpRole := identity.ParseRole(tok.Role)
	return mcpRole
}

// HTTPSessions counts the server's HTTP sessions: only they have an id
// (the socket's sessions and stateless requests have none).
func (d *Doors) HTTPSessions() int {
	n := 0
	for ss := range d.server.Sessions() {
		if ss.ID() != "" {
			n++
		}
	}
	return n
}

// metrics serves /metrics: to loopback peers without a token (a local
// Prometheus or node agent), to others with a valid token of any role.
func (f *httpFront) metrics() http.Handler {
	if f.o.Metrics == nil {
		return http.NotFoundHandler()
	}
	withToken := f.authenticate(true, f.o.Metrics)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil && webguard.IsLoopbackHost(host) && r.Header.Get("Authorization") == "" {
			f.o.Metrics.ServeHTTP(w, r)
			return
		}
		withToken.ServeHTTP(w, r)
	})
}

// refused audits a refusal at the HTTP front, once per burst of alike
// refusals (same principal and status, "anonymous" for no or an unknown
// token, from any address) and at most maxRefusalRecords a minute in all:
// a flood must not write the SD card once a request, nor once an address.
func (f *httpFront) refused(r *http.Request, principal string, role identity.Role, status int, code, why string) {
	f.refusedAt(r.RemoteAddr, r.Method, r.URL.Path, principal, role, status, code, why)
}

func (f *httpFront) refusedAt(remote, method, path, principal string, role identity.Role, status int, code, why string) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	if principal == "" {
		principal = "anonymous"
	}
	v := f.bursts.Check(principal+"|"+strconv.Itoa(status), host, f.o.Now())
	f.d.log.Debug("http: refused", "remote", remote, "principal", principal, "status", status, "why", why)
	if !v.Record {
		return
	}
	msg := fmt.Sprintf("HTTP %d %s: %s", status, path, why)
	if path == "" {
		msg = fmt.Sprintf("HTTP connection refused: %s", why)
	}
	if v.LeftOut > 0 {
		more := ""
		if v.SourcesCapped {
			more = " or more"
		}
		msg += fmt.Sprintf(" (and %d alike from %d%s sources not recorded since the last)", v.LeftOut, v.Sources, more)
	}
	f.d.audit(Refusal{Principal: principal, Role: role.String(), Tool: "http", Code: code, Message: msg, Remote: remote,
		In: map[string]any{"method": method, "path": path}})
}

// httpCode is the error code of an HTTP refusal in the tools' vocabulary.
func httpCode(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return errcode.Unauthenticated
	case http.StatusForbidden:
		return errcode.PermissionDenied
	case http.StatusTooManyRequests, http.StatusRequestEntityTooLarge:
		return errcode.ResourceExhausted
	case http.StatusServiceUnavailable:
		return errcode.Unavailable
	default:
		return errcode.InvalidArgument
	}
}

// principalOfTokenInfo is the principal authenticate put in ti.
func principalOfTokenInfo(ti *auth.TokenInfo) (identity.Principal, bool) {
	if ti == nil {
		return identity.Principal{}, false
	}
	p, ok := ti.Extra["principal"].(identity.Principal)
	return p, ok
}

// PrincipalMiddleware gives each request that came over HTTP the
// principal of its own token. A session's context is that of the request
// that opened it, so without this a later request in the session would act
// as whoever opened it. The agent installs it outside InFlightMiddleware.
func PrincipalMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
			p, ok := principalOfTokenInfo(extra.TokenInfo)
			if !ok {
				// Fail closed: an unknown principal has no role.
				p = identity.Principal{Kind: identity.KindToken, Name: "unknown", UID: -1, PID: -1}
			}
			ctx = identity.NewContext(ctx, p)
		}
		return next(ctx, method, req)
	}
}

// HTTPTLS is the endpoint's TLS configuration: nil without [http] tls;
// the owner's certificate, or the self-signed one beside the state file.
// fingerprint is the certificate's, for status and clients to pin.
func (d *Doors) HTTPTLS(now time.Time) (cfg *tls.Config, fingerprint string, err error) {
	h := d.conf().HTTP
	if !h.TLS {
		return nil, "", nil
	}
	var cert tls.Certificate
	if h.TLSCert != "" {
		cert, err = tls.LoadX509KeyPair(h.TLSCert, h.TLSKey)
	} else {
		cert, err = webguard.SelfSigned(filepath.Dir(d.conf().Agent.State), h.Names, now)
	}
	if err != nil {
		return nil, "", fmt.Errorf("agent: http tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, webguard.Fingerprint(cert.Certificate[0]), nil
}

// ServeHTTPEndpoint serves the HTTP endpoint on ln until ctx ends. It refuses a
// listener reachable from the network without TLS unless the owner set
// insecure_plaintext, also when systemd made the listener.
func (d *Doors) ServeHTTPEndpoint(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	h := d.conf().HTTP
	if !config.Loopback(ln.Addr().String()) && !h.TLS && !h.InsecurePlaintext {
		return fmt.Errorf("agent: http: %s is reachable from the network: set [http] tls = true, or insecure_plaintext = true on purpose", ln.Addr())
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	tcfg, fp, err := d.HTTPTLS(now())
	if err != nil {
		return err
	}
	f, handler := d.newHTTPFront(o)
	f.stop = ctx.Done()
	// Connections are capped below TLS: a handshake costs more than a
	// refusal.
	conns := &webguard.Conns{Total: h.MaxConns, PerSource: min(h.MaxConnsPerSource, h.MaxConns), Refused: func(remote net.Addr, why string) {
		f.refusedAt(remote.String(), "", "", "", identity.RoleNone, http.StatusServiceUnavailable, errcode.ResourceExhausted, why)
	}}
	ln = conns.Listen(ln)
	scheme := "http"
	if tcfg != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tcfg)
	}
	st := &HTTPStatus{URL: scheme + "://" + ln.Addr().String() + "/mcp", Fingerprint: fp}
	d.httpStatus.Store(st)
	d.log.Info("http: serving MCP", "url", st.URL, "tls_fingerprint", fp)
	srv := &http.Server{
		Handler: handler,
		// Also what a connection that sends nothing gets (and a TLS
		// handshake): the first request's header deadline runs from accept.
		ReadHeaderTimeout: h.ReadHeaderTimeout.D(),
		ReadTimeout:       h.ReadTimeout.D(),
		IdleTimeout:       h.IdleTimeout.D(),
		MaxHeaderBytes:    64 << 10,
		ConnState:         conns.ConnState,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		// HTTP/1.1 only: the TLS listener offers no h2 either, and the
		// shipped binary carries no HTTP/2 (Makefile).
		Protocols: http1Only(),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
	}()
	err = srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("agent: http: %w", err)
}

// http1Only is the protocol set of HTTP/1.1 alone.
func http1Only() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	return p
}
