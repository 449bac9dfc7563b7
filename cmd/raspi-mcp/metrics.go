package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// cmdMetrics prints a sparkline per metric for a person at the console.
func cmdMetrics(args []string) error {
	c := newCommand("metrics", "[--dir DIR] [--hours H] [--metrics LIST] [--width N]",
		"a small chart per metric of the last hours, with min, max and the last value in its unit")
	var w where
	w.flags(c.fs)
	hours := c.fs.Float64("hours", 6, "how many `H`ours back (up to 168)")
	names := c.fs.String("metrics", "cpu_percent,cpu_temperature_celsius,memory_percent,load1", "comma-separated metric names (`LIST`)")
	width := c.fs.Int("width", 60, "`N` characters per chart")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return c.wrongArgs("metrics takes no arguments")
	}
	if *hours <= 0 || *hours > 168 || *width < 10 || *width > 400 {
		return c.wrongArgs("--hours must be in (0, 168] and --width in [10, 400]")
	}
	span := time.Duration(*hours * float64(time.Hour))
	res := (span / time.Duration(*width)).Round(time.Second)
	if res < 10*time.Second {
		res = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session(ctx, &w)
	if err != nil {
		return err
	}
	defer s.Close()
	end := time.Now().UTC()
	var h history
	_, err = callTool(ctx, s, "metrics_query_history", map[string]any{
		"metric_names": strings.Split(*names, ","), "start_time": end.Add(-span).Format(time.RFC3339), "end_time": end.Format(time.RFC3339),
		"resolution": res.String(), "aggregation": "max",
	}, &h)
	if err != nil {
		return err
	}
	step := h.step()
	if step <= 0 {
		step = res
	}
	start := end.Add(-span)
	fmt.Printf("last %s, one column per %s (max of each)\n", span, step)
	for _, se := range h.series() {
		fmt.Printf("%-24s %s\n", se.name, sparkline(se.points, se.name, start, step, *width))
	}
	return nil
}

// history is metrics_query_history's result in either of the shapes the
// agent has answered with: series[{metric, points: [[unix_s, v]]}], or the
// tool catalog's metrics{name: [{timestamp, value}]}.
type history struct {
	Resolution any `json:"resolution"` // "1m0s", "1m" or seconds
	Series     []struct {
		Metric string      `json:"metric"`
		Points [][]float64 `json:"points"`
	} `json:"series"`
	Metrics map[string][]struct {
		Timestamp any     `json:"timestamp"` // RFC 3339 or unix seconds
		Value     float64 `json:"value"`
	} `json:"metrics"`
}

func (h history) step() time.Duration {
	switch r := h.Resolution.(type) {
	case string:
		d, _ := time.ParseDuration(r)
		return d
	case float64:
		return time.Duration(r * float64(time.Second))
	}
	return 0
}

type point struct {
	t time.Time
	v float64
}

type named struct {
	name   string
	points []point
}

func (h history) series() []named {
	var out []named
	for _, s := range h.Series {
		n := named{name: s.Metric}
		for _, p := range s.Points {
			if len(p) == 2 {
				n.points = append(n.points, point{time.Unix(int64(p[0]), 0), p[1]})
			}
		}
		out = append(out, n)
	}
	for name, ps := range h.Metrics {
		n := named{name: name}
		for _, p := range ps {
			var t time.Time
			switch ts := p.Timestamp.(type) {
			case string:
				t, _ = time.Parse(time.RFC3339Nano, ts)
			case float64:
				t = time.Unix(int64(ts), 0)
			}
			n.points = append(n.points, point{t, p.Value})
		}
		out = append(out, n)
	}
	if len(h.Series) == 0 {
		sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	}
	return out
}

// unit is what a metric's value counts, from its name.
func unit(metric string) string {
	switch {
	case strings.HasSuffix(metric, "_percent"):
		return "%"
	case strings.HasSuffix(metric, "_celsius"):
		return "°C"
	case strings.HasSuffix(metric, "bytes_per_sec"):
		return "B/s"
	case strings.HasSuffix(metric, "_mbps"):
		return "Mbit/s"
	case strings.HasSuffix(metric, "_mb_per_sec"), strings.HasSuffix(metric, "mb_s"):
		return "MB/s"
	case strings.HasSuffix(metric, "_per_sec"), strings.HasSuffix(metric, "iops"):
		return "/s"
	case strings.HasSuffix(metric, "_mb"):
		return "MB"
	case strings.HasSuffix(metric, "_bytes"):
		return "B"
	case strings.HasSuffix(metric, "_seconds"):
		return "s"
	case strings.HasSuffix(metric, "_mhz"):
		return "MHz"
	case strings.HasSuffix(metric, "_volts"):
		return "V"
	}
	return "" // load averages, counts and flags have none
}

// withUnit formats v in metric's unit: "48.2 °C", "12 %", "0.52".
func withUnit(v float64, metric string) string {
	s := strconv.FormatFloat(v, 'g', 4, 64)
	if u := unit(metric); u != "" {
		s += " " + u
	}
	return s
}

// sparkline draws points into width columns; columns without data are
// blank. Fewer than two points make no chart: one sample is a value, not a
// line across the screen.
func sparkline(points []point, metric string, start time.Time, step time.Duration, width int) string {
	switch len(points) {
	case 0:
		return "(no data)"
	case 1:
		return fmt.Sprintf("%s at %s (one sample so far; the chart starts with the next)", withUnit(points[0].v, metric), points[0].t.Local().Format("15:04:05"))
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range points {
		lo, hi = math.Min(lo, p.v), math.Max(hi, p.v)
	}
	bars := []rune("▁▂▃▄▅▆▇█")
	cols := []rune(strings.Repeat(" ", width))
	for _, p := range points {
		i := int(p.t.Sub(start) / step)
		if i < 0 || i >= width {
			continue
		}
		k := 0
		if hi > lo {
			k = int((p.v - lo) / (hi - lo) * float64(len(bars)-1))
		}
		cols[i] = bars[k]
	}
	last := points[len(points)-1].v
	return fmt.Sprintf("%s  min %s  max %s  last %s", string(cols), withUnit(lo, metric), withUnit(hi, metric), withUnit(last, metric))
}
