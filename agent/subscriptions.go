package agent

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/series"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
)

// A watcher polls what the subscribable resources show and sends
// notifications/resources/updated when it changes: throttling or
// under-voltage starting or ending, a unit failing, the helper going down or
// coming back, an upstream changing state, a lease reverting, a scheduled
// power action coming near. A metric resource is updated when new samples
// were taken. Updates are coalesced: at most one per resource per gap, so a
// session never hears about one resource more often than that; a change
// inside the gap is sent when it ends.
type watcher struct {
	a     *Agent
	every time.Duration // poll interval
	gap   time.Duration // least time between two updates of one resource
	send  func(ctx context.Context, uri string)

	mu sync.Mutex
	// subs counts, by subscription key (the URI's meaning, subscriptionKey),
	// the sessions that hold it: what is polled for. Nobody subscribed,
	// nothing is polled: reading units over D-Bus every few seconds costs
	// a small Pi something.
	subs map[string]int
	// held is each session's subscriptions by key, until it unsubscribes
	// or ends (either era); total is their number over all sessions.
	held  map[*mcp.ServerSession]map[string]*holding
	total int
	// last and pending are per key, and go with its last subscriber.
	last    map[string]time.Time
	pending map[string]bool
	prev    pulse
	primed  bool

	// sdk is the SDK's own request handling, below the agent's
	// middleware: release asks it to forget a departed session's keys.
	sdk mcp.MethodHandler
}

// holding is who in one session holds one key: a resources/subscribe
// (2025-11-25; a second one is the same subscription) and the open
// subscriptions/listen requests that name it (2026-07-28; each one holds it
// until it ends).
type holding struct {
	legacy  bool
	listens int
}

// powerNear is how far ahead a scheduled reboot or shutdown counts as near.
const powerNear = 2 * time.Minute

func newWatcher(a *Agent) *watcher {
	w := &watcher{a: a, every: 5 * time.Second, gap: 10 * time.Second,
		subs: map[string]int{}, held: map[*mcp.ServerSession]map[string]*holding{},
		last: map[string]time.Time{}, pending: map[string]bool{}}
	w.send = func(ctx context.Context, uri string) {
		// The SDK sends it to every session subscribed to uri.
		if err := a.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			a.log.Warn("resource update not sent", "uri", uri, "err", err)
		}
	}
	return w
}

// pulse is the part of the device state whose change is news.
type pulse struct {
	throttle  string // the now-flags, "under_voltage,throttled"
	failed    string
	helperUp  bool
	upstreams string
	leases    int
	powerNear bool
	samples   int64
}

func (w *watcher) read(ctx context.Context) pulse {
	a := w.a
	var p pulse
	if h, err := a.sys.Health(ctx); err == nil && h.Throttle != nil {
		t := h.Throttle
		p.throttle = strings.Join(flags(t.UnderVoltage, t.FreqCapped, t.Throttled, t.SoftTempLimit), ",")
	}
	if a.units != nil {
		if us, err := a.units.List(ctx); err == nil {
			var f []string
			for _, u := range us {
				if u.ActiveState == "failed" {
					f = append(f, u.Name)
				}
			}
			p.failed = strings.Join(f, ",")
		}
	}
	p.helperUp = helperUp(ctx, a.helper)
	var ups []string
	for _, u := range a.lanStatus() {
		ups = append(ups, u.Name+"="+u.State)
	}
	p.upstreams = strings.Join(ups, ",")
	if rs, err := a.store.ListGPIOReverts(); err == nil {
		p.leases = len(rs)
	}
	if pj, ok, err := a.store.PendingPower(); err == nil && ok {
		p.powerNear = time.Until(pj.At) <= powerNear
	}
	p.samples, _, _ = a.sampler.Stats()
	return p
}

// changed lists the resources whose view differs between two pulses.
func changed(old, now pulse) []string {
	var uris []string
	device := old.throttle != now.throttle || old.failed != now.failed || old.helperUp != now.helperUp
	if device || old.upstreams != now.upstreams || old.leases != now.leases || old.powerNear != now.powerNear {
		uris = append(uris, uriSummary)
	}
	if device {
		uris = append(uris, uriHealth)
	}
	return uris
}

