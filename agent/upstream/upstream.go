// Package upstream is the agent's MCP client of one LAN MCP server (an HS4
// controller, a webhook gateway, ...), mounted by the agent under a prefix.
//
// The upstream is someone else's process on someone else's box: it restarts,
// hangs, loses its network, changes its tool list. The one rule of this
// package is that none of that may hurt the agent. So a [Client] never blocks
// the caller longer than its per-call timeout, fails fast while the upstream
// is down (or its circuit breaker is open), reconnects by itself with backoff,
// keeps the last tool list while down so the agent can still say "known tool,
// upstream unavailable", and reports every failure as a typed [*Error] the
// agent maps onto its own error shape.
//
// A Client speaks streamable HTTP (falling back to the legacy HTTP+SSE
// transport when the server does not speak streamable HTTP) or stdio to a
// local command.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults for the zero values of [Options].
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMinBackoff       = 250 * time.Millisecond
	DefaultMaxBackoff       = 30 * time.Second
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 30 * time.Second
	DefaultPingInterval     = 30 * time.Second
)

const (
	// stableAfter is how long a session must have lived for its loss to count
	// as "the upstream restarted" (reconnect at once) rather than "the
	// upstream is flapping" (keep backing off).
	stableAfter = 10 * time.Second
	// maxPages and maxListItems bound discovery, so a buggy or hostile
	// upstream that paginates forever cannot pin the agent.
	maxPages     = 100
	maxListItems = 5000
	// latencyRing is how many recent call latencies Status summarises.
	latencyRing = 64
)

// Transport names reported in [Status.Transport].
const (
	TransportStreamable = "streamable"
	TransportSSE        = "sse"
	TransportStdio      = "stdio"
)

// Options configures a [Client]. Exactly one of URL and Command must be set.
type Options struct {
	// Name identifies the upstream in logs, errors and Status (usually the
	// prefix it is mounted under, e.g. "hs4").
	Name string
	// URL is the upstream's MCP endpoint (http or https). Streamable HTTP is
	// tried first; the legacy HTTP+SSE transport is used if the server
	// answers the initial POST with 400, 404 or 405. The transport that
	// worked is remembered and tried first on reconnect.
	URL string
	// Command runs a local stdio MCP server (argv; no shell).
	Command []string
	// Env is added to the agent's environment for Command (KEY=VALUE).
	Env []string
	// Token returns the bearer token sent to URL. It is called at each
	// connect, so a rotated token is picked up at the next reconnect. The
	// token never appears in errors, logs or Status. Nil means no token.
	Token func() (string, error)
	// CheckAddrs vets the addresses the URL's host resolves to before any
	// connection is made (e.g. "LAN only"). The dialer then connects only to
	// the checked addresses, so DNS rebinding cannot slip a different address
	// in between check and dial. Nil means no check.
	CheckAddrs func(host string, addrs []netip.Addr) error
	// TLSFingerprint pins the certificate of an https URL: "sha256:" and the
	// lowercase hex SHA-256 of the leaf certificate's DER. When set, the TLS
	// handshake succeeds if and only if the server presents that
	// certificate; roots and names are not consulted, so a device's
	// self-signed certificate works without a CA. A mismatch fails the
	// handshake, before any request (and so the token) is sent. "" = the
	// system roots decide.
	TLSFingerprint string
	// Timeout bounds each upstream round trip (default 10s). Connecting plus
	// discovery gets twice as long.
	Timeout time.Duration
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
	// OnToolsChanged is called, from Run's goroutine and not under any lock,
	// after the tool list changed: first discovery, a list_changed
	// notification, or a reconnect that found a different list.
	OnToolsChanged func()
	// ClientName and ClientVersion are sent to the upstream in initialize.
	ClientName, ClientVersion string

	// Tuning; zero values select the defaults above. PingInterval < 0
	// disables the idle health ping.
	MinBackoff, MaxBackoff time.Duration
	BreakerThreshold       int
	BreakerCooldown        time.Duration
	PingInterval           time.Duration
}

