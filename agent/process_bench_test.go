package agent

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/hw/procs"
)

// listConcurrently runs callers goroutines that each make calls
// process_list_processes calls one after the other, and returns every
// call's latency. The calls go straight through the tool pipeline, as each
// MCP session's would.
func listConcurrently(b *testing.B, r *rig, callers, calls int) []time.Duration {
	b.Helper()
	t, _ := r.a.tools.Lookup("process_list_processes")
	raw, _ := json.Marshal(map[string]any{"limit": 20})
	lat := make([]time.Duration, callers*calls)
	var wg sync.WaitGroup
	var failed sync.Once
	for c := range callers {
		wg.Go(func() {
			for k := range calls {
				start := time.Now()
				out := r.a.invoke(context.Background(), t, &tool.Call{Principal: admin, CorrelationID: "b"}, raw)
				lat[c*calls+k] = time.Since(start)
				if out.IsError {
					failed.Do(func() { b.Error(out.Content[0].(*mcp.TextContent).Text) })
				}
			}
		})
	}
	wg.Wait()
	return lat
}

// quantile is the q-th quantile (0..1) of sorted durations, in ms.
func quantile(sorted []time.Duration, q float64) float64 {
	i := min(int(q*float64(len(sorted))), len(sorted)-1)
	return float64(sorted[i]) / float64(time.Millisecond)
}

// BenchmarkProcessListConcurrent is a crowd of callers: 50 sessions making
// two process_list_processes calls each, from an agent that has no reading
// yet (the worst case: the first calls must wait out a whole CPU window).
// A caller must wait at most about one window (500 ms), however many come.
func BenchmarkProcessListConcurrent(b *testing.B) {
	r := newRig(b, nil)
	read := r.a.cpu.read
	var reads atomic.Int64
	r.a.cpu.read = func(ctx context.Context) (procs.Snapshot, error) { reads.Add(1); return read(ctx) }
	var all []time.Duration
	var wall time.Duration
	for b.Loop() {
		b.StopTimer()
		coldProcs(r)
		b.StartTimer()
		start := time.Now()
		all = append(all, listConcurrently(b, r, 50, 2)...)
		wall += time.Since(start)
	}
	slices.Sort(all)
	b.ReportMetric(quantile(all, 0.50), "p50_ms")
	b.ReportMetric(quantile(all, 0.99), "p99_ms")
	b.ReportMetric(quantile(all, 1), "max_ms")
	b.ReportMetric(float64(wall)/float64(time.Millisecond)/float64(b.N), "wall_ms/100calls")
	b.ReportMetric(float64(reads.Load())/float64(b.N), "proc_reads/100calls")
}

// BenchmarkProcessList20Ratio compares 20 concurrent process_list_processes
// calls with one call: concurrent callers must share one CPU window rather
// than queue for one each. "cold" times both from an agent with no reading
// yet, so each includes the 500 ms CPU window (once, 20 calls took 10 s: 20
// windows end to end); "warm" times
// them with kept readings, where no call waits and what is left is the
// per-call work of building and checking 20 results on this machine's cores.
func BenchmarkProcessList20Ratio(b *testing.B) {
	r := newRig(b, nil)
	var cold1, cold20, warm1, warm20 time.Duration
	timed := func(callers int, cold bool) time.Duration {
		if cold {
			b.StopTimer()
			coldProcs(r)
			b.StartTimer()
		}
		start := time.Now()
		listConcurrently(b, r, callers, 1)
		return time.Since(start)
	}
	for b.Loop() {
		cold1 += timed(1, true)
		cold20 += timed(20, true)
		warm1 += timed(1, false)
		warm20 += timed(20, false)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
	b.ReportMetric(ms(cold1), "cold_one_ms")
	b.ReportMetric(ms(cold20), "cold_twenty_ms")
	b.ReportMetric(float64(cold20)/float64(cold1), "cold_ratio")
	b.ReportMetric(ms(warm1), "warm_one_ms")
	b.ReportMetric(ms(warm20), "warm_twenty_ms")
	b.ReportMetric(float64(warm20)/float64(warm1), "warm_ratio")
}

// coldProcs forgets the agent's process readings, as at its start. The
// process tools hold the sampler itself, so it is emptied, not replaced.
func coldProcs(r *rig) {
	s := r.a.cpu
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept = nil
}
