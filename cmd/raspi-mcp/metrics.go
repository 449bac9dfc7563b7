package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// cmdMetrics prints a chart per metric for a person at the console: each
// column the highest sample of its stretch of time, scaled from the
// metric's true minimum (▁) to its true maximum (█), with min, max and last
// taken from the samples themselves, not from the columns.
func cmdMetrics(args []string) error {
	c := newCommand("metrics", "[--dir DIR] [--hours H] [--metrics LIST] [--width N]",
		"a chart per metric of the last hours, with min, max and the last value in its unit")
	var w where
	w.flags(c.fs)
	hours := c.fs.Float64("hours", 6, "how many `H`ours back (up to 168)")
	names := c.fs.String("metrics", "cpu_percent,cpu_temperature_celsius,memory_percent,load1", "comma-separated metric names (`LIST`)")
	width := c.fs.Int("width", 0, "`N` columns per chart (default: the terminal's width, else 80)")
	pos, err := c.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return c.wrongArgs("metrics takes no arguments")
	}
	if *hours <= 0 || *hours > 168 || (*width != 0 && (*width < 20 || *width > 400)) {
		return c.wrongArgs("--hours must be in (0, 168] and --width in [20, 400]")
	}
	o := stdoutOutput(80)
	if *width != 0 {
		o.width = *width
	}
	o.width = min(max(o.width, 20), 400)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session(ctx, &w)
	if err != nil {
		return err
	}
	defer s.Close()
	v, err := fetchMetrics(ctx, s, strings.Split(*names, ","), time.Duration(*hours*float64(time.Hour)), o.width, time.Now())
	if err != nil {
		return err
	}
	renderMetrics(os.Stdout, v, o, time.Local)
	return nil
}

// samplingJob is one entry of metrics_list_sampling_jobs.
type samplingJob struct {
	JobID           string `json:"job_id"`
	IntervalSeconds int    `json:"interval_seconds"`
	Default         bool   `json:"default"`
	Samples         int    `json:"samples"`
	FirstSample     string `json:"first_sample"`
	LastSample      string `json:"last_sample"`
}

// metricsView is what the metrics command shows: the window, its columns
// and each metric's chart and figures.
type metricsView struct {
	start, end time.Time
	step       time.Duration // one column's stretch
	job        samplingJob
	lastAt     time.Time // the job's newest sample, zero when none
	charts     []metricChart
}

// metricChart is one metric: the highest sample per column (NaN for a
// column without samples) and the window's true min, max and last.
type metricChart struct {
	name         string
	cols         []float64
	lo, hi, last float64
	ok           bool // any sample in the window
	oneSample    bool // the job has taken exactly one sample
}

// fetchMetrics asks the agent for the default job and, over the window, the
// per-column max (the chart), min and last of each metric: the minimum of
// the column minima is the true minimum, the maximum of the maxima the true
// maximum, and the last column's last the newest sample, whatever the
// column width.
func fetchMetrics(ctx context.Context, s *mcp.ClientSession, names []string, span time.Duration, width int, now time.Time) (metricsView, error) {
	var jobs struct {
		Jobs []samplingJob `json:"jobs"`
	}
	if _, err := callTool(ctx, s, "metrics_list_sampling_jobs", nil, &jobs); err != nil {
		return metricsView{}, err
	}
	v := metricsView{end: now.UTC().Truncate(time.Second)}
	for _, j := range jobs.Jobs {
		if j.Default {
			v.job = j
		}
	}
	v.start = v.end.Add(-span)
	v.step = chartStep(span, width, time.Duration(v.job.IntervalSeconds)*time.Second)
	v.lastAt, _ = time.Parse(time.RFC3339Nano, v.job.LastSample)
	query := func(agg string) (map[string][]point, time.Duration, error) {
		var h history
		_, err := callTool(ctx, s, "metrics_query_history", map[string]any{
			"metric_names": names, "start_time": v.start.Format(time.RFC3339), "end_time": v.end.Format(time.RFC3339),
			"resolution": v.step.String(), "aggregation": agg,
		}, &h)
		out := map[string][]point{}
		for _, se := range h.series() {
			out[se.name] = se.points
		}
		return out, h.step(), err
	}
	maxes, step, err := query("max")
	if err != nil {
		return v, err
	}
	if step > 0 {
		v.step = step // the agent coarsens what would exceed its point budget
	}
	mins, _, err := query("min")
	if err != nil {
		return v, err
	}
	lasts, _, err := query("last")
	if err != nil {
		return v, err
	}
	cols := int((v.end.Sub(v.start) + v.step - 1) / v.step)
	for _, n := range names {
		c := metricChart{name: n, cols: columns(maxes[n], v.start, v.step, min(cols, width))}
		c.lo, c.hi, c.last, c.ok = windowStats(mins[n], maxes[n], lasts[n])
		c.oneSample = v.job.Samples == 1
		v.charts = append(v.charts, c)
	}
	return v, nil
}