// Validate reports whether o can be used; config checks can call it without
// creating a Client.
func (o Options) Validate() error {
	switch {
	case o.URL != "" && len(o.Command) > 0:
		return errors.New("set either url or command, not both")
	case o.URL == "" && len(o.Command) == 0:
		return errors.New("one of url or command is required")
	case len(o.Command) > 0 && o.Command[0] == "":
		return errors.New("command: empty program name")
	case o.URL != "":
		u, err := url.Parse(o.URL)
		if err != nil {
			return fmt.Errorf("url: %v", redactURLError(err))
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("url: scheme must be http or https, not %q", u.Scheme)
		}
		if u.Host == "" {
			return errors.New("url: missing host")
		}
		if o.TLSFingerprint != "" && u.Scheme != "https" {
			return errors.New("tls_fingerprint: only with an https url")
		}
	}
	if o.TLSFingerprint != "" {
		if len(o.Command) > 0 {
			return errors.New("tls_fingerprint: only with an https url")
		}
		if !validFingerprint(o.TLSFingerprint) {
			return fmt.Errorf(`tls_fingerprint: want "sha256:" and 64 lowercase hex digits, got %q`, o.TLSFingerprint)
		}
	}
	if o.Timeout < 0 || o.BreakerCooldown < 0 || o.MinBackoff < 0 || o.MaxBackoff < 0 || o.BreakerThreshold < 0 {
		return errors.New("durations and thresholds must not be negative")
	}
	return nil
}

// State is the coarse health of an upstream, as shown by `raspi-mcp status`.
type State string

const (
	// StateConnecting: no connection yet and the first attempt is running.
	StateConnecting State = "connecting"
	// StateUp: connected; calls are forwarded.
	StateUp State = "up"
	// StateDown: not connected; calls fail fast while Run reconnects.
	StateDown State = "down"
	// StateBreakerOpen: connected, but recent calls kept failing, so calls
	// fail fast until the cooldown ends and a trial call succeeds.
	StateBreakerOpen State = "breaker_open"
)

// Status is a snapshot of an upstream's health. It never contains the token.
type Status struct {
	Name      string
	State     State
	Transport string // "streamable", "sse" or "stdio"; empty before the first connect
	Endpoint  string // URL without credentials or query, or the command's program
	Server    string // the upstream's name and version, from initialize
	Protocol  string // negotiated MCP protocol version

	Tools       int
	ConnectedAt time.Time // zero while not connected
	Reconnects  int       // successful connects after the first

	LastError   string
	LastErrorAt time.Time
	NextAttempt time.Time // while down: when Run tries to connect again

	ConsecutiveFailures int       // call failures (timeouts, connection errors) in a row
	BreakerRetryAt      time.Time // while the breaker is open: when a trial call is allowed

	LastLatency time.Duration // last answered call
	P50Latency  time.Duration // median of the last 64 answered calls
}

// A Client is the agent's MCP client of one upstream. Create it with [New],
// run [Client.Run] in a goroutine, and use the other methods from anywhere:
// all are safe for concurrent use.
type Client struct {
	o        Options
	log      *slog.Logger
	mcp      *mcp.Client
	target   *url.URL // nil for Command
	endpoint string   // display form of the target
	invalid  error    // from Options.Validate

	// relist is poked by notifications/tools/list_changed. It lives on the
	// Client rather than the session because the notification may arrive
	// before Connect returns; a stale poke only causes one extra listing.
	relist  chan struct{}
	running atomic.Bool
	progSeq atomic.Uint64

	mu          sync.Mutex
	cur         *session      // nil while not connected
	upCh        chan struct{} // closed when cur becomes non-nil
	attempted   bool          // a connect attempt has finished
	connects    int
	stopped     bool
	tools       []*mcp.Tool
	toolsKey    []byte // JSON of tools, to tell real changes from relists
	toolsKnown  bool
	kind        string // transport of the last successful connect
	lastErr     string
	lastErrAt   time.Time
	nextAttempt time.Time
	secret      string // last token, kept only to scrub it from error text

	failures  int // consecutive call failures
	open      bool
	openUntil time.Time
	trial     bool // half-open trial call in flight

	lat     [latencyRing]time.Duration
	latN    int
	latLast time.Duration

	progress map[string]*progressReg
	acks     map[*mcp.ClientSession]chan struct{}
}

// session is one live connection. Its ctx ends when the session is torn
// down, which fails the calls still running on it.
type session struct {
	cs          *mcp.ClientSession
	kind        string
	ctx         context.Context
	cancel      context.CancelCauseFunc
	sig         *signals
	httpT       *http.Transport // nil for stdio
	connectedAt time.Time
	hasTools    bool
	toolsNotify bool // the upstream sends tools/list_changed
	hasRes      bool
	hasPrompts  bool
	server      string
	protocol    string
}

