// Package series turns stored samples into what a model asks about: named
// metrics, downsampled series, and short summaries with episodes and
// anomalies. Everything here is a pure function over []store.Sample, so it is
// tested against hand-computed series.
package series

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
)

// Getter reads one metric from a sample; ok is false when the sample has no
// value (no sensor, interface absent).
type Getter func(s store.Sample) (v float64, ok bool)

func f32(v float32) (float64, bool) {
	if math.IsNaN(float64(v)) {
		return 0, false
	}
	return float64(v), true
}

func pct(part, total uint64) (float64, bool) {
	if total == 0 {
		return 0, false
	}
	return float64(part) / float64(total) * 100, true
}

func bit(n uint) Getter {
	return func(s store.Sample) (float64, bool) {
		if !s.ThrottleKnown(n) {
			return 0, false
		}
		return float64(s.Throttle >> n & 1), true
	}
}

// scalar metrics, by name. Aliases map to the same getter.
var scalars = map[string]Getter{
	"cpu_percent":             func(s store.Sample) (float64, bool) { return float64(s.CPUPercent), true },
	"cpu_frequency_mhz":       func(s store.Sample) (float64, bool) { return f32(s.FreqMHz) },
	"cpu_temperature_celsius": func(s store.Sample) (float64, bool) { return f32(s.TempC) },
	"load1":                   func(s store.Sample) (float64, bool) { return float64(s.Load1), true },
	"load5":                   func(s store.Sample) (float64, bool) { return float64(s.Load5), true },
	"load15":                  func(s store.Sample) (float64, bool) { return float64(s.Load15), true },
	"memory_percent":          func(s store.Sample) (float64, bool) { return pct(s.MemUsed, s.MemTotal) },
	"memory_used_bytes":       func(s store.Sample) (float64, bool) { return float64(s.MemUsed), s.MemTotal > 0 },
	"memory_available_bytes":  func(s store.Sample) (float64, bool) { return float64(s.MemAvail), s.MemTotal > 0 },
	"memory_total_bytes":      func(s store.Sample) (float64, bool) { return float64(s.MemTotal), s.MemTotal > 0 },
	"swap_used_bytes":         func(s store.Sample) (float64, bool) { return float64(s.SwapUsed), true },
	"swap_percent":            func(s store.Sample) (float64, bool) { return pct(s.SwapUsed, s.SwapTotal) },
	"disk_percent":            func(s store.Sample) (float64, bool) { return pct(s.DiskUsed, s.DiskTotal) },
	"disk_used_bytes":         func(s store.Sample) (float64, bool) { return float64(s.DiskUsed), s.DiskTotal > 0 },
	"disk_total_bytes":        func(s store.Sample) (float64, bool) { return float64(s.DiskTotal), s.DiskTotal > 0 },
	"under_voltage":           bit(0),
	"freq_capped":             bit(1),
	"throttled":               bit(2),
	"soft_temp_limit":         bit(3),
}

var aliases = map[string]string{
	"cpu_usage_percent":   "cpu_percent",
	"temperature_celsius": "cpu_temperature_celsius",
	"temperature":         "cpu_temperature_celsius",
	"memory_used_percent": "memory_percent",
}

// netFields are named as the health snapshot's network block names them
// (bytes_sent_per_sec, error_rate_percent, ...; spec 002 addendum §4.1); the
// first release's rx_/tx_ names stay as aliases.
var netFields = map[string]func(r store.NetRate) float64{
	"bytes_recv_per_sec":   func(r store.NetRate) float64 { return float64(r.RxBytesPerSec) },
	"bytes_sent_per_sec":   func(r store.NetRate) float64 { return float64(r.TxBytesPerSec) },
	"packets_recv_per_sec": func(r store.NetRate) float64 { return float64(r.RxPacketsPerSec) },
	"packets_sent_per_sec": func(r store.NetRate) float64 { return float64(r.TxPacketsPerSec) },
	"rx_errors_per_sec":    func(r store.NetRate) float64 { return float64(r.RxErrorsPerSec) },
	"tx_errors_per_sec":    func(r store.NetRate) float64 { return float64(r.TxErrorsPerSec) },
	"rx_drops_per_sec":     func(r store.NetRate) float64 { return float64(r.RxDropsPerSec) },
	"tx_drops_per_sec":     func(r store.NetRate) float64 { return float64(r.TxDropsPerSec) },
	// error_rate_percent and drop_rate_percent are errors and drops per packet,
	// both directions, in percent, as the snapshot reports them.
	"error_rate_percent": func(r store.NetRate) float64 {
		return ratio(r.RxErrorsPerSec+r.TxErrorsPerSec, r.RxPacketsPerSec+r.TxPacketsPerSec)
	},
	"drop_rate_percent": func(r store.NetRate) float64 {
		return ratio(r.RxDropsPerSec+r.TxDropsPerSec, r.RxPacketsPerSec+r.TxPacketsPerSec)
	},
}

