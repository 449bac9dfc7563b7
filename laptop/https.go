package laptop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/internal/fallback"
)

// Remote is a Pi reached over HTTPS: what `connect https` is given on its
// command line and what a paired Pi's record holds.
type Remote struct {
	URL         string // https://HOST:PORT, or the endpoint itself (…/mcp)
	Fingerprint string // the Pi's certificate, sha256:… or openssl's AB:CD:…
	Token       string // the bearer token's secret
	Version     string // ours, for the fallback's serverInfo
	// Explain, when set, words the fix for the Pi's refusal of the token
	// (a 401 or 403 and its body), replacing the generic one: a paired
	// connection says to pair again (pairing.ExplainRefusal).
	Explain func(status int, body string) string
}

// Endpoint is the MCP endpoint: URL with /mcp when it names no path. Only
// https is accepted, since the token would otherwise cross the network in
// the clear.
func (r Remote) Endpoint() (string, error) {
	u, err := url.Parse(r.URL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("laptop: URL %q: want https://HOST:PORT as the Pi's raspi-mcp status shows it", r.URL)
	}
	if u.Scheme != "https" {
		return "", fmt.Errorf("laptop: URL %q: want https (the token must not cross the network in the clear)", r.URL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("laptop: URL %q: want only https://HOST:PORT[/mcp]", r.URL)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/mcp"
	}
	return u.String(), nil
}

// Check validates the URL, the fingerprint and the token before anything
// is sent.
func (r Remote) Check() error {
	if _, err := r.Endpoint(); err != nil {
		return err
	}
	if _, err := ParseFingerprint(r.Fingerprint); err != nil {
		return err
	}
	if r.Token == "" || strings.ContainsAny(r.Token, " \t\r\n") {
		return errors.New("laptop: the token is empty or has blanks in it; want the secret `raspi-mcp token create` showed")
	}
	return nil
}

// ReadToken reads a token file: its first line, trimmed. The file should
// be readable by its owner only; a token is a password.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("laptop: token file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if t := strings.TrimSpace(line); t != "" {
		return t, nil
	}
	return "", fmt.Errorf("laptop: token file %s is empty", path)
}

// Run relays the client's messages on stdin/stdout to the Pi's Streamable
// HTTP endpoint with go-sdk's own client transport, message by message, so
// sessions, protocol headers and SSE streams are the SDK's. The client's
// first message is the probe: if it does not get through (the Pi is down,
// its certificate is not the pinned one, the token is refused), the client
// gets the fallback with the reason, and Run returns *Failed after the
// client closes its input.
func (r Remote) Run(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := r.Check(); err != nil {
		return err
	}
	endpoint, _ := r.Endpoint()
	want, _ := ParseFingerprint(r.Fingerprint)
	p := &pin{want: want}
	rt := &relayRT{token: r.Token, base: &http.Transport{
		Proxy:               nil, // the Pi is on the LAN; a proxy would see the token's host and could not pass the pin anyway
		DialContext:         (&net.Dialer{Timeout: 15 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     p.config(),
		TLSHandshakeTimeout: 15 * time.Second,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
	}}
	down := func(err error) fallback.Down {
		refused := rt.refusal()
		d := classifyHTTP(endpoint, err, p.refused(), refused)
		if r.Explain != nil && refused != nil && (refused.status == http.StatusUnauthorized || refused.status == http.StatusForbidden) {
			if fix := r.Explain(refused.status, refused.body); fix != "" {
				d.FixHint = fix
			}
		}
		d.Version = r.Version
		return d
	}

	in := bufio.NewReaderSize(stdin, 64<<10)
	first, err := firstLine(in)
	if len(first) == 0 {
		return err
	}
	replay := func() io.Reader { return io.MultiReader(bytes.NewReader(first), in) }
	msg, derr := jsonrpc.DecodeMessage(bytes.TrimSpace(first))

	pi, err := (&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: rt}, MaxRetries: 2}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("laptop: %w", err)
	}
	defer pi.Close()
	rest := io.Reader(in)
	if derr != nil {
		rest = replay() // the client's own transport answers what it cannot read
	} else {
		if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" {
			rt.expect(req.ID)
		}
		if err := pi.Write(ctx, msg); err != nil {
			return serveDown(replay(), stdout, stderr, down(err))
		}
	}
	client, err := (&mcp.IOTransport{Reader: io.NopCloser(rest), Writer: nopWriteCloser{stdout}}).Connect(ctx)
	if err != nil {
		return fmt.Errorf("laptop: %w", err)
	}
	defer client.Close()
	return relay(ctx, client, pi, rt, down, stderr, msg)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// relayGrace is how long, after the client closes its input, the answers