// signals carry hints from the HTTP layer to the session's supervisor.
type signals struct {
	probe    chan struct{} // something looked wrong: ping to find out
	lost     chan struct{} // the notification stream is gone: reconnect
	lostOnce sync.Once
}

func newSignals() *signals {
	return &signals{probe: make(chan struct{}, 1), lost: make(chan struct{})}
}

func (s *signals) kick() {
	select {
	case s.probe <- struct{}{}:
	default:
	}
}

func (s *signals) markLost() { s.lostOnce.Do(func() { close(s.lost) }) }

var (
	errDropped        = errors.New("connection dropped")
	errCallTimeout    = errors.New("per-call timeout")
	errConnectTimeout = errors.New("connect timeout")
	errStopped        = errors.New("client stopped")
)

// New returns a Client for o. It does not connect: [Client.Run] does.
// Invalid options are reported by Status and by every call.
func New(o Options) *Client {
	if o.Name == "" {
		o.Name = "unnamed"
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	o.MaxBackoff = max(o.MaxBackoff, o.MinBackoff)
	if o.BreakerThreshold <= 0 {
		o.BreakerThreshold = DefaultBreakerThreshold
	}
	if o.BreakerCooldown <= 0 {
		o.BreakerCooldown = DefaultBreakerCooldown
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.ClientName == "" {
		o.ClientName = "raspi-mcp"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	o.Command = slices.Clone(o.Command)
	o.Env = slices.Clone(o.Env)

	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		o:        o,
		invalid:  o.Validate(),
		relist:   make(chan struct{}, 1),
		upCh:     make(chan struct{}),
		progress: make(map[string]*progressReg),
		acks:     make(map[*mcp.ClientSession]chan struct{}),
	}
	if o.URL != "" {
		if u, err := url.Parse(o.URL); err == nil {
			c.target = u
			c.endpoint = redactURL(u)
		}
	} else if len(o.Command) > 0 {
		c.endpoint = o.Command[0]
	}
	c.log = log.With("upstream", o.Name, "endpoint", c.endpoint)
	c.mcp = mcp.NewClient(&mcp.Implementation{Name: o.ClientName, Version: o.ClientVersion}, &mcp.ClientOptions{
		Logger: c.log.With("component", "mcp-sdk"),
		// Advertise nothing: we serve no roots, sampling or elicitation to
		// the upstream.
		Capabilities: &mcp.ClientCapabilities{},
		// Never list from inside the handler: the answer arrives on the
		// connection this handler is blocking.
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { c.poke() },
		ProgressNotificationHandler: c.onProgress,
	})
	c.mcp.AddReceivingMiddleware(c.onReceive)
	return c
}

// Run connects, discovers the tools and keeps the connection alive until ctx
// ends: when the connection drops or a health check fails it reconnects with
// exponential backoff and jitter (first retry after at most MinBackoff when
// the lost session had been stable, so an upstream restart costs well under a
// second), rediscovers the tools, and calls work again. Run returns when ctx
// ends, after closing the session. Call it once.
func (c *Client) Run(ctx context.Context) {
	if !c.running.CompareAndSwap(false, true) {
		c.log.Error("upstream: Run called while already running")
		return
	}
	defer c.running.Store(false)
	c.mu.Lock()
	c.stopped = false
	c.mu.Unlock()

	var closers sync.WaitGroup
	defer closers.Wait() // no goroutine outlives Run
	defer c.markStopped()

	if c.invalid != nil {
		c.setDown(fmt.Errorf("invalid options: %w", c.invalid), time.Time{})
		<-ctx.Done()
		return
	}

	fails := 0
	for {
		s, tools, err := c.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			fails++
			d := c.backoff(fails)
			c.setDown(err, time.Now().Add(d))
			if !sleep(ctx, d) {
				return
			}
			continue
		}
		c.setUp(s, tools)

		reason := c.serve(ctx, s)
		c.setDropped(s, reason)
		closers.Add(1)
		go func() {
			defer closers.Done()
			c.teardown(s, reason)
		}()
		if ctx.Err() != nil {
			return
		}
		if time.Since(s.connectedAt) >= stableAfter {
			fails = 0
		} else {
			fails++
		}
		d := c.backoff(fails)
		c.mu.Lock()
		c.nextAttempt = time.Now().Add(d)
		c.mu.Unlock()
		if !sleep(ctx, d) {
			return
		}
	}
}

// backoff is MinBackoff·2^n capped at MaxBackoff, with "equal jitter" (half
// fixed, half random) so a LAN full of agents does not reconnect in step.
func (c *Client) backoff(n int) time.Duration {
	d := c.o.MinBackoff
	for i := 0; i < n && d < c.o.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.o.MaxBackoff)
	half := d / 2
	return half + rand.N(half+1)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// serve supervises a live session until it must be replaced, and says why.
func (c *Client) serve(ctx context.Context, s *session) error {
	waitDone := make(chan error, 1)
	go func() { waitDone <- s.cs.Wait() }()
	var tick <-chan time.Time
	if c.o.PingInterval > 0 {
		t := time.NewTicker(c.o.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return errStopped
		case err := <-waitDone:
			if err == nil {
				return errors.New("connection closed by the upstream")
			}
			return fmt.Errorf("connection closed: %w", err)
		case <-s.sig.lost:
			return errors.New("notification stream ended (upstream restarted?)")
		case <-s.sig.probe:
			if err := c.ping(ctx, s); err != nil {
				return err
			}
		case <-tick:
			if err := c.ping(ctx, s); err != nil {
				return err
			}
			if !s.toolsNotify {
				// No list_changed from this upstream: polling is the only
				// way to notice new tools.
				c.poke()
			}
		case <-c.relist:
			lctx, cancel := context.WithTimeout(ctx, 2*c.o.Timeout)
			tools, err := c.listTools(lctx, s)
			cancel()
			if err != nil {
				if perr := c.ping(ctx, s); perr != nil {
					return perr
				}
				c.log.Warn("relisting tools failed; keeping the previous list", "error", c.scrub(err.Error()))
				continue
			}
			c.setTools(tools)
		}
	}
}

// ping checks the session is alive. A JSON-RPC error still proves the
// upstream answered, so only transport failures and timeouts count.
func (c *Client) ping(ctx context.Context, s *session) error {
	pctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	err := s.cs.Ping(pctx, nil)
	if err == nil || protocolError(err) != nil {
		return nil
	}
	if ctx.Err() != nil {
		return errStopped
	}
	if pctx.Err() != nil {
		return fmt.Errorf("health ping: no answer within %v", c.o.Timeout)
	}
	return fmt.Errorf("health ping: %w", err)
}

// teardown closes a session. Cancelling its context first fails the calls
// still running on it, because ClientSession.Close waits for in-flight calls.
func (c *Client) teardown(s *session, reason error) {
	s.cancel(reason)
	if s.cs != nil {
		_ = s.cs.Close()
		c.mu.Lock()
		delete(c.acks, s.cs)
		c.mu.Unlock()
	}
	if s.httpT != nil {
		s.httpT.CloseIdleConnections()
	}
}

// connect opens a session and discovers its tools.
func (c *Client) connect(ctx context.Context) (*session, []*mcp.Tool, error) {
	deadline := time.Now().Add(c.connectBudget())
	var (
		s   *session
		err error
	)
	if len(c.o.Command) > 0 {
		s, err = c.dialStdio(ctx, deadline)
	} else {
		s, err = c.dialURL(ctx, deadline)
	}
	if err != nil {
		return nil, nil, err
	}
	c.awaitListen(ctx, s, deadline)
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	tools, err := c.listTools(dctx, s)
	if err != nil {
		c.teardown(s, err)
		if dctx.Err() != nil && ctx.Err() == nil {
			return nil, nil, fmt.Errorf("tool discovery: no answer within %v", c.connectBudget())
		}
		return nil, nil, fmt.Errorf("tool discovery: %w", err)
	}
	return s, tools, nil
}

// awaitListen waits, under the 2026-07-28 protocol, until the upstream has
// acknowledged the subscriptions/listen stream the SDK opens at the end of
// Connect without waiting for it. Listing tools before that would leave a
// window in which a tool change is neither in the list nor notified.
func (c *Client) awaitListen(ctx context.Context, s *session, deadline time.Time) {
	if !s.toolsNotify || s.protocol < "2026-07-28" {
		return
	}
	t := time.NewTimer(time.Until(deadline) / 2)
	defer t.Stop()
	select {
	case <-c.ackChan(s.cs):
	case <-ctx.Done():
	case <-s.ctx.Done():
	case <-t.C:
		c.log.Warn("upstream did not acknowledge subscriptions/listen; tool changes may go unnoticed until the next reconnect")
	}
}

// ackChan returns the channel closed when cs's listen stream is
// acknowledged. The acknowledgement can arrive before Connect returns, so
// either side may create it.
func (c *Client) ackChan(cs *mcp.ClientSession) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch, ok := c.acks[cs]
	if !ok {
		ch = make(chan struct{})
		c.acks[cs] = ch
	}
	return ch
}

