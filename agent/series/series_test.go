package series

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
)

var t0 = time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)

// at builds samples every 10 s with the given CPU values; NaN marks a gap
// (no sample at all in that slot).
func at(cpu ...float64) []store.Sample {
	var out []store.Sample
	for i, v := range cpu {
		if math.IsNaN(v) {
			continue
		}
		out = append(out, store.Sample{Time: t0.Add(time.Duration(i) * 10 * time.Second), CPUPercent: float32(v),
			MemTotal: 1000, MemUsed: uint64(100 * (i%5 + 1)), TempC: float32(math.NaN())})
	}
	return out
}

func TestDownsampleByHand(t *testing.T) {
	nan := math.NaN()
	// 10 s samples: minute 0 = 10,20,30,40,50,60; minute 1 = gap; minute 2 = 5, 7.
	s := at(10, 20, 30, 40, 50, 60, nan, nan, nan, nan, nan, nan, 5, 7)
	cpu, _ := Lookup("cpu_percent")
	end := t0.Add(3 * time.Minute)
	for _, tc := range []struct {
		agg  Aggregation
		want []float64
	}{
		{Avg, []float64{35, 6}},
		{Min, []float64{10, 5}},
		{Max, []float64{60, 7}},
		{Last, []float64{60, 7}},
	} {
		got := Downsample(s, cpu, t0, end, time.Minute, tc.agg)
		if len(got) != 2 || got[0].Time != t0 || got[1].Time != t0.Add(2*time.Minute) {
			t.Fatalf("%s: buckets %v (the empty minute must stay a gap)", tc.agg, got)
		}
		if got[0].Value != tc.want[0] || got[1].Value != tc.want[1] {
			t.Errorf("%s: got %v, want %v", tc.agg, got, tc.want)
		}
	}
	// Range bounds: start inclusive, end exclusive.
	got := Downsample(s, cpu, t0.Add(10*time.Second), t0.Add(30*time.Second), 10*time.Second, Avg)
	if len(got) != 2 || got[0].Value != 20 || got[1].Value != 30 {
		t.Fatalf("bounds: %v", got)
	}
	// memory_percent is derived: used/total*100 = 10,20,...
	mem, _ := Lookup("memory_percent")
	got = Downsample(s[:2], mem, t0, end, time.Minute, Avg)
	if len(got) != 1 || got[0].Value != 15 {
		t.Fatalf("memory_percent: %v", got)
	}
	// A metric with no values (temperature NaN) gives no points.
	temp, _ := Lookup("temperature")
	if got := Downsample(s, temp, t0, end, time.Minute, Avg); len(got) != 0 {
		t.Fatalf("absent sensor produced %v", got)
	}
}

