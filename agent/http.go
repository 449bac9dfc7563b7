package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/bearer"
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
}

// HTTPStatus is the endpoint as `raspi-mcp status` shows it.
type HTTPStatus struct {
	URL string `json:"url" jsonschema:"where MCP is served over HTTP"`
	// Fingerprint is the SHA-256 of the TLS certificate clients pin.
	Fingerprint string `json:"tls_fingerprint,omitempty" jsonschema:"sha256 of the TLS certificate, for clients to pin"`
}

// refusalWindow is how long refusals alike (same remote, principal and
// status) are recorded once.
const refusalWindow = time.Minute

// realm names the endpoint in WWW-Authenticate.
const realm = `Bearer realm="raspi-mcp"`

// modernVersion is the first protocol revision without sessions
// (2026-07-28): go-sdk serves it only from a stateless handler, and the
// 2025-11-25 era only from a stateful one.
const modernVersion = "2026-07-28"

type httpFront struct {
	a        *Agent
	cfg      config.HTTP
	o        HTTPOptions
	guard    *webguard.Guard
	limiter  *webguard.Limiter
	bursts   *webguard.Bursts
	sessions *mcp.StreamableHTTPHandler // 2025-11-25 and older: Mcp-Session-Id
	modern   *mcp.StreamableHTTPHandler // 2026-07-28: stateless

	mu      sync.Mutex
	opening int // sessions being created, not yet in the server's list
}

type tokenKey struct{}

// HTTPHandler is the endpoint: /mcp and /metrics behind the LAN guards.
func (a *Agent) HTTPHandler(o HTTPOptions) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	cfg := a.conf().HTTP
	f := &httpFront{a: a, cfg: cfg, o: o,
		limiter: webguard.NewLimiter(cfg.Rate, cfg.Burst),
		bursts:  &webguard.Bursts{Window: refusalWindow}}
	f.guard = &webguard.Guard{Names: cfg.Names, MaxBody: cfg.MaxBodyBytes, Refused: func(r *http.Request, status int, why string) {
		f.refused(r, "", identity.RoleNone, status, httpCode(status), why)
	}}
	server := func(*http.Request) *mcp.Server { return a.server }
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
	// request it hands the server (RequestExtra), where principalMiddleware
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
	return f.guard.Wrap(mux)
}

// authenticate admits requests with a valid token (for /mcp, of an MCP
// role), rate-limited per token; anything else is refused before it runs.
func (f *httpFront) authenticate(metrics bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := f.o.Now()
		tok, status, why := f.verify(r, now)
		if _, mcpRole := identity.ParseRole(tok.Role); status == 0 && !metrics && !mcpRole {
			status, why = http.StatusForbidden, fmt.Sprintf("token %q (role %s) may only scrape /metrics", tok.Name, tok.Role)
		}
		if status != 0 {
			f.deny(w, r, tok, status, why)
			return
		}
		p := identity.FromToken(tok.Name, tok.Role, r.RemoteAddr)
		if ok, after := f.limiter.Allow(tok.Name, now); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(after/time.Second)))
			http.Error(w, fmt.Sprintf("token %q is over its rate of %g requests per second (http.rate, http.burst)", tok.Name, f.cfg.Rate), http.StatusTooManyRequests)
			f.refused(r, p.Name, p.Role, http.StatusTooManyRequests, CodeResourceExhausted, "rate limit")
			return
		}
		ti := &auth.TokenInfo{UserID: p.Name, Expiration: tok.Expires, Extra: map[string]any{"principal": p}}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, ti)))
	})
}

// verify reads the Authorization header; status is 0 for a valid token.
func (f *httpFront) verify(r *http.Request, now time.Time) (bearer.Token, int, string) {
	scheme, secret, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(secret) == "" {
		return bearer.Token{}, http.StatusUnauthorized, "no bearer token"
	}
	if f.o.Tokens == nil {
		return bearer.Token{}, http.StatusServiceUnavailable, "this agent has no token file"
	}
	tok, err := f.o.Tokens.Verify(strings.TrimSpace(secret), now)
	switch {
	case err == nil:
		return tok, 0, ""
	case errors.Is(err, bearer.ErrExpired):
		return tok, http.StatusUnauthorized, "token expired"
	case errors.Is(err, bearer.ErrUnknown):
		return bearer.Token{}, http.StatusUnauthorized, "unknown or revoked token"
	default:
		f.a.log.Error("http: cannot check bearer tokens", "file", f.cfg.Tokens, "err", err)
		return bearer.Token{}, http.StatusServiceUnavailable, "the token file cannot be read; see the agent's log"
	}
}

// deny answers an authentication failure as RFC 6750 asks: 401 with a
// challenge (error="invalid_token" when a token came and was refused), 403
// for a token whose role may not use the path.
func (f *httpFront) deny(w http.ResponseWriter, r *http.Request, tok bearer.Token, status int, why string) {
	switch {
	case status == http.StatusUnauthorized && why == "no bearer token":
		w.Header().Set("WWW-Authenticate", realm)
	case status == http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", realm+`, error="invalid_token", error_description="`+why+`"`)
	case status == http.StatusForbidden:
		w.Header().Set("WWW-Authenticate", realm+`, error="insufficient_scope"`)
	}
	http.Error(w, why, status)
	name := ""
	if tok.Name != "" {
		name = "token:" + tok.Name
	}
	f.refused(r, name, identity.RoleNone, status, httpCode(status), why)
}