// onReceive watches incoming messages for the listen acknowledgement.
func (c *Client) onReceive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/subscriptions/acknowledged" {
			if cs, ok := req.GetSession().(*mcp.ClientSession); ok {
				ch := c.ackChan(cs)
				c.mu.Lock()
				select {
				case <-ch:
				default:
					close(ch)
				}
				c.mu.Unlock()
			}
		}
		return next(ctx, method, req)
	}
}

func (c *Client) poke() {
	select {
	case c.relist <- struct{}{}:
	default:
	}
}

// connectBudget bounds connecting plus discovery: a handshake is a few
// round trips, so twice the per-call timeout, but never under 2s.
func (c *Client) connectBudget() time.Duration { return max(2*c.o.Timeout, 2*time.Second) }

// dialURL connects over streamable HTTP or SSE, preferring the one that
// worked last time and falling back only when the server plainly does not
// speak the other (so an auth or network failure is never masked by a
// second, confusing SSE error).
func (c *Client) dialURL(ctx context.Context, deadline time.Time) (*session, error) {
	var tok string
	if c.o.Token != nil {
		t, err := c.o.Token()
		if err != nil {
			return nil, fmt.Errorf("resolving the token: %w", err)
		}
		tok = strings.TrimSpace(t)
		c.mu.Lock()
		c.secret = tok
		c.mu.Unlock()
	}
	c.mu.Lock()
	first := c.kind
	c.mu.Unlock()
	if first != TransportSSE {
		first = TransportStreamable
	}
	second := TransportSSE
	if first == TransportSSE {
		second = TransportStreamable
	}
	s, wrong, err := c.dialHTTP(ctx, deadline, first, tok)
	if err == nil || !wrong || ctx.Err() != nil {
		return s, err
	}
	c.log.Debug("server does not speak this transport; trying the other", "tried", first, "error", c.scrub(err.Error()))
	s, _, err2 := c.dialHTTP(ctx, deadline, second, tok)
	if err2 == nil {
		return s, nil
	}
	return nil, fmt.Errorf("%s: %v; %s: %w", transportLabel(first), err, transportLabel(second), err2)
}

