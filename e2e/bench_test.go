package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/internal/iostat"
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
// (/proc/PID/io: write_bytes, the pages sent towards the card, and wchar,
// the bytes passed to write(2)) over one whole flush interval with a 5 s
// sampling job, and scales it to a day. The interval is
// RASPI_BENCH_FLUSH (default 60s: the default 45m would take an hour and a
// half); BenchmarkFlushIntervalCurve in agent/store gives the whole curve.
// With TMPDIR on a file system of its own and RASPI_BENCH_BLOCKDEV naming
// its device, it also reports what reached the device (dev_MB/day).
// Run it with -benchtime 1x.
func BenchmarkDiskWritesPerDay(b *testing.B) {
	flush := 60 * time.Second
	if v := os.Getenv("RASPI_BENCH_FLUSH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("RASPI_BENCH_FLUSH: %v", err)
		}
		flush = d
	}
	dir := b.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(cfg, []byte("[metrics]\ndefault_interval = \"5s\"\nflush_interval = \""+flush.String()+"\"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		cmd := exec.Command(raspi(), "serve", "--sim", "--dir", filepath.Join(dir, "s"), "--config", cfg)
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		pid := cmd.Process.Pid
		time.Sleep(flush + 5*time.Second) // past the first flush
		d0, devOK := iostat.DeviceWritten(b)
		w0, c0 := ioWrites(pid), ioField(pid, "wchar")
		time.Sleep(flush) // exactly one more flush
		w1, c1 := ioWrites(pid), ioField(pid, "wchar")
		d1, _ := iostat.DeviceWritten(b)
		alive := cmd.Process.Signal(syscall.Signal(0)) == nil
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		// An agent that refused its config or died writes nothing: that is
		// a failed run, not a figure.
		if !alive || w1 <= w0 {
			b.Fatalf("the agent wrote %d bytes in a flush interval (running: %v); its output:\n%s", w1-w0, alive, out.String())
		}
		perDay := float64(24*time.Hour) / float64(flush)
		b.ReportMetric(float64(w1-w0)*perDay/1e6, "MB/day")
		b.ReportMetric(float64(c1-c0)*perDay/1e6, "wchar_MB/day")
		b.ReportMetric(float64(w1-w0), "B/flush")
		b.ReportMetric(float64(c1-c0), "wchar_B/flush")
		if devOK {
			b.ReportMetric(float64(d1-d0)*perDay/1e6, "dev_MB/day")
			b.ReportMetric(float64(d1-d0), "dev_B/flush")
		}
	}
}

// BenchmarkAuditedCallWrites is what one audited tool call makes the agent
// write: /proc/PID/io across b.N calls of a cheap tool over stdio, with
// [audit] record_reads on so each call writes its durable record, per call
// (the sampler's 45 min flush does not fall inside a short run).
func BenchmarkAuditedCallWrites(b *testing.B) {
	dir := b.TempDir()
	cfg := filepath.Join(dir, "c.toml")
	if err := os.WriteFile(cfg, []byte("[audit]\nrecord_reads = true\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	s := startSimIn(b, filepath.Join(dir, "s"), "--config", cfg)
	cs := s.session(b)
	ctx := context.Background()
	call := func() {
		if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "system_get_basic_info"}); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		call()
	}
	pid := s.cmd.Process.Pid
	w0, c0 := ioWrites(pid), ioField(pid, "wchar")
	b.ResetTimer()
	for range b.N {
		call()
	}
	b.StopTimer()
	w1, c1 := ioWrites(pid), ioField(pid, "wchar")
	b.ReportMetric(float64(w1-w0)/float64(b.N), "disk_B/call")
	b.ReportMetric(float64(c1-c0)/float64(b.N), "wchar_B/call")
}

func ioWrites(pid int) int64 { return ioField(pid, "write_bytes") }

func ioField(pid int, field string) int64 {
	n, _ := iostat.Proc(strconv.Itoa(pid), field)
	return n
}