// serveMCP hands a request to the handler of its protocol era, after the
// session cap for requests that would open a session.
func (f *httpFront) serveMCP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") >= modernVersion {
		f.modern.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		f.sessions.ServeHTTP(w, r)
		return
	}
	if !f.reserve() {
		msg := fmt.Sprintf("%d MCP sessions are open, the most allowed (http.max_sessions); close one, or let an idle one expire", f.cfg.MaxSessions)
		w.Header().Set("Retry-After", "60")
		http.Error(w, msg, http.StatusServiceUnavailable)
		p, _ := principalOfTokenInfo(auth.TokenInfoFromContext(r.Context()))
		f.refused(r, p.Name, p.Role, http.StatusServiceUnavailable, CodeResourceExhausted, "session cap")
		return
	}
	defer f.release()
	f.sessions.ServeHTTP(w, r)
}

// reserve claims room for one more session; release gives the claim back
// once the new session is in the server's list (or failed).
func (f *httpFront) reserve() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.a.httpSessions()+f.opening >= f.cfg.MaxSessions {
		return false
	}
	f.opening++
	return true
}

func (f *httpFront) release() {
	f.mu.Lock()
	f.opening--
	f.mu.Unlock()
}

// httpSessions counts the server's HTTP sessions: only they have an id
// (the socket's sessions and stateless requests have none).
func (a *Agent) httpSessions() int {
	n := 0
	for ss := range a.server.Sessions() {
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
// refusals: a flood must not write the SD card once a request.
func (f *httpFront) refused(r *http.Request, principal string, role identity.Role, status int, code, why string) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	record, leftOut := f.bursts.First(host+"|"+principal+"|"+strconv.Itoa(status), f.o.Now())
	f.a.log.Debug("http: refused", "remote", r.RemoteAddr, "principal", principal, "status", status, "why", why)
	if !record {
		return
	}
	if principal == "" {
		principal = "anonymous"
	}
	msg := fmt.Sprintf("HTTP %d %s: %s", status, r.URL.Path, why)
	if leftOut > 0 {
		msg += fmt.Sprintf(" (and %d alike not recorded since the last)", leftOut)
	}
	rec := store.AuditRecord{Time: time.Now().UTC(), CorrelationID: newCorrelationID(), Principal: principal, Role: role.String(),
		Tool: "http", Decision: store.DecisionDeny, ErrorCode: code, Message: msg, Remote: r.RemoteAddr}
	rec.InHash, _ = store.HashJSON(map[string]any{"method": r.Method, "path": r.URL.Path})
	if _, err := f.a.appendAudit(rec); err != nil {
		f.a.log.Error("audit append failed", "tool", "http", "err", err)
	}
}

// httpCode is the error code of an HTTP refusal in the tools' vocabulary.
func httpCode(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodePermissionDenied
	case http.StatusTooManyRequests, http.StatusRequestEntityTooLarge:
		return CodeResourceExhausted
	case http.StatusServiceUnavailable:
		return CodeUnavailable
	default:
		return CodeInvalidArgument
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

// principalMiddleware gives each request that came over HTTP the
// principal of its own token. A session's context is that of the request
// that opened it, so without this a later request in the session would act
// as whoever opened it.
func (a *Agent) principalMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
			p, ok := principalOfTokenInfo(extra.TokenInfo)
			if !ok {
				// Fail closed: an unknown principal has no role.
				p = identity.Principal{Kind: identity.KindToken, Name: "unknown", UID: -1, PID: -1}
			}
			ctx = context.WithValue(ctx, principalKey{}, p)
		}
		return next(ctx, method, req)
	}
}

// HTTPTLS is the endpoint's TLS configuration: nil without [http] tls;
// the owner's certificate, or the self-signed one beside the state file.
// fingerprint is the certificate's, for status and clients to pin.
func (a *Agent) HTTPTLS(now time.Time) (cfg *tls.Config, fingerprint string, err error) {
	h := a.conf().HTTP
	if !h.TLS {
		return nil, "", nil
	}
	var cert tls.Certificate
	if h.TLSCert != "" {
		cert, err = tls.LoadX509KeyPair(h.TLSCert, h.TLSKey)
	} else {
		cert, err = webguard.SelfSigned(filepath.Dir(a.conf().Agent.State), h.Names, now)
	}
	if err != nil {
		return nil, "", fmt.Errorf("agent: http tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, webguard.Fingerprint(cert.Certificate[0]), nil
}

// ServeHTTPEndpoint serves the HTTP endpoint on ln until ctx ends. It refuses a
// listener reachable from the network without TLS unless the owner set
// insecure_plaintext, also when systemd made the listener.
func (a *Agent) ServeHTTPEndpoint(ctx context.Context, ln net.Listener, o HTTPOptions) error {
	h := a.conf().HTTP
	if !config.Loopback(ln.Addr().String()) && !h.TLS && !h.InsecurePlaintext {
		return fmt.Errorf("agent: http: %s is reachable from the network: set [http] tls = true, or insecure_plaintext = true on purpose", ln.Addr())
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	tcfg, fp, err := a.HTTPTLS(now())
	if err != nil {
		return err
	}
	scheme := "http"
	if tcfg != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tcfg)
	}
	st := &HTTPStatus{URL: scheme + "://" + ln.Addr().String() + "/mcp", Fingerprint: fp}
	a.httpStatus.Store(st)
	a.log.Info("http: serving MCP", "url", st.URL, "tls_fingerprint", fp)
	srv := &http.Server{
		Handler:           a.HTTPHandler(o),
		ReadHeaderTimeout: h.ReadHeaderTimeout.D(),
		ReadTimeout:       h.ReadTimeout.D(),
		IdleTimeout:       h.IdleTimeout.D(),
		MaxHeaderBytes:    64 << 10,
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
