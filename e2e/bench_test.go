package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkHealthSnapshotOverStdio measures the round trip a client sees:
// Go SDK client -> raspi-mcp stdio -> agent socket -> sysinfo -> back.
func BenchmarkHealthSnapshotOverStdio(b *testing.B) {
	s := startSim(b)
	cs := s.session(b)
	ctx := context.Background()
	for range 20 { // warm up
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "system_get_health_snapshot"}); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "system_get_health_snapshot"})
		lat = append(lat, time.Since(t0))
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50_µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99_µs")
}

// BenchmarkColdStart is the time from `raspi-mcp serve --sim` to the first
// successful `raspi-mcp status` (agent and helper both ready), and the idle
// RSS of both processes afterwards.
func BenchmarkColdStart(b *testing.B) {
	var agentRSS, helperRSS float64
	for i := range b.N {
		dir := b.TempDir()
		t0 := time.Now()
		cmd := exec.Command(raspi(), "serve", "--sim", "--dir", dir)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		for exec.Command(raspi(), "status", "--dir", dir).Run() != nil {
			if time.Since(t0) > 20*time.Second {
				b.Fatal("not ready")
			}
			time.Sleep(5 * time.Millisecond)
		}
		ready := time.Since(t0)
		b.ReportMetric(float64(ready.Milliseconds()), "ms_to_ready")
		if i == 0 {
			b.StopTimer()
			time.Sleep(2 * time.Second) // idle
			agentPID, helperPID := statusPIDs(b, dir)
			agentRSS, helperRSS = rssKB(agentPID), rssKB(helperPID)
			b.StartTimer()
		}
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}
	b.ReportMetric(agentRSS, "agent_rss_KiB")
	b.ReportMetric(helperRSS, "helper_rss_KiB")
}

func rssKB(pid int) float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}

// BenchmarkDiskWritesPerDay measures what the agent itself writes to disk
// (write_bytes of /proc/PID/io) during one flush interval with a 5 s
// sampling job and the default 60 s flush, and scales it to a day. It takes
// about two minutes: run it with -benchtime 1x.
func BenchmarkDiskWritesPerDay(b *testing.B) {
	dir := b.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(cfg, []byte("[metrics]\ndefault_interval = \"5s\"\nflush_interval = \"60s\"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		cmd := exec.Command(raspi(), "serve", "--sim", "--dir", filepath.Join(dir, "s"), "--config", cfg)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		pid := cmd.Process.Pid
		time.Sleep(65 * time.Second) // past the first flush
		w0 := ioWrites(pid)
		time.Sleep(60 * time.Second) // exactly one more flush of 12 samples
		w1 := ioWrites(pid)
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		b.ReportMetric(float64(w1-w0)*1440/1e6, "MB/day")
		b.ReportMetric(float64(w1-w0)/12, "B/sample")
	}
}

func ioWrites(pid int) int64 {
	data, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
