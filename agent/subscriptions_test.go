package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/config"
)

// polled is how many resources the watcher polls for: one entry per
// subscribed meaning, whatever strings named it and however many sessions
// hold it.
func polled(w *watcher) int {
	keys, _, _ := w.subscriptionCounts()
	return keys
}

// sessionsLeft is how many sessions the server still counts, so a test can
// wait until the agent has seen a client go.
func sessionsLeft(a *Agent) int {
	n := 0
	for range a.server.Sessions() {
		n++
	}
	return n
}

// sdkSubscribedURIs is how many URIs go-sdk's own map of subscribers keys:
// it forgets a session that ends but not the URIs, each an empty entry,
// unless the agent unsubscribes them. Read when nothing else runs.
func sdkSubscribedURIs(s *mcp.Server) int {
	return reflect.ValueOf(s).Elem().FieldByName("resourceSubscriptions").Len()
}

// Ten thousand query strings that mean the same metric are one
// subscription: one poll entry, and nothing of the strings kept.
func TestSubscribeKeyedByMeaning(t *testing.T) {
	r := newSimRig(t, nil)
	s := r.serveMany()(nil, "2025-11-25")
	ctx := context.Background()
	for i := range 10000 {
		uri := fmt.Sprintf("raspi://metrics/cpu_percent?x=%d", i)
		if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			// Refused beyond a bound is the other honest answer.
			if te := resErr(t, err); te.Code != CodeResourceExhausted {
				t.Fatalf("subscribe %s: %+v", uri, te)
			}
		}
	}
	if keys, subs, sessions := r.a.updates.subscriptionCounts(); keys != 1 || subs != 1 || sessions != 1 {
		t.Errorf("10,000 spellings of one metric keep %d poll entries, %d subscriptions in %d sessions, want 1 each", keys, subs, sessions)
	}
	// A URI that names nothing is refused as not found and keeps nothing.
	for _, u := range []string{"raspi://nothing/here", "raspi://metrics/cpu_percent?window=forever", "file:///etc/passwd"} {
		err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: u})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || (we.Code != -32002 && we.Code != -32602) {
			t.Errorf("subscribe %s: %v, want resource not found or invalid params", u, err)
		}
	}
	if keys, subs, _ := r.a.updates.subscriptionCounts(); keys != 1 || subs != 1 {
		t.Errorf("after refusals: %d poll entries, %d subscriptions, want 1", keys, subs)
	}
}

// An update reaches the session once, under the URI that means what it
// subscribed to, however it spelled it.
func TestUpdateNamesTheCanonicalURI(t *testing.T) {
	r := newSimRig(t, nil)
	updated := make(chan string, 10)
	s := r.serveMany()(&mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		updated <- req.Params.URI
	}}, "2025-11-25")
	ctx := context.Background()
	for _, u := range []string{"raspi://metrics/cpu_percent?resolution=60s&window=15m&x=1", "raspi://metrics/cpu%5Fpercent?window=900s"} {
		if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: u}); err != nil {
			t.Fatal(err)
		}
	}
	const key = "raspi://metrics/cpu_percent?window=15m"
	if n := polled(r.a.updates); n != 1 {
		t.Fatalf("%d poll entries, want 1", n)
	}
	r.a.updates.send(ctx, key)
	select {
	case u := <-updated:
		if u != key {
			t.Errorf("update names %s, want %s", u, key)
		}
		readText(t, s, u) // and it reads as it is
	case <-time.After(resHang):
		t.Fatal("no update")
	}
	// One update per change, not one per spelling.
	if err := s.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "raspi://metrics/cpu_percent?window=15m0s"}); err != nil {
		t.Fatal(err)
	}
	if n := polled(r.a.updates); n != 0 {
		t.Errorf("%d poll entries after unsubscribing, want 0", n)
	}
	select {
	case u := <-updated:
		t.Errorf("a second update %s for one change", u)
	default:
	}
}