func (w *watcher) run(ctx context.Context) {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		w.tick(ctx, time.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *watcher) tick(ctx context.Context, now time.Time) {
	w.mu.Lock()
	idle := len(w.subs) == 0
	if idle {
		w.primed = false // the next subscriber gets a fresh baseline
	}
	w.mu.Unlock()
	if idle {
		return
	}
	p := w.read(ctx)
	w.mu.Lock()
	if w.primed {
		for _, u := range changed(w.prev, p) {
			w.pending[u] = true
		}
		if p.samples != w.prev.samples {
			for u := range w.subs {
				if strings.HasPrefix(u, "raspi://metrics/") {
					w.pending[u] = true
				}
			}
		}
	}
	w.prev, w.primed = p, true
	var due []string
	for u := range w.pending {
		if now.Sub(w.last[u]) >= w.gap {
			due = append(due, u)
			w.last[u] = now
			delete(w.pending, u)
		}
	}
	w.mu.Unlock()
	slices.Sort(due)
	for _, u := range due {
		w.send(ctx, u)
	}
}

// A subscription is kept by what it means, not by how the client spelled
// it: a client that subscribes to raspi://metrics/cpu_percent?x=1, ?x=2 ...
// holds one subscription, polled once, and the SDK's map of subscribers is
// keyed by that meaning too (the handlers rewrite the request's URI, so the
// SDK keeps no copy of the client's string). notifications/resources/updated
// names the canonical URI: what changed, readable as it is. Each session
// holds at most [subscriptions] per_session keys, all sessions together
// total; every one goes when its session ends. Polling costs the same
// whatever a resource's size: the watcher reads a fixed-size pulse of the
// device (read), never the resources, and keeps per key only when it last
// told and whether news waits.

// subscribe admits a subscription to the summary, the health snapshot or a
// metric, for a principal who may read it, within the bounds; the SDK then
// keeps the session's subscription under its canonical URI.
func (a *Agent) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	lim := a.conf().Subscriptions
	key, id, terr := subscriptionKey(req.Params.URI, lim.MaxURIBytes)
	if terr != nil {
		return resourceError(terr)
	}
	p := principalOrUnknown(ctx)
	if derr := a.pipe.May(p, id); derr != nil {
		a.readAuditor().deny(p, "resources.subscribe", derr)
		return resourceError(derr)
	}
	if terr := a.updates.hold(req.Session, key, listening(ctx), lim); terr != nil {
		return resourceError(terr)
	}
	req.Params.URI = key
	return nil
}

// unsubscribe lets go of the session's subscription to what the URI means.
// A listen that ends while another listen of the session still names the
// same key gets an error, which the SDK drops, so that it keeps the key.
func (a *Agent) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	key, _, terr := subscriptionKey(req.Params.URI, 0)
	if terr != nil {
		return nil // nothing of that name is held
	}
	req.Params.URI = key
	listen := listening(ctx)
	if a.updates.drop(req.Session, key, listen) && listen {
		return tool.Errf(CodeFailedPrecondition, "another subscriptions/listen of this session still names %s", key)
	}
	return nil
}

// listenKey marks the context of a subscriptions/listen request, whose
// subscriptions the SDK makes through the same handlers as resources/subscribe.
type listenKey struct{}

func listening(ctx context.Context) bool { return ctx.Value(listenKey{}) != nil }

// subscriptionMiddleware marks subscriptions/listen requests and hands the
// watcher the SDK's own handling. It is the innermost middleware.
func (a *Agent) subscriptionMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	a.updates.sdk = next
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "subscriptions/listen" {
			ctx = context.WithValue(ctx, listenKey{}, true)
		}
		return next(ctx, method, req)
	}
}

// hold records that ss holds key, within the bounds; a key the session
// already holds is no new subscription. The first subscription of a session
// starts the wait for its end.
func (w *watcher) hold(ss *mcp.ServerSession, key string, listen bool, lim config.Subscriptions) *tool.Error {
	if ss == nil {
		return tool.Errf(CodeInternal, "a subscription without a session")
	}
	w.mu.Lock()
	keys, known := w.held[ss]
	h := keys[key]
	switch {
	case h != nil:
	case len(keys) >= lim.PerSession:
		n := len(keys) // read under w.mu: drop may change keys once it is let go
		w.mu.Unlock()
		return tool.Errf(CodeResourceExhausted, "this session holds %d subscriptions, the most [subscriptions] per_session allows", n).
			With("bound", "subscriptions.per_session").With("limit", lim.PerSession).
			Hint("unsubscribe from a resource you no longer need, then subscribe again")
	case w.total >= lim.Total:
		n := w.total
		w.mu.Unlock()
		return tool.Errf(CodeResourceExhausted, "the agent holds %d subscriptions over all sessions, the most [subscriptions] total allows", n).
			With("bound", "subscriptions.total").With("limit", lim.Total).Retry().
			Hint("retry when other clients have unsubscribed or left; the device owner can raise [subscriptions] total")
	default:
		if !known {
			keys = map[string]*holding{}
			w.held[ss] = keys
		}
		h = &holding{}
		keys[key] = h
		w.total++
		w.subs[key]++
	}
	if listen {
		h.listens++
	} else {
		h.legacy = true
	}
	w.mu.Unlock()
	if !known {
		// The session's entry stays until it ends, so this runs once per
		// session that ever subscribed.
		go func() {
			_ = ss.Wait()
			w.release(ss)
		}()
	}
	return nil
}

// drop lets go of one holder of key in ss and reports whether another
// still holds it.
func (w *watcher) drop(ss *mcp.ServerSession, key string, listen bool) (still bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := w.held[ss][key]
	if h == nil {
		return false
	}
	if listen {
		h.listens = max(h.listens-1, 0)
	} else {
		h.legacy = false
	}
	if h.legacy || h.listens > 0 {
		return true
	}
	delete(w.held[ss], key)
	w.forget(key)
	return false
}