func transportLabel(kind string) string {
	switch kind {
	case TransportStreamable:
		return "streamable HTTP"
	case TransportSSE:
		return "HTTP+SSE"
	}
	return kind
}

// dialHTTP makes one connection attempt with one transport. wrong reports
// that the server answered in a way that says it does not speak it.
func (c *Client) dialHTTP(ctx context.Context, deadline time.Time, kind, tok string) (_ *session, wrong bool, _ error) {
	sctx, cancel := context.WithCancelCause(ctx)
	rec := &recorder{}
	ht := c.newHTTPTransport(rec)
	s := &session{kind: kind, ctx: sctx, cancel: cancel, sig: newSignals(), httpT: ht}
	hc := &http.Client{
		Transport: &roundTripper{base: ht, origin: c.target, token: tok, rec: rec, sig: s.sig},
		// A redirect could carry the token elsewhere; MCP endpoints have
		// no business redirecting.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var t mcp.Transport
	if kind == TransportSSE {
		t = &mcp.SSEClientTransport{Endpoint: c.o.URL, HTTPClient: hc}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: c.o.URL, HTTPClient: hc}
	}
	if err := c.establish(sctx, deadline, s, t); err != nil {
		ht.CloseIdleConnections()
		if perr := rec.policy(); perr != nil {
			return nil, false, perr
		}
		if aerr := rec.auth(); aerr != nil {
			return nil, false, aerr
		}
		return nil, rec.wrongProtocol(kind), err
	}
	rec.finish()
	return s, false, nil
}