func TestSubscriptionKey(t *testing.T) {
	for _, tc := range []struct{ uri, key, code string }{
		{uri: uriSummary, key: uriSummary},
		{uri: "raspi://health?x=1#top", key: uriHealth},
		{uri: "raspi://metrics/cpu_percent?x=1", key: "raspi://metrics/cpu_percent"},
		{uri: "raspi://metrics/cpu_percent?window=60m&resolution=1m", key: "raspi://metrics/cpu_percent"},
		{uri: "raspi://metrics/cpu_percent?window=90m&z=1&resolution=300s", key: "raspi://metrics/cpu_percent?resolution=5m&window=1h30m"},
		{uri: "raspi://metrics/cpu_percent?window=24h0m0s&resolution=1d", key: "raspi://metrics/cpu_percent?resolution=1d&window=24h"},
		{uri: "raspi://metrics/cpu%5Fpercent?window=90s", key: "raspi://metrics/cpu_percent?window=1m30s"},
		{uri: "raspi://metrics/net.eth0.bytes_sent_per_sec", key: "raspi://metrics/net.eth0.bytes_sent_per_sec"},
		{uri: "raspi://metrics/nonsense", code: CodeInvalidArgument},
		{uri: "raspi://metrics/cpu_percent?window=8d", code: CodeInvalidArgument},
		{uri: "raspi://metrics/cpu_percent?resolution=fast", code: CodeInvalidArgument},
		{uri: uriContract, code: CodeInvalidArgument},
		{uri: "raspi://service/nginx", code: CodeInvalidArgument},
		{uri: "hs4+http://lamp/1", code: CodeInvalidArgument},
		{uri: "raspi://nothing", code: CodeNotFound},
		{uri: "raspi://metrics/cpu_percent?x=" + strings.Repeat("a", 1024), code: CodeInvalidArgument},
	} {
		key, _, terr := subscriptionKey(tc.uri, 1024)
		switch {
		case tc.code != "" && (terr == nil || terr.Code != tc.code):
			t.Errorf("%.60s: key %q, error %+v, want %s", tc.uri, key, terr, tc.code)
		case tc.code == "" && (terr != nil || key != tc.key):
			t.Errorf("%s: key %q, error %+v, want %s", tc.uri, key, terr, tc.key)
		}
	}
}

// A 2026-07-28 client's listens are bounded as subscriptions are: the one
// over per_session fails and keeps nothing; all go with the session.
func TestListenBounded(t *testing.T) {
	r := newSimRig(t, func(c *config.Config) { c.Subscriptions.PerSession, c.Subscriptions.Total = 2, 3 })
	dial := r.serveMany()
	ctx := context.Background()
	s := dial(nil, "2026-07-28")
	for _, u := range []string{uriSummary, uriHealth, "raspi://metrics/cpu_percent", uriHealth + "?again"} {
		if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: u}); err != nil {
			t.Fatal(err)
		}
	}
	w := r.a.updates
	waitFor(t, "two subscriptions", resHang, func() bool { _, n, _ := w.subscriptionCounts(); return n == 2 })
	// Only the listens that were refused have ended; the rest stay open.
	s2 := dial(nil, "2026-07-28")
	for _, u := range []string{uriSummary, uriHealth} {
		if err := s2.Subscribe(ctx, &mcp.SubscribeParams{URI: u}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the total of three", resHang, func() bool { _, n, _ := w.subscriptionCounts(); return n == 3 })
	_ = s.Close()
	_ = s2.Close()
	waitFor(t, "every subscription to go", resHang, func() bool {
		keys, n, sessions := w.subscriptionCounts()
		return keys == 0 && n == 0 && sessions == 0
	})
}

// Over the per-session bound a subscribe is refused with resource_exhausted
// and keeps nothing; over the total bound, across sessions, the same.
func TestSubscriptionBounds(t *testing.T) {
	r := newSimRig(t, nil)
	dial := r.serveMany()
	ctx := context.Background()
	perSession, total := 32, 256 // the defaults ([subscriptions])
	// Distinct meanings: a window of i seconds is another resource.
	uri := func(i int) string { return fmt.Sprintf("raspi://metrics/cpu_percent?window=%ds", i) }
	s := dial(nil, "2025-11-25")
	for i := range perSession {
		if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(i + 1)}); err != nil {
			t.Fatalf("subscription %d of %d: %v", i+1, perSession, err)
		}
	}
	err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(perSession + 1)})
	te := resErr(t, err)
	if te.Code != CodeResourceExhausted || !strings.Contains(te.Message, "per_session") {
		t.Errorf("subscription %d of one session: %+v, want resource_exhausted naming per_session", perSession+1, te)
	}
	// The same meaning again is no new subscription, so not refused.
	if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(1) + "&x=again"}); err != nil {
		t.Errorf("a subscription the session already holds, spelled anew: %v", err)
	}
	if n := polled(r.a.updates); n != perSession {
		t.Errorf("%d poll entries after the refusal, want %d", n, perSession)
	}

	// Sessions take the rest of the total, each its own windows.
	next := perSession + 1
	for held := perSession; held < total; {
		s := dial(nil, "2025-11-25")
		for j := 0; j < perSession && held < total; j++ {
			if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(next)}); err != nil {
				t.Fatalf("subscription %d of %d in total: %v", held+1, total, err)
			}
			next++
			held++
		}
	}
	s2 := dial(nil, "2025-11-25")
	te = resErr(t, s2.Subscribe(ctx, &mcp.SubscribeParams{URI: uri(next)}))
	if te.Code != CodeResourceExhausted || !strings.Contains(te.Message, "total") {
		t.Errorf("subscription %d in total: %+v, want resource_exhausted naming total", total+1, te)
	}
	if n := polled(r.a.updates); n != total {
		t.Errorf("%d poll entries after the refusal, want %d", n, total)
	}
}