var netAliases = map[string]string{
	"rx_bytes_per_sec": "bytes_recv_per_sec", "tx_bytes_per_sec": "bytes_sent_per_sec",
	"rx_packets_per_sec": "packets_recv_per_sec", "tx_packets_per_sec": "packets_sent_per_sec",
}

// totals are the sums over every interface or disk, as the snapshot's
// total_bandwidth_mbps (megabits per second) and disk_io.total (MB of 10^6
// bytes per second) give them.
var totals = map[string]Getter{
	"network.total_bandwidth_mbps.up":   netSum(func(r store.NetRate) float64 { return float64(r.TxBytesPerSec) * 8 / 1e6 }),
	"network.total_bandwidth_mbps.down": netSum(func(r store.NetRate) float64 { return float64(r.RxBytesPerSec) * 8 / 1e6 }),
	"disk_io.total.read_mb_per_sec":     diskSum(func(r store.DiskRate) float64 { return float64(r.ReadBytesPerSec) / 1e6 }),
	"disk_io.total.write_mb_per_sec":    diskSum(func(r store.DiskRate) float64 { return float64(r.WriteBytesPerSec) / 1e6 }),
}

func netSum(f func(store.NetRate) float64) Getter {
	return func(s store.Sample) (float64, bool) {
		v := 0.0
		for _, r := range s.Net {
			v += f(r)
		}
		return v, len(s.Net) > 0
	}
}

func diskSum(f func(store.DiskRate) float64) Getter {
	return func(s store.Sample) (float64, bool) {
		v := 0.0
		for _, r := range s.Disk {
			v += f(r)
		}
		return v, len(s.Disk) > 0
	}
}

var diskFields = map[string]func(r store.DiskRate) float64{
	"read_bytes_per_sec":  func(r store.DiskRate) float64 { return float64(r.ReadBytesPerSec) },
	"write_bytes_per_sec": func(r store.DiskRate) float64 { return float64(r.WriteBytesPerSec) },
	"read_iops":           func(r store.DiskRate) float64 { return float64(r.ReadIOPS) },
	"write_iops":          func(r store.DiskRate) float64 { return float64(r.WriteIOPS) },
	"busy_percent":        func(r store.DiskRate) float64 { return float64(r.BusyPercent) },
}

func ratio(a, b float32) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b) * 100
}

// Lookup returns the getter of a metric name: a scalar ("cpu_percent"), a
// total ("disk_io.total.write_mb_per_sec"), or per device
// "net.<iface>.<field>" / "disk.<device>.<field>", which may also be written
// as the snapshot's paths "network.interfaces.<iface>.<field>" and
// "disk_io.devices.<device>.<field>".
func Lookup(name string) (Getter, error) {
	if a, ok := aliases[name]; ok {
		name = a
	}
	if g, ok := scalars[name]; ok {
		return g, nil
	}
	if g, ok := totals[name]; ok {
		return g, nil
	}
	kind, rest, _ := strings.Cut(name, ".")
	switch kind {
	case "network":
		if r, ok := strings.CutPrefix(rest, "interfaces."); ok {
			kind, rest = "net", r
		}
	case "disk_io":
		if r, ok := strings.CutPrefix(rest, "devices."); ok {
			kind, rest = "disk", r
		}
	}
	// The field is after the last dot: interface names may hold dots (eth0.100).
	i := strings.LastIndex(rest, ".")
	if i <= 0 {
		return nil, fmt.Errorf("series: unknown metric %q", name)
	}
	dev, field := rest[:i], rest[i+1:]
	switch kind {
	case "net":
		if a, ok := netAliases[field]; ok {
			field = a
		}
		if f, ok := netFields[field]; ok {
			return func(s store.Sample) (float64, bool) {
				for _, r := range s.Net {
					if r.Name == dev {
						return f(r), true
					}
				}
				return 0, false
			}, nil
		}
	case "disk":
		if f, ok := diskFields[field]; ok {
			return func(s store.Sample) (float64, bool) {
				for _, r := range s.Disk {
					if r.Name == dev {
						return f(r), true
					}
				}
				return 0, false
			}, nil
		}
	}
	return nil, fmt.Errorf("series: unknown metric %q", name)
}