// still owed to it may take.
const relayGrace = 10 * time.Second

// relay copies messages both ways until the client's input ends and the
// answers it is owed are back (or relayGrace passes), or the Pi's side
// fails. A request that cannot be sent is answered with the reason, so the
// client never waits for an answer that cannot come.
func relay(ctx context.Context, client, pi mcp.Connection, rt *relayRT, down func(error) fallback.Down, stderr io.Writer, sent jsonrpc.Message) error {
	var (
		mu      sync.Mutex
		owed    = map[any]bool{}
		drained = make(chan struct{}, 1)
	)
	if req, ok := sent.(*jsonrpc.Request); ok && req.ID.IsValid() {
		owed[req.ID.Raw()] = true // the probe, sent before the relay began
	}
	settle := func(id jsonrpc.ID) {
		mu.Lock()
		delete(owed, id.Raw())
		n := len(owed)
		mu.Unlock()
		if n == 0 {
			select {
			case drained <- struct{}{}:
			default:
			}
		}
	}
	fail := func(id jsonrpc.ID, err error) {
		d := down(err)
		resp := &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: -32001, Message: "unavailable: " + d.Reason + ". Fix: " + d.FixHint}}
		_ = client.Write(ctx, resp)
		settle(id)
	}
	piDone := make(chan error, 1)
	go func() {
		for {
			m, err := pi.Read(ctx)
			if err != nil {
				piDone <- err
				return
			}
			if resp, ok := m.(*jsonrpc.Response); ok {
				rt.answered(resp)
				settle(resp.ID)
			}
			if err := client.Write(ctx, m); err != nil {
				piDone <- err
				return
			}
		}
	}()
	send := func(m jsonrpc.Message) {
		req, call := m.(*jsonrpc.Request)
		if !call || !req.ID.IsValid() {
			if err := pi.Write(ctx, m); err != nil {
				fmt.Fprintf(stderr, "raspi-mcp-laptop: %v\n", err)
			}
			return
		}
		if req.Method == "initialize" {
			rt.expect(req.ID)
		}
		// subscriptions/listen stays open for the whole session: the end
		// of the client's input must not wait for its answer.
		if req.Method != "subscriptions/listen" {
			mu.Lock()
			owed[req.ID.Raw()] = true
			mu.Unlock()
		}
		// A call's POST returns once the Pi starts answering; another call
		// must not wait for it.
		go func() {
			if err := pi.Write(ctx, req); err != nil {
				fail(req.ID, err)
			}
		}()
	}
	for {
		m, err := client.Read(ctx)
		if err != nil {
			break // the client closed its input (or sent what is not JSON-RPC)
		}
		select {
		case err := <-piDone:
			piDone <- err
			if req, ok := m.(*jsonrpc.Request); ok && req.ID.IsValid() {
				fail(req.ID, err)
			}
			continue
		default:
		}
		send(m)
	}
	mu.Lock()
	n := len(owed)
	mu.Unlock()
	if n > 0 {
		t := time.NewTimer(relayGrace)
		defer t.Stop()
		select {
		case <-drained:
		case <-piDone:
		case <-t.C:
		}
	}
	return nil
}

// relayRT puts the bearer token on every request, the negotiated protocol
// version on those go-sdk sends without it (it learns the version only
// from a session of its own, which a relay has not got), and keeps the
// last 401 or 403 with its body, which go-sdk's error leaves out.
type relayRT struct {
	token string
	base  http.RoundTripper

	mu      sync.Mutex
	initID  any    // the client's initialize request, whose answer names the version
	version string // negotiated by initialize (2025-11-25 and older)
	last    *httpRefusal
}

type httpRefusal struct {
	status int
	body   string
}

func (t *relayRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	t.mu.Lock()
	if v := t.version; v != "" && r.Header.Get("Mcp-Protocol-Version") == "" {
		r.Header.Set("Mcp-Protocol-Version", v)
	}
	t.mu.Unlock()
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	t.mu.Lock()
	t.last = &httpRefusal{status: resp.StatusCode, body: strings.TrimSpace(string(body))}
	t.mu.Unlock()
	return resp, nil
}

func (t *relayRT) expect(id jsonrpc.ID) {
	t.mu.Lock()
	t.initID = id.Raw()
	t.mu.Unlock()
}