// forget counts one holder of key fewer; with none left the key is no
// longer polled and its state goes. w.mu is held.
func (w *watcher) forget(key string) {
	w.total--
	if w.subs[key]--; w.subs[key] <= 0 {
		delete(w.subs, key)
		delete(w.last, key)
		delete(w.pending, key)
	}
}

// release drops everything a session that ended held. go-sdk forgets the
// session itself but keeps every URI it was subscribed to as an empty
// entry, so the agent first unsubscribes each key in the session's name
// (through its own handler, which lets go of a resources/subscribe), then
// lets go of what listens still held.
func (w *watcher) release(ss *mcp.ServerSession) {
	w.mu.Lock()
	keys := slices.Collect(maps.Keys(w.held[ss]))
	sdk := w.sdk
	w.mu.Unlock()
	if sdk != nil {
		for _, k := range keys {
			_, _ = sdk(context.Background(), "resources/unsubscribe", &mcp.UnsubscribeRequest{Session: ss, Params: &mcp.UnsubscribeParams{URI: k}})
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.held[ss] {
		w.forget(k)
	}
	delete(w.held, ss)
}

// subscriptionCounts is what the watcher holds: keys polled for,
// subscriptions over all sessions, and sessions with an entry.
func (w *watcher) subscriptionCounts() (keys, subs, sessions int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.subs), w.total, len(w.held)
}

// subscriptionKey is the canonical URI of what uri means, and the tool
// whose policy decides who may subscribe to it, or why uri names nothing
// subscribable. The query parameters a resource does not read are dropped,
// those it reads are normalised (a window of 60m is 1h, and the default
// one is no parameter) and sorted. maxLen > 0 refuses longer URIs unread.
func subscriptionKey(uri string, maxLen int) (key, id string, _ *tool.Error) {
	if maxLen > 0 && len(uri) > maxLen {
		return "", "", tool.Errf(CodeInvalidArgument, "a resource URI of %d bytes: a subscription names at most %d ([subscriptions] max_uri_bytes)", len(uri), maxLen).
			With("bound", "subscriptions.max_uri_bytes").With("limit", maxLen).
			Hint(fmt.Sprintf("subscribe to %s, %s or raspi://metrics/{metric}{?window,resolution}", uriSummary, uriHealth))
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "raspi" || u.Opaque != "" || u.User != nil {
		return "", "", tool.Errf(CodeInvalidArgument, "%s cannot be subscribed to", clip(uri)).With("uri", clip(uri)).
			Hint(fmt.Sprintf("subscribe to %s, %s or raspi://metrics/{metric}", uriSummary, uriHealth))
	}
	switch base := "raspi://" + u.Host + u.Path; {
	case base == uriSummary:
		return uriSummary, "manage.get_server_status", nil
	case base == uriHealth:
		return uriHealth, "system.get_health_snapshot", nil
	case u.Host == "metrics":
		name := strings.TrimPrefix(u.Path, "/")
		if _, err := series.Lookup(name); err != nil {
			return "", "", tool.Errf(CodeInvalidArgument, "no metric %q to subscribe to", clip(name)).With("uri", clip(uri)).
				Hint("complete raspi://metrics/{metric} for the names")
		}
		q, canon := u.Query(), url.Values{}
		if w := q.Get("window"); w != "" {
			d, terr := parseWindow(w)
			if terr != nil {
				return "", "", terr
			}
			if d != defaultWindow {
				canon.Set("window", compactDuration(d))
			}
		}
		if r := q.Get("resolution"); r != "" {
			d, err := series.ParseResolution(r)
			if err != nil {
				return "", "", tool.Errf(CodeInvalidArgument, "%s", strings.TrimPrefix(err.Error(), "series: ")).With("parameter", "resolution")
			}
			if d != time.Minute { // metrics.query_history's default
				canon.Set("resolution", series.FormatResolution(d))
			}
		}
		k := url.URL{Scheme: "raspi", Host: "metrics", Path: "/" + name, RawQuery: canon.Encode()}
		return k.String(), "metrics.query_history", nil
	case base == uriContract || base == uriPins || base == uriConfig || base == uriAudit || u.Host == "service" || u.Host == "journal":
		return "", "", tool.Errf(CodeInvalidArgument, "%s cannot be subscribed to", clip(uri)).With("uri", clip(uri)).
			Hint(fmt.Sprintf("subscribe to %s, %s or raspi://metrics/{metric}", uriSummary, uriHealth))
	default:
		return "", "", tool.Errf(CodeNotFound, "%s names no resource of this server", clip(uri)).With("uri", clip(uri)).
			Hint("resources/list and resources/templates/list show what there is")
	}
}

// compactDuration writes d as time.ParseDuration reads it, without the
// zero minutes and seconds Duration.String adds: 1h, 1h30m, 90s.
func compactDuration(d time.Duration) string {
	s := d.String()
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// clip is a client's string short enough to quote in an error.
func clip(s string) string {
	if len(s) <= 200 {
		return s
	}
	return s[:200] + "..."
}
