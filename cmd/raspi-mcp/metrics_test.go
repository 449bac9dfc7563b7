package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/raspi-mcp/raspi-mcp/internal/tmuxtest"
)

// The bug: min and last taken from the columns' maxima. Six
// samples in two columns of three: the columns' maxima are 63 and 62, but
// the window's true min is 45.8 and its last sample 55.
func TestWindowStatsFromSamplesNotColumnMaxima(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	samples := []float64{45.8, 63, 50, 62, 47, 55}
	var mins, maxes, lasts []point
	for b := 0; b < 2; b++ {
		col := samples[3*b : 3*b+3]
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range col {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		at := t0.Add(time.Duration(b) * 6 * time.Minute)
		mins, maxes, lasts = append(mins, point{at, lo}), append(maxes, point{at, hi}), append(lasts, point{at, col[2]})
	}
	lo, hi, last, ok := windowStats(mins, maxes, lasts)
	if !ok || lo != 45.8 || hi != 63 || last != 55 {
		t.Errorf("min %v max %v last %v ok %v, want 45.8, 63, 55 (the columns' maxima say min 62, last 62)", lo, hi, last, ok)
	}
	if _, _, _, ok := windowStats(nil, nil, nil); ok {
		t.Error("no buckets: want not ok")
	}
	// The newest bucket is the last, whatever the order it came in.
	if _, _, last, _ := windowStats(mins, maxes, []point{lasts[1], lasts[0]}); last != 55 {
		t.Errorf("last %v, want 55 from the newest bucket", last)
	}
}

// One shared formatter: units after a space, no exponent, bytes scaled.
func TestFormatValue(t *testing.T) {
	for _, c := range []struct {
		v    float64
		unit string
		want string
	}{
		{10240, "B/s", "10.2 KB/s"}, // was 1.024e+04 B/s
		{512, "B/s", "512 B/s"},
		{2.5e6, "B/s", "2.5 MB/s"},
		{0.0276, "MB/s", "27.6 KB/s"},
		{48.3, "°C", "48.3 °C"},
		{45, "°C", "45.0 °C"},
		{37.4, "%", "37 %"},
		{5.76, "%", "5.8 %"},
		{0.52, "", "0.52"},
		{0.775, "", "0.775"},
		{1800, "MHz", "1800 MHz"},
		{4 << 30, "B", "4 GiB"},
		{1.5 * (1 << 30), "B", "1.5 GiB"},
		{32768, "B", "32 KiB"},
		{0, "", "0"},
		{math.NaN(), "%", "-"},
	} {
		if got := formatValue(c.v, c.unit); got != c.want {
			t.Errorf("formatValue(%v, %q) = %q, want %q", c.v, c.unit, got, c.want)
		}
	}
	if got := formatMetric(10240, "net.eth0.bytes_recv_per_sec"); got != "10.2 KB/s" {
		t.Errorf("net rate: %q", got)
	}
	if got := formatMetric(0.52, "load1"); got != "0.52" {
		t.Errorf("load has no unit: %q", got)
	}
	for d, want := range map[time.Duration]string{6 * time.Hour: "6h", 90 * time.Minute: "1h30m", 270 * time.Second: "4m30s", 10 * time.Second: "10s", 5 * time.Minute: "5m"} {
		if got := formatSpan(d); got != want {
			t.Errorf("formatSpan(%v) = %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{45 * time.Second: "45s", 12 * time.Minute: "12m", 3*time.Hour + 5*time.Minute: "3h 05m", 98 * time.Hour: "4d 2h"} {
		if got := formatUptime(d); got != want {
			t.Errorf("formatUptime(%v) = %q, want %q", d, got, want)
		}
	}
	if got := bar(0.5, 10); got != "█████░░░░░" {
		t.Errorf("bar(0.5) = %q", got)
	}
	if got := bar(0.31, 20); utf8.RuneCountInString(got) != 20 || !strings.HasPrefix(got, "██████▎░") {
		t.Errorf("bar(0.31, 20) = %q", got)
	}
}

// openssl's form of our fingerprint, for comparing by eye.
func TestOpensslFingerprint(t *testing.T) {
	ours := "sha256:16abed" + strings.Repeat("0f", 29)
	got, ok := opensslFingerprint(ours)
	if !ok || !strings.HasPrefix(got, "16:AB:ED:0F:0F:") || len(got) != 95 || strings.ToUpper(got) != got {
		t.Errorf("%q: %q %v", ours, got, ok)
	}
	for _, bad := range []string{"", "sha1:16ab", "sha256:16ab", "sha256:" + strings.Repeat("zz", 32)} {
		if _, ok := opensslFingerprint(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The chart reads metrics_query_history in either shape the agent has answered with.
func TestHistoryBothShapes(t *testing.T) {
	for _, js := range []string{
		`{"resolution":"1m0s","series":[{"metric":"cpu_percent","points":[[1800000000,5],[1800000060,7]]}]}`,
		`{"resolution":"1m","metrics":{"cpu_percent":[{"timestamp":"2027-01-15T08:00:00Z","value":5},{"timestamp":1800000060,"value":7}]}}`,
		`{"resolution":60,"metrics":{"cpu_percent":[{"timestamp":1800000000,"value":5},{"timestamp":1800000060,"value":7}]}}`,
	} {
		var h history
		if err := json.Unmarshal([]byte(js), &h); err != nil {
			t.Fatal(err)
		}
		s := h.series()
		if h.step() != time.Minute || len(s) != 1 || s[0].name != "cpu_percent" || len(s[0].points) != 2 || s[0].points[1].v != 7 {
			t.Errorf("%s: step %v series %+v", js, h.step(), s)
		}
	}
}

// A fixed view renders the same every time: the chart fills the width, the
// scale is named, one sample is a value with its own time (not its
// column's), and no line passes the width.
func TestRenderMetricsGolden(t *testing.T) {
	end := time.Date(2027, 1, 15, 14, 0, 0, 0, time.UTC)
	v := metricsView{start: end.Add(-6 * time.Hour), end: end, step: 270 * time.Second,
		job: samplingJob{JobID: "job-1", IntervalSeconds: 10, Default: true, Samples: 2160}, lastAt: end.Add(-7 * time.Second)}
	cols := make([]float64, 80)
	for i := range cols {
		cols[i] = 50 + 10*math.Sin(float64(i)/6)
	}
	cols[3], cols[4] = math.NaN(), math.NaN() // the agent was down
	net := make([]float64, 80)
	for i := range net {
		net[i] = 512 + float64(i*i)*1.5
	}
	v.charts = []metricChart{
		{name: "cpu_temperature_celsius", cols: cols, lo: 38.2, hi: 61.4, last: 52.04, ok: true},
		{name: "net.eth0.bytes_recv_per_sec", cols: net, lo: 512, hi: 10240, last: 2048, ok: true},
		{name: "memory_percent", ok: false},
	}
	var b strings.Builder
	renderMetrics(&b, v, output{width: 80}, time.UTC)
	one := metricsView{start: end.Add(-6 * time.Hour), end: end, step: 270 * time.Second, job: samplingJob{JobID: "job-1", Default: true, Samples: 1},
		lastAt: end.Add(-65 * time.Second), charts: []metricChart{{name: "cpu_percent", cols: make([]float64, 80), lo: 21, hi: 21, last: 21, ok: true, oneSample: true}}}
	b.WriteString("----\n")
	renderMetrics(&b, one, output{width: 80}, time.UTC)
	checkWidth(t, b.String(), 80)
	if !strings.Contains(b.String(), "21 %, one sample so far (at 13:58:55)") {
		t.Errorf("one sample: want its own time 13:58:55")
	}
	tmuxtest.Golden(t, "metrics-render.golden", b.String())
}

// checkWidth fails for every line wider than w columns.
func checkWidth(t *testing.T, text string, w int) {
	t.Helper()
	for i, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > w {
			t.Errorf("line %d is %d columns, more than %d: %q", i+1, n, w, l)
		}
	}
}