// A session that ends leaves no subscription behind, in either era, and a
// resource nobody holds any more is no longer polled.
func TestSubscriptionsReleasedWhenSessionEnds(t *testing.T) {
	for _, era := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(era, func(t *testing.T) {
			r := newSimRig(t, nil)
			w := r.a.updates
			w.every, w.gap = 20*time.Millisecond, 0
			dial := r.serveMany()
			ctx := context.Background()
			s := dial(nil, era)
			for _, u := range []string{uriSummary, uriHealth, "raspi://metrics/cpu_percent?window=15m"} {
				if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: u}); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "three subscriptions", resHang, func() bool { return polled(w) == 3 })
			waitFor(t, "the watcher's baseline", resHang, func() bool {
				w.mu.Lock()
				defer w.mu.Unlock()
				return w.primed
			})
			// The client leaves without unsubscribing.
			if err := s.Close(); err != nil {
				t.Log(err)
			}
			// The counts fall to 0 after the agent's unsubscribes in the
			// SDK, and the session leaves the server's list after a
			// listen's own: both are done when the SDK's map is read.
			waitFor(t, "the session's subscriptions to go", resHang, func() bool {
				keys, subs, sessions := w.subscriptionCounts()
				return keys == 0 && subs == 0 && sessions == 0 && sessionsLeft(r.a) == 0
			})
			if n := sdkSubscribedURIs(r.a.server); n != 0 {
				t.Errorf("the SDK still keys %d URIs after the session", n)
			}
			// Nobody subscribed: a pass reads nothing and forgets the baseline.
			w.tick(ctx, time.Now())
			w.mu.Lock()
			primed, left := w.primed, len(w.last)+len(w.pending)
			w.mu.Unlock()
			if primed || left != 0 {
				t.Errorf("after the session: primed %v, %d per-URI entries left", primed, left)
			}
		})
	}
}

// heapMiB is the live heap after a collection.
func heapMiB() float64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// The measured attack: 32 subscriptions of 1 MiB URIs, then the client
// leaves. Neither while it is there nor after does the agent keep the
// strings. The numbers go to the log (-v) for the record.
func TestSubscriptionAttackHeap(t *testing.T) {
	r := newSimRig(t, nil)
	dial := r.serveMany()
	ctx := context.Background()
	base := heapMiB()
	s := dial(nil, "2025-11-25")
	pad := strings.Repeat("a", 1<<20)
	refused := 0
	for i := range 32 {
		uri := fmt.Sprintf("raspi://metrics/cpu_percent?x=%d%s", i, pad)
		if err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			refused++
		}
	}
	pad = ""
	during := heapMiB()
	_ = s.Close()
	waitFor(t, "the agent to see the client go", resHang, func() bool {
		_, _, sessions := r.a.updates.subscriptionCounts()
		return sessions == 0 && sessionsLeft(r.a) == 0
	})
	after := heapMiB()
	t.Logf("heap: %.1f MiB before, %.1f MiB with the attacker (%d of 32 refused), %.1f MiB after it left; %d poll entries left",
		base, during, refused, after, polled(r.a.updates))
	if after-base > 8 {
		t.Errorf("the heap keeps %.1f MiB after the attacker left, want < 8", after-base)
	}
	if n := polled(r.a.updates); n != 0 {
		t.Errorf("%d poll entries after the attacker left, want 0", n)
	}
	if n := sdkSubscribedURIs(r.a.server); n != 0 {
		t.Errorf("the SDK keys %d URIs after the attacker left, want 0", n)
	}
}