func (t *relayRT) answered(resp *jsonrpc.Response) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.initID == nil || resp.ID.Raw() != t.initID || resp.Result == nil {
		return
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(resp.Result, &res) == nil && res.ProtocolVersion != "" {
		t.version = res.ProtocolVersion
	}
}

func (t *relayRT) refusal() *httpRefusal {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// classifyHTTP turns a failed first request into the reason and the fix
// the client shows.
func classifyHTTP(endpoint string, err error, pinned *PinError, refused *httpRefusal) fallback.Down {
	host := endpoint
	if u, perr := url.Parse(endpoint); perr == nil {
		host = u.Host
	}
	var pe *PinError
	if errors.As(err, &pe) {
		pinned = pe
	}
	switch {
	case pinned != nil:
		return fallback.Down{
			Reason: fmt.Sprintf("the Pi at %s presented the certificate %s, but this laptop pins %s, so nothing was sent, not even the token", host, orNone(pinned.Got), pinned.Want),
			FixHint: "compare with the `tls certificate` line of `raspi-mcp status` on the Pi: if the Pi's certificate was replaced on purpose, pair again (or pass its new --fingerprint); " +
				"if the Pi still shows the pinned one, something else answers at this address"}
	case refused != nil && refused.status == http.StatusUnauthorized:
		return fallback.Down{
			Reason:  fmt.Sprintf("the Pi at %s refused the token (HTTP 401: %s)", host, oneLine(refused.body)),
			FixHint: "make a new token on the Pi (`sudo raspi-mcp token create laptop --role operate`, or pair again) and give it here; a revoked or expired token stays refused"}
	case refused != nil && refused.status == http.StatusForbidden:
		return fallback.Down{
			Reason:  fmt.Sprintf("the Pi at %s does not let this token use MCP (HTTP 403: %s)", host, oneLine(refused.body)),
			FixHint: "make a token with the role read, operate or admin on the Pi (`sudo raspi-mcp token create laptop --role operate`)"}
	case refused != nil && (refused.status == http.StatusTooManyRequests || refused.status == http.StatusServiceUnavailable):
		return fallback.Down{
			Reason:  fmt.Sprintf("the Pi at %s refuses more for now (HTTP %d: %s)", host, refused.status, oneLine(refused.body)),
			FixHint: "wait a little and try again; the Pi's [http] rate, burst and max_sessions_per_token bound what one token may do"}
	case refused != nil:
		return fallback.Down{
			Reason:  fmt.Sprintf("the Pi at %s answered HTTP %d (%s)", host, refused.status, oneLine(refused.body)),
			FixHint: "check that the URL is the one the Pi's `raspi-mcp status` shows, ending in /mcp, and see the Pi's log (`journalctl -u raspi-mcp`)"}
	}
	var ne net.Error
	var oe *net.OpError
	var dnse *net.DNSError
	switch {
	case errors.As(err, &dnse):
		return fallback.Down{Reason: fmt.Sprintf("the Pi's name in %s does not resolve (%v)", host, dnse),
			FixHint: "check the name, or use the Pi's IP address as its `raspi-mcp status` shows it"}
	case errors.As(err, &oe) && oe.Op == "dial":
		return fallback.Down{Reason: fmt.Sprintf("the Pi cannot be reached at %s (%v)", host, oe),
			FixHint: "check that the Pi is on and on a network this laptop reaches, and that raspi-mcp serves HTTPS there (`[http] listen` and `tls = true`; `raspi-mcp status` on the Pi shows the URL)"}
	case errors.As(err, &ne) && ne.Timeout():
		return fallback.Down{Reason: fmt.Sprintf("the Pi cannot be reached at %s (%v)", host, rootCause(err)),
			FixHint: "check that the Pi is on and on a network this laptop reaches, and that raspi-mcp serves HTTPS there (`[http] listen` and `tls = true`; `raspi-mcp status` on the Pi shows the URL)"}
	}
	return fallback.Down{Reason: fmt.Sprintf("the connection to the Pi at %s failed (%v)", host, rootCause(err)),
		FixHint: "check that the URL is the https one the Pi's `raspi-mcp status` shows (the port of `[http] listen`, with `tls = true`)"}
}

// rootCause is what net/http's url.Error wraps, without go-sdk's and
// net/http's framing around it.
func rootCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// oneLine is s on one line, cut to 300 bytes.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "no reason given"
	}
	return s
}
