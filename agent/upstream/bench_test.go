package upstream

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkCall measures one Call round trip (read tool, streamable HTTP,
// loopback) through the whole client: breaker, timeout, classification and
// the SDK. It reports the latency distribution, which matters more than the
// mean for a proxy in front of an interactive model.
func BenchmarkCall(b *testing.B) {
	for _, mode := range []string{"streamable", "stateless"} {
		b.Run(mode, func(b *testing.B) {
			h := startHTTPFake(b, mode, fakeConfig{})
			c := New(Options{Name: "bench", URL: h.URL()})
			runClient(b, c)
			waitUp(b, c)
			ctx := context.Background()
			args := map[string]any{"q": "x"}
			durs := make([]time.Duration, 0, 1024)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if _, err := c.Call(ctx, "read", args, CallOptions{ReadOnly: true}); err != nil {
					b.Fatal(err)
				}
				durs = append(durs, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(durs)
			pct := func(p float64) float64 {
				return float64(durs[int(p*float64(len(durs)-1))].Nanoseconds()) / 1e3
			}
			b.ReportMetric(pct(0.50), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
		})
	}
}
