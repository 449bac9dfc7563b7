package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/series"
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
	// subs counts subscriptions by URI. Nobody subscribed, nothing is
	// polled: reading units over D-Bus every few seconds costs a small
	// Pi something. A legacy session that closes without unsubscribing
	// leaves its count, which costs polling, never an update.
	subs    map[string]int
	last    map[string]time.Time
	pending map[string]bool
	prev    pulse
	primed  bool
}

// powerNear is how far ahead a scheduled reboot or shutdown counts as near.
const powerNear = 2 * time.Minute

func newWatcher(a *Agent) *watcher {
	w := &watcher{a: a, every: 5 * time.Second, gap: 10 * time.Second,
		subs: map[string]int{}, last: map[string]time.Time{}, pending: map[string]bool{}}
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
	p.helperUp = a.helperUp(ctx)
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

// subscribe admits a subscription to the summary, the health snapshot or a
// metric, for a principal who may read it; the SDK then keeps the session's
// subscription.
func (a *Agent) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	p := principalOrUnknown(ctx)
	id := ""
	switch {
	case uri == uriSummary:
		id = "manage.get_server_status"
	case uri == uriHealth:
		id = "system.get_health_snapshot"
	case strings.HasPrefix(uri, "raspi://metrics/"):
		id = "metrics.query_history"
		name, _, _ := strings.Cut(strings.TrimPrefix(uri, "raspi://metrics/"), "?")
		if _, err := series.Lookup(name); err != nil {
			return resourceError(errf(CodeInvalidArgument, "no metric %q to subscribe to", name).with("uri", uri).
				hint("complete raspi://metrics/{metric} for the names"))
		}
	default:
		return resourceError(errf(CodeInvalidArgument, "%s cannot be subscribed to", uri).with("uri", uri).
			hint(fmt.Sprintf("subscribe to %s, %s or raspi://metrics/{metric}", uriSummary, uriHealth)))
	}
	if derr := Decide(a.conf(), p, a.rule(id), Guard{}, false); derr != nil {
		a.auditRead(p, "resources.subscribe", derr)
		return resourceError(derr)
	}
	a.updates.mu.Lock()
	a.updates.subs[uri]++
	a.updates.mu.Unlock()
	return nil
}

func (a *Agent) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	a.updates.mu.Lock()
	defer a.updates.mu.Unlock()
	if n := a.updates.subs[req.Params.URI]; n > 1 {
		a.updates.subs[req.Params.URI] = n - 1
	} else {
		delete(a.updates.subs, req.Params.URI)
	}
	return nil
}