func (c *Client) dialStdio(ctx context.Context, deadline time.Time) (*session, error) {
	sctx, cancel := context.WithCancelCause(ctx)
	s := &session{kind: TransportStdio, ctx: sctx, cancel: cancel, sig: newSignals()}
	if err := c.establish(sctx, deadline, s, c.commandTransport()); err != nil {
		return nil, err
	}
	return s, nil
}

// establish runs the MCP handshake on s under a deadline. The deadline is a
// timer rather than a context deadline because SSE ties its event stream to
// the context given to Connect, which must therefore live as long as the
// session.
func (c *Client) establish(sctx context.Context, deadline time.Time, s *session, t mcp.Transport) error {
	timer := time.AfterFunc(time.Until(deadline), func() { s.cancel(errConnectTimeout) })
	cs, err := c.mcp.Connect(sctx, t, nil)
	fired := !timer.Stop()
	if err == nil && fired {
		_ = cs.Close()
		err = errConnectTimeout
	}
	if err != nil {
		s.cancel(err)
		if errors.Is(context.Cause(sctx), errConnectTimeout) {
			return fmt.Errorf("connect via %s: no answer within %v", transportLabel(s.kind), c.connectBudget())
		}
		return fmt.Errorf("connect via %s: %w", transportLabel(s.kind), err)
	}
	s.cs = cs
	s.connectedAt = time.Now()
	if ir := cs.InitializeResult(); ir != nil {
		s.protocol = ir.ProtocolVersion
		if ir.ServerInfo != nil {
			s.server = strings.TrimSpace(ir.ServerInfo.Name + " " + ir.ServerInfo.Version)
		}
		if caps := ir.Capabilities; caps != nil {
			s.hasTools = caps.Tools != nil
			s.toolsNotify = caps.Tools != nil && caps.Tools.ListChanged
			s.hasRes = caps.Resources != nil
			s.hasPrompts = caps.Prompts != nil
		}
	}
	return nil
}

// listTools follows pagination to the end, refusing cursor loops and
// oversized lists.
func (c *Client) listTools(ctx context.Context, s *session) ([]*mcp.Tool, error) {
	if !s.hasTools {
		return nil, nil
	}
	var all []*mcp.Tool
	err := paginate(func(cursor string) (string, error) {
		res, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return "", err
		}
		all = append(all, res.Tools...)
		return res.NextCursor, checkLen(len(all))
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(all, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	all = slices.CompactFunc(all, func(a, b *mcp.Tool) bool { return a.Name == b.Name })
	return all, nil
}

func checkLen(n int) error {
	if n > maxListItems {
		return fmt.Errorf("upstream lists more than %d items", maxListItems)
	}
	return nil
}

// paginate calls page with each cursor until the upstream returns none.
func paginate(page func(cursor string) (next string, err error)) error {
	seen := map[string]bool{}
	cursor := ""
	for i := 0; ; i++ {
		if i >= maxPages {
			return fmt.Errorf("upstream returned more than %d pages", maxPages)
		}
		next, err := page(cursor)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		if seen[next] {
			return fmt.Errorf("upstream repeated pagination cursor %q", next)
		}
		seen[next] = true
		cursor = next
	}
}

// setTools installs a relisted tool list and tells the agent if it differs.
func (c *Client) setTools(tools []*mcp.Tool) {
	if c.installTools(tools) {
		c.toolsChanged()
	}
}

// installTools stores tools and reports whether they differ from the last
// list (by their JSON form, so a relist that changes nothing is silent).
func (c *Client) installTools(tools []*mcp.Tool) bool {
	key, err := json.Marshal(tools)
	if err != nil {
		key = nil // unmarshalable: treat as changed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := !c.toolsKnown || key == nil || string(key) != string(c.toolsKey)
	c.tools, c.toolsKey, c.toolsKnown = tools, key, true
	return changed
}

// toolsChanged tells the agent, outside any lock.
func (c *Client) toolsChanged() {
	c.log.Info("upstream tool list changed", "count", len(c.Tools()))
	if c.o.OnToolsChanged != nil {
		c.o.OnToolsChanged()
	}
}

// setUp publishes a new session together with its tool list, so nobody
// sees "up" with a stale or empty list.
func (c *Client) setUp(s *session, tools []*mcp.Tool) {
	changed := c.installTools(tools)
	c.mu.Lock()
	c.cur = s
	c.kind = s.kind
	c.connects++
	c.attempted = true
	c.nextAttempt = time.Time{}
	close(c.upCh)
	// A fresh connection is evidence of life: let the next call through as
	// a half-open trial instead of waiting out the whole cooldown.
	if c.open && c.openUntil.After(s.connectedAt) {
		c.openUntil = s.connectedAt
	}
	c.mu.Unlock()
	c.log.Info("upstream connected", "transport", s.kind, "server", s.server, "protocol", s.protocol)
	if changed {
		c.toolsChanged()
	}
}

func (c *Client) setDropped(s *session, reason error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == s {
		c.cur = nil
		c.upCh = make(chan struct{})
	}
	if errors.Is(reason, errStopped) {
		return
	}
	c.lastErr = c.scrubLocked(reason.Error())
	c.lastErrAt = time.Now()
	c.log.Warn("upstream disconnected; reconnecting", "error", c.lastErr, "was_up", time.Since(s.connectedAt).Round(time.Millisecond))
}

func (c *Client) setDown(err error, next time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	msg := c.scrubLocked(err.Error())
	// Log the first failure loudly and repeats quietly: an upstream that is
	// off for the night must not flood the journal.
	if msg != c.lastErr || !c.attempted {
		c.log.Warn("upstream connect failed", "error", msg, "retry_in", time.Until(next).Round(time.Millisecond))
	} else {
		c.log.Debug("upstream connect failed", "error", msg)
	}
	c.attempted = true
	c.lastErr = msg
	c.lastErrAt = time.Now()
	c.nextAttempt = next
}

func (c *Client) markStopped() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.nextAttempt = time.Time{}
}

// Tools returns the last discovered tool list, sorted by name, exactly as the
// upstream described them (names, schemas, annotations). It is kept while the
// upstream is down. The Tool values are shared: treat them as read-only.
func (c *Client) Tools() []*mcp.Tool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.tools)
}