// Names lists every metric name a set of samples offers, device metrics
// included, for error messages and discovery.
func Names(samples []store.Sample) []string {
	seen := map[string]bool{}
	for n := range scalars {
		seen[n] = true
	}
	for _, s := range samples {
		if len(s.Net) > 0 {
			seen["network.total_bandwidth_mbps.up"], seen["network.total_bandwidth_mbps.down"] = true, true
		}
		if len(s.Disk) > 0 {
			seen["disk_io.total.read_mb_per_sec"], seen["disk_io.total.write_mb_per_sec"] = true, true
		}
		for _, r := range s.Net {
			for f := range netFields {
				seen["net."+r.Name+"."+f] = true
			}
		}
		for _, r := range s.Disk {
			for f := range diskFields {
				seen["disk."+r.Name+"."+f] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Aggregation folds the values of one bucket into a point.
type Aggregation string

// Aggregations.
const (
	Avg  Aggregation = "avg"
	Min  Aggregation = "min"
	Max  Aggregation = "max"
	Last Aggregation = "last"
)

// Point is one downsampled value at the start of its bucket.
type Point struct {
	Time  time.Time
	Value float64
}

// Downsample buckets samples (in time order) of [start, end) by resolution
// and folds each bucket. Buckets without a value produce no point, so gaps in
// the data stay visible as gaps instead of invented zeros.
func Downsample(samples []store.Sample, get Getter, start, end time.Time, res time.Duration, agg Aggregation) []Point {
	d := NewDownsampler(get, start, end, res, agg)
	for _, s := range samples {
		d.Add(s)
	}
	return d.Points()
}

// Downsampler is Downsample fed one sample at a time, in time order, so a
// seven-day query never holds its samples in memory.
type Downsampler struct {
	get        Getter
	start, end time.Time
	res        time.Duration
	agg        Aggregation
	out        []Point
	cur        int64
	sum, m, lv float64
	n          int
}

// NewDownsampler starts an empty downsampler.
func NewDownsampler(get Getter, start, end time.Time, res time.Duration, agg Aggregation) *Downsampler {
	return &Downsampler{get: get, start: start, end: end, res: res, agg: agg, cur: -1}
}

// Add folds one sample in.
func (d *Downsampler) Add(s store.Sample) {
	if s.Time.Before(d.start) || !s.Time.Before(d.end) {
		return
	}
	v, ok := d.get(s)
	if !ok {
		return
	}
	b := int64(s.Time.Sub(d.start) / d.res)
	if b != d.cur {
		d.flush()
		d.cur, d.sum, d.n = b, 0, 0
	}
	if d.n == 0 {
		d.m = v
	}
	switch {
	case d.agg == Min && v < d.m, d.agg == Max && v > d.m:
		d.m = v
	}
	d.sum += v
	d.lv = v
	d.n++
}

func (d *Downsampler) flush() {
	if d.n == 0 {
		return
	}
	v := d.lv
	switch d.agg {
	case Avg:
		v = d.sum / float64(d.n)
	case Min, Max:
		v = d.m
	}
	d.out = append(d.out, Point{Time: d.start.Add(time.Duration(d.cur) * d.res), Value: v})
	d.n = 0
}

// Points closes the last bucket and returns every point.
func (d *Downsampler) Points() []Point {
	d.flush()
	return d.out
}

// Steps are the resolutions a query is coarsened through when it would
// return too many points.
var Steps = []time.Duration{
	10 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
}

// Fit returns the finest resolution, at least res, at which series metrics
// over span stay within maxPoints in total.
func Fit(span, res time.Duration, series, maxPoints int) time.Duration {
	need := func(r time.Duration) int { return int((span+r-1)/r) * series }
	if need(res) <= maxPoints {
		return res
	}
	for _, s := range Steps {
		if s > res && need(s) <= maxPoints {
			return s
		}
	}
	return Steps[len(Steps)-1]
}

// FormatResolution writes a resolution the way ParseResolution reads it and
// people write it: 10s, 1m, 30m, 1h, 1d rather than Go's 1m0s.
func FormatResolution(d time.Duration) string {
	switch {
	case d >= 24*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// ParseResolution reads "10s", "1m", "5m", "1h" or "1d".
func ParseResolution(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		if _, err := fmt.Sscanf(d, "%d", &n); err == nil && n > 0 && n <= 7 && fmt.Sprint(n) == d {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	r, err := time.ParseDuration(s)
	if err != nil || r < time.Second || r > 7*24*time.Hour {
		return 0, fmt.Errorf("series: resolution %q: want a duration from 1s to 7d such as 10s, 1m, 5m, 1h", s)
	}
	return r, nil
}
