package sysinfo

import (
	"math"
	"testing"
	"testing/fstest"
)

// FuzzParsers runs every /proc and /sys text parser over the same input: a
// kernel (or a fixture) may hand any of them anything. None may panic, and
// what they accept must be self-consistent: used memory within the total,
// CPU usage within 0..100, finite non-negative loads and uptime, a positive
// CPU count.
func FuzzParsers(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		s := string(data)
		if m, err := ParseMeminfo(data); err == nil {
			if m.Used() > m.MemTotal || m.Available() > max(m.MemTotal, m.MemAvailable) || m.SwapUsed() > m.SwapTotal {
				t.Fatalf("meminfo %+v: used %d, available %d, swap used %d", m, m.Used(), m.Available(), m.SwapUsed())
			}
		}
		if c, err := ParseStat(data); err == nil {
			for _, pair := range [][2]CPUTimes{{{}, c}, {c, c}} {
				pct, ok := CPUUsagePercent(pair[0], pair[1])
				if !ok || pct < 0 || pct > 100 || math.IsNaN(pct) {
					t.Fatalf("CPUUsagePercent(%+v, %+v) = %v, %v", pair[0], pair[1], pct, ok)
				}
			}
			if c.Busy() > c.Total() {
				t.Fatalf("busy %d above total %d", c.Busy(), c.Total())
			}
		}
		if l, err := ParseLoadavg(data); err == nil {
			for _, v := range []float64{l.Load1, l.Load5, l.Load15} {
				if !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("loadavg %+v", l)
				}
			}
		}
		if u, err := ParseUptime(data); err == nil && (!(u >= 0) || math.IsInf(u, 0)) {
			t.Fatalf("uptime %v", u)
		}
		_, _ = ParseCPUInfo(data)
		if kv, err := ParseOSRelease(data); err == nil {
			for k := range kv {
				if !validEnvKey(k) {
					t.Fatalf("os-release key %q accepted", k)
				}
			}
		}
		_, _ = ParseThrottled(s)
		if v, err := ParseVcgencmdTemp(s); err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("temperature %v", v)
		}
		_, _ = parseMilliCelsius(s)
		if n, err := parseCPUList(s); err == nil && (n <= 0 || n > 2<<20) {
			t.Fatalf("cpu list %q counted %d", s, n)
		}
		_, _ = ParseNetDev(data)
		_, _ = ParseDiskstats(data)
		if ms, err := ParseMounts(data); err == nil {
			for _, m := range ms {
				if m.Device == "" || m.Mountpoint == "" || m.Type == "" {
					t.Fatalf("mount with an empty field: %+v", m)
				}
			}
		}
	})
}

// FuzzLinuxTree swaps fuzzed contents into the Pi 4 fixture tree and reads
// it as the agent does: Basic, Health, Hardware and Counters may fail, but
// never panic, and what they return is self-consistent.
func FuzzLinuxTree(f *testing.F) {
	base := mapFixture(f, "pi4")
	f.Fuzz(func(t *testing.T, meminfo, stat, cpuinfo, thermal, throttled, netdev, diskstats, cpulist []byte) {
		root := fstest.MapFS{}
		for k, v := range base {
			root[k] = v
		}
		for name, data := range map[string][]byte{
			"proc/meminfo": meminfo, "proc/stat": stat, "proc/cpuinfo": cpuinfo,
			"sys/class/thermal/thermal_zone0/temp":                thermal,
			"sys/devices/platform/soc/soc:firmware/get_throttled": throttled,
			"proc/net/dev": netdev, "proc/diskstats": diskstats,
			"sys/devices/system/cpu/online": cpulist,
		} {
			if len(data) > 0 { // empty keeps the fixture's file
				root[name] = &fstest.MapFile{Data: data}
			}
		}
		clk := &fakeClock{t: t0}
		l := newFixture(root, "aarch64", 1<<34, 1<<33, clk, &fakeExec{})
		ctx := t.Context()
		if b, err := l.Basic(ctx); err == nil && b.CPUCores < 0 {
			t.Fatalf("basic %+v", b)
		}
		if h, err := l.Health(ctx); err == nil {
			if h.MemoryUsedBytes > h.MemoryTotalBytes || h.CPUUsagePercent < 0 || h.CPUUsagePercent > 100 {
				t.Fatalf("health %+v", h)
			}
		}
		_, _ = l.Hardware(ctx)
		_, _ = l.Counters(ctx)
	})
}