// Status returns a snapshot of the upstream's health.
func (c *Client) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Status{
		Name:                c.o.Name,
		Transport:           c.kind,
		Endpoint:            c.endpoint,
		Tools:               len(c.tools),
		LastError:           c.lastErr,
		LastErrorAt:         c.lastErrAt,
		NextAttempt:         c.nextAttempt,
		ConsecutiveFailures: c.failures,
		LastLatency:         c.latLast,
		P50Latency:          c.p50Locked(),
	}
	if c.connects > 1 {
		st.Reconnects = c.connects - 1
	}
	switch {
	case c.cur != nil:
		st.State = StateUp
		st.ConnectedAt = c.cur.connectedAt
		st.Server = c.cur.server
		st.Protocol = c.cur.protocol
		st.Transport = c.cur.kind
		if c.open {
			st.State = StateBreakerOpen
			st.BreakerRetryAt = c.openUntil
		}
	case !c.attempted && !c.stopped && c.invalid == nil:
		st.State = StateConnecting
	default:
		st.State = StateDown
	}
	return st
}

func (c *Client) p50Locked() time.Duration {
	n := min(c.latN, latencyRing)
	if n == 0 {
		return 0
	}
	d := slices.Clone(c.lat[:n])
	slices.Sort(d)
	return d[(n-1)/2]
}

// scrub removes secrets from text that leaves the package: the token, and
// the URL's query and password, which some servers use for credentials.
func (c *Client) scrub(s string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.scrubLocked(s)
}

func (c *Client) scrubLocked(s string) string {
	if len(c.secret) >= 4 {
		s = strings.ReplaceAll(s, c.secret, "REDACTED")
	}
	if c.target != nil {
		if q := c.target.RawQuery; q != "" {
			s = strings.ReplaceAll(s, q, "REDACTED")
		}
		if p, ok := c.target.User.Password(); ok && p != "" {
			s = strings.ReplaceAll(s, p, "REDACTED")
		}
	}
	return s
}

// redactURL is the display form of an endpoint: no userinfo, query or
// fragment, which is where credentials hide.
func redactURL(u *url.URL) string {
	v := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	s := v.String()
	if u.RawQuery != "" {
		s += "?REDACTED"
	}
	return s
}

func redactURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
