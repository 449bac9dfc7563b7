package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
)

// BenchmarkSampleLinux is the CPU one sample costs on this machine: health
// from /proc and /sys plus network and disk counters and their rates.
func BenchmarkSampleLinux(b *testing.B) {
	// The clock moves 5 s per reading, as at a real interval, so the CPU
	// percentage comes from the previous reading instead of a 100 ms wait.
	clock := time.Now()
	now := func() time.Time { clock = clock.Add(5 * time.Second); return clock }
	s := newSampler(nil, sysinfo.NewLinux(sysinfo.LinuxOptions{Now: now}), config.Default().Metrics, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	_, prev, err := s.read(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_, prev, err = s.read(ctx, prev)
		if err != nil {
			b.Fatal(err)
		}
	}
}

// week builds a job with 7 days of 5 s samples (120,960), two interfaces and a disk.
func week(b *testing.B) (*rig, string, time.Time) {
	b.Helper()
	r := newRig(b, func(c *config.Config) { c.Metrics.DefaultJob = false })
	end := time.Now().UTC().Truncate(time.Minute)
	start := end.Add(-7 * 24 * time.Hour)
	j := store.Job{ID: "job-week", IntervalSeconds: 5, RetentionHours: 168, Status: "running", CreatedAt: start}
	if err := r.db.PutJob(j); err != nil {
		b.Fatal(err)
	}
	batch := make([]store.Sample, 0, 720)
	for i := 0; i < 120960; i++ {
		t := start.Add(time.Duration(i) * 5 * time.Second)
		x := float64(i)
		batch = append(batch, store.Sample{Time: t, CPUPercent: float32(20 + 10*math.Sin(x/500)), TempC: float32(55 + 5*math.Sin(x/3000)),
			FreqMHz: 1500, Load1: 0.8, MemTotal: 4 << 30, MemUsed: 1 << 30, MemAvail: 3 << 30, DiskTotal: 32 << 30, DiskUsed: 12 << 30,
			HasThrottle: true, Throttle: 0x50000,
			Net: []store.NetRate{{Name: "eth0", RxBytesPerSec: 50000, TxBytesPerSec: 6000, RxPacketsPerSec: 40, TxPacketsPerSec: 30},
				{Name: "wlan0", RxBytesPerSec: 1200, TxBytesPerSec: 300, RxPacketsPerSec: 3, TxPacketsPerSec: 2}},
			Disk: []store.DiskRate{{Name: "mmcblk0", WriteBytesPerSec: 20000, ReadBytesPerSec: 4000, WriteIOPS: 4, ReadIOPS: 1, BusyPercent: 2}}})
		if len(batch) == cap(batch) {
			if err := r.db.AppendSamples(j.ID, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	return r, j.ID, end
}

// benchTool calls one tool b.N times and reports the result's size.
func benchTool(b *testing.B, r *rig, name string, args map[string]any) {
	raw, _ := json.Marshal(args)
	t, _ := r.a.tools.Lookup(name)
	b.ResetTimer()
	for range b.N {
		out := r.a.invoke(context.Background(), t, &tool.Call{Principal: admin, CorrelationID: "b"}, raw)
		if out.IsError {
			b.Fatal(out.Content)
		}
		b.ReportMetric(float64(len(out.StructuredContent.(json.RawMessage))), "result_bytes")
	}
}

func benchQuery(b *testing.B, res string, metrics []string, span time.Duration) {
	r, id, end := week(b)
	benchTool(b, r, "metrics_query_history", map[string]any{"job_id": id, "metrics": metrics, "resolution": res,
		"start": end.Add(-span).Format(time.RFC3339), "end": end.Format(time.RFC3339)})
}

func BenchmarkQueryHistory7d1m(b *testing.B) {
	benchQuery(b, "1m", []string{"cpu_percent"}, 7*24*time.Hour)
}

func BenchmarkQueryHistory7d1h(b *testing.B) {
	benchQuery(b, "1h", []string{"cpu_percent", "cpu_temperature_celsius", "net.eth0.rx_bytes_per_sec"}, 7*24*time.Hour)
}

func BenchmarkQueryHistory24h5m(b *testing.B) {
	benchQuery(b, "5m", []string{"cpu_percent", "memory_percent"}, 24*time.Hour)
}

func BenchmarkGetSamples24h(b *testing.B) {
	r, id, end := week(b)
	benchTool(b, r, "metrics_get_samples", map[string]any{"job_id": id, "limit": 1000,
		"since": end.Add(-24 * time.Hour).Format(time.RFC3339), "until": end.Format(time.RFC3339)})
}

func BenchmarkSummary24h(b *testing.B) {
	r, id, _ := week(b)
	benchTool(b, r, "metrics_get_summary", map[string]any{"job_id": id, "window": "24h"})
}