// chartStep is one column's stretch: the span over the width, in whole
// seconds, never finer than the job samples (a finer column would be empty
// more often than not).
func chartStep(span time.Duration, width int, interval time.Duration) time.Duration {
	step := (span + time.Duration(width) - 1) / time.Duration(width)
	step = ((step + time.Second - 1) / time.Second) * time.Second
	return max(step, interval, time.Second)
}

// columns places bucket points into n columns from start, step apart;
// columns without a point are NaN.
func columns(points []point, start time.Time, step time.Duration, n int) []float64 {
	cols := make([]float64, n)
	for i := range cols {
		cols[i] = math.NaN()
	}
	for _, p := range points {
		i := int(p.t.Sub(start) / step)
		if i >= 0 && i < n {
			cols[i] = p.v
		}
	}
	return cols
}

// windowStats is the window's true min, max and last from the buckets of
// the min, max and last aggregations; ok is false when there are none.
func windowStats(mins, maxes, lasts []point) (lo, hi, last float64, ok bool) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, p := range mins {
		lo = math.Min(lo, p.v)
	}
	for _, p := range maxes {
		hi = math.Max(hi, p.v)
	}
	if len(lasts) == 0 || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return 0, 0, 0, false
	}
	latest := lasts[0]
	for _, p := range lasts {
		if !p.t.Before(latest.t) {
			latest = p
		}
	}
	return lo, hi, latest.v, true
}

// renderMetrics prints v for a person, o.width columns wide, times in loc.
func renderMetrics(out io.Writer, v metricsView, o output, loc *time.Location) {
	W := o.width
	head := fmt.Sprintf("last %s, %s to %s: one column per %s, the highest sample in it; ▁ is each metric's min, █ its max",
		formatSpan(v.end.Sub(v.start)), v.start.In(loc).Format("15:04"), v.end.In(loc).Format("15:04"), formatSpan(v.step))
	for _, l := range wrapText(head, W) {
		fmt.Fprintln(out, o.paint(dim, l))
	}
	if v.job.JobID == "" {
		fmt.Fprintln(out, "no default sampling job: nothing is sampled (metrics_start_sampling_job starts one)")
	}
	drawn := 0 // the widest chart's columns, for the time axis under them
	for _, c := range v.charts {
		fmt.Fprintln(out)
		name := o.paint(bold, c.name)
		switch {
		case !c.ok:
			printLine(out, W, name, c.name, "no samples in this window")
			continue
		case c.oneSample:
			at := ""
			if !v.lastAt.IsZero() {
				at = " (at " + v.lastAt.In(loc).Format("15:04:05") + ")"
			}
			printLine(out, W, name, c.name, formatMetric(c.last, c.name)+", one sample so far"+at)
			continue
		}
		stats := fmt.Sprintf("min ▁ %s  max █ %s  last %s", formatMetric(c.lo, c.name), formatMetric(c.hi, c.name), formatMetric(c.last, c.name))
		printLine(out, W, name, c.name, stats)
		drawn = max(drawn, len(c.cols))
		var b strings.Builder
		for _, x := range c.cols {
			if math.IsNaN(x) {
				b.WriteByte(' ')
				continue
			}
			b.WriteRune(sparkRune(x, c.lo, c.hi))
		}
		fmt.Fprintln(out, o.paint(green, strings.TrimRight(b.String(), " ")))
	}
	if n := drawn; n > 0 {
		left, right := v.start.In(loc).Format("15:04"), v.end.In(loc).Format("15:04")
		fmt.Fprintln(out, o.paint(dim, left+strings.Repeat(" ", max(1, n-len(left)-len(right)))+right))
	}
}

// printLine prints a name (painted, and plain for measuring) and its text
// on one line of width w when they fit, the text right-aligned; else the
// text goes on indented lines below.
func printLine(out io.Writer, w int, painted, plain, text string) {
	nw, tw := len([]rune(plain)), len([]rune(text))
	if nw+2+tw <= w {
		fmt.Fprintf(out, "%s%s%s\n", painted, strings.Repeat(" ", w-nw-tw), text)
		return
	}
	fmt.Fprintln(out, painted)
	for _, l := range wrapText(text, w-2) {
		fmt.Fprintln(out, "  "+l)
	}
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