func TestLookupDeviceMetrics(t *testing.T) {
	s := store.Sample{Net: []store.NetRate{{Name: "eth0", RxBytesPerSec: 1000, RxPacketsPerSec: 90, TxPacketsPerSec: 10, RxErrorsPerSec: 1, RxDropsPerSec: 2}},
		Disk: []store.DiskRate{{Name: "mmcblk0", WriteBytesPerSec: 4096, BusyPercent: 12.5}}}
	for name, want := range map[string]float64{
		"net.eth0.rx_bytes_per_sec":        1000,
		"net.eth0.error_rate_percent":      1,
		"net.eth0.drop_rate_percent":       2,
		"disk.mmcblk0.write_bytes_per_sec": 4096,
		"disk.mmcblk0.busy_percent":        12.5,
		// The health snapshot's names and paths (network.interfaces.*, disk_io.devices.*).
		"net.eth0.bytes_recv_per_sec":                 1000,
		"net.eth0.packets_sent_per_sec":               10,
		"network.interfaces.eth0.bytes_recv_per_sec":  1000,
		"disk_io.devices.mmcblk0.write_bytes_per_sec": 4096,
		"network.total_bandwidth_mbps.down":           0.008,
		"disk_io.total.write_mb_per_sec":              0.004096,
	} {
		g, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := g(s); !ok || v != want {
			t.Errorf("%s = %v %v, want %v", name, v, ok, want)
		}
	}
	g, _ := Lookup("net.wlan0.rx_bytes_per_sec")
	if _, ok := g(s); ok {
		t.Error("absent interface reported a value")
	}
	for _, bad := range []string{"cpu", "net.eth0.nope", "net..rx_bytes_per_sec", "disk.sda", "foo.bar.baz", "network.interfaces.eth0", "disk_io.total.nope"} {
		if _, err := Lookup(bad); err == nil {
			t.Errorf("Lookup(%q) accepted", bad)
		}
	}
	names := Names([]store.Sample{s})
	if !contains(names, "net.eth0.tx_drops_per_sec") || !contains(names, "disk.mmcblk0.read_iops") || !contains(names, "cpu_percent") ||
		!contains(names, "net.eth0.bytes_sent_per_sec") || contains(names, "net.eth0.tx_bytes_per_sec") || !contains(names, "disk_io.total.read_mb_per_sec") {
		t.Fatalf("names: %v", names)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestFitAndResolution(t *testing.T) {
	week := 7 * 24 * time.Hour
	if got := Fit(week, time.Hour, 1, 2000); got != time.Hour {
		t.Errorf("1h over a week for 1 metric: %s", got)
	}
	if got := Fit(week, time.Minute, 1, 2000); got != 15*time.Minute {
		t.Errorf("1m over a week coarsened to %s, want 15m (672 points)", got)
	}
	if got := Fit(week, time.Minute, 3, 2000); got != 30*time.Minute {
		t.Errorf("3 metrics over a week: %s, want 30m (15m would be 2016 points)", got)
	}
	if got := Fit(24*time.Hour, 10*time.Second, 1, 2000); got != time.Minute {
		t.Errorf("24h at 10s: %s", got)
	}
	for in, want := range map[string]time.Duration{"10s": 10 * time.Second, "1m": time.Minute, "1h": time.Hour, "1d": 24 * time.Hour} {
		if got, err := ParseResolution(in); err != nil || got != want {
			t.Errorf("%s: %v %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "0s", "500ms", "8d", "x", "-1m", "1.5d"} {
		if _, err := ParseResolution(bad); err == nil {
			t.Errorf("ParseResolution(%q) accepted", bad)
		}
	}
}

func TestStatsP95(t *testing.T) {
	var vals []float64
	for i := 1; i <= 100; i++ {
		vals = append(vals, float64(i))
	}
	st := StatsOf("cpu_percent", at(vals...), mustLookup("cpu_percent"))
	want := Stats{Metric: "cpu_percent", Count: 100, Min: 1, Avg: 50.5, Max: 100, P95: 95, Last: 100}
	if st != want {
		t.Fatalf("got %+v want %+v", st, want)
	}
	if st := StatsOf("temperature", at(1, 2), mustLookup("temperature")); st.Count != 0 {
		t.Fatalf("%+v", st)
	}
}

func mustLookup(n string) Getter {
	g, err := Lookup(n)
	if err != nil {
		panic(err)
	}
	return g
}

func thr(min int, bits uint32) store.Sample {
	return store.Sample{Time: t0.Add(time.Duration(min) * time.Minute), HasThrottle: true, Throttle: bits}
}

func TestEpisodes(t *testing.T) {
	s := []store.Sample{
		thr(0, 0), thr(1, 0x1|0x10000), thr(2, 0x1|0x10000), thr(3, 0x10000), // under-voltage 1..2
		thr(4, 0x10000|0x40000),                   // throttled happened between 3 and 4, never seen
		thr(5, 0x4|0x50000), thr(30, 0x4|0x50000), // throttled at 5, then a 25 min gap
	}
	got := Episodes(s, 5*time.Minute)
	want := []Episode{
		{Kind: "under_voltage", Start: t0.Add(time.Minute), End: t0.Add(2 * time.Minute), Samples: 2},
		{Kind: "throttled", Start: t0.Add(3 * time.Minute), End: t0.Add(4 * time.Minute), Between: true},
		{Kind: "throttled", Start: t0.Add(5 * time.Minute), End: t0.Add(5 * time.Minute), Samples: 1},
		{Kind: "throttled", Start: t0.Add(30 * time.Minute), End: t0.Add(30 * time.Minute), Samples: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestAnomalies(t *testing.T) {
	s := at(10, 10, 95, 96, 97, 10)
	s[1].TempC = 83
	s[5].MemUsed, s[5].MemTotal = 950, 1000
	got := Anomalies(s, 5)
	if len(got) != 2 || got[0].Metric != "cpu_temperature_celsius" || got[0].Value != 83 || got[1].Metric != "cpu_percent" || got[1].Value != 97 {
		t.Fatalf("%+v", got)
	}
	// One sample at 95% memory is not "sustained".
	for _, a := range got {
		if a.Metric == "memory_percent" {
			t.Fatal("single memory sample flagged")
		}
	}
	// Spikes: 40 quiet samples and one outlier.
	vals := make([]float64, 41)
	for i := range vals {
		vals[i] = 5 + float64(i%3)
	}
	vals[20] = 60
	got = Anomalies(at(vals...), 3)
	if len(got) != 1 || got[0].Metric != "cpu_percent" || got[0].Value != 60 || got[0].Time != t0.Add(200*time.Second) {
		t.Fatalf("spike: %+v", got)
	}
}

func TestFormatResolutionRoundTrips(t *testing.T) {
	for _, d := range append(Steps, 90*time.Second, time.Second, 2*24*time.Hour) {
		s := FormatResolution(d)
		back, err := ParseResolution(s)
		if err != nil || back != d {
			t.Errorf("%v -> %q -> %v, %v", d, s, back, err)
		}
	}
	if FormatResolution(time.Minute) != "1m" || FormatResolution(90*time.Second) != "90s" || FormatResolution(24*time.Hour) != "1d" {
		t.Error("not the spec's spelling")
	}
}
