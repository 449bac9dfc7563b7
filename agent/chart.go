package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/series"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/internal/chart"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// metricsChartIn is metrics.get_chart: which metrics and how far back. The
// picture is always chartWidth x chartHeight: a size is no choice a model
// makes well, and two parameters fewer are ~45 o200k tokens of every
// listing that shows the tool.
type metricsChartIn struct {
	MetricNames []string `json:"metric_names,omitempty" jsonschema:"one panel each; default temperature, throttled"`
	Hours       int      `json:"hours,omitempty"`
	JobID       string   `json:"job_id,omitempty"`
}

// The chart's size in pixels: legible in a chat window, ~30-60 KB of PNG.
const chartWidth, chartHeight = 800, 400

// metricsChartOut describes the chart; the PNG itself is the image content
// block (Content), not a field, so a model reads the numbers here and a
// client shows the picture.
type metricsChartOut struct {
	JobID      string           `json:"job_id"`
	StartTime  string           `json:"start_time"`
	EndTime    string           `json:"end_time"`
	Resolution string           `json:"resolution" jsonschema:"bucket size of the drawn lines (avg; max for flags)"`
	Series     []chartSeriesOut `json:"series"`
	Width      int              `json:"width"`
	Height     int              `json:"height"`
	MIMEType   string           `json:"mime_type"`
	SizeBytes  int              `json:"size_bytes"`
	image      []byte
}

// chartSeriesOut is one panel: min, max and last from the samples
// themselves, not from the drawn buckets.
type chartSeriesOut struct {
	Metric  string   `json:"metric"`
	Unit    string   `json:"unit,omitempty"`
	Samples int      `json:"samples"`
	Points  int      `json:"points" jsonschema:"drawn, one per bucket with samples"`
	Min     *float64 `json:"min,omitempty"`
	Max     *float64 `json:"max,omitempty"`
	Last    *float64 `json:"last,omitempty"`
}

// Content attaches the chart where clients show pictures.
func (o metricsChartOut) Content() []mcp.Content {
	return []mcp.Content{&mcp.ImageContent{Data: o.image, MIMEType: o.MIMEType}}
}

// defaultChart is what a person most often asks of a Pi's history: was it
// hot, and did it slow down because of it.
var defaultChart = []string{"cpu_temperature_celsius", "throttled"}

// flagMetrics are the firmware's 0/1 flags, drawn as steps from 0 to 1
// with each bucket's maximum, so one throttled sample shows.
var flagMetrics = map[string]bool{"under_voltage": true, "freq_capped": true, "throttled": true, "soft_temp_limit": true}

// chartTools draw metrics_get_chart's PNGs. The drawing runs in
// raspi-mcp-chart (Options.ChartRenderer), one at a time over the whole
// agent: a client that loops on the tool gets resource_exhausted while its
// chart is drawn, and holds at most one child process and one core.
type chartTools struct {
	sampler *sampler
	render  chart.Renderer
	turn    chan struct{}
}

func (a *Agent) registerChart(r chart.Renderer) {
	if r == nil {
		r = chart.Unavailable("raspi-mcp-chart is installed neither beside raspi-mcp nor in ../lib/raspi-mcp/")
	}
	a.charts = &chartTools{sampler: a.sampler, render: r, turn: make(chan struct{}, 1)}
	ct := a.charts
	tool.Add(a.tools, tool.Spec[metricsChartIn, metricsChartOut]{
		ID: "metrics.get_chart", Title: "Metrics chart",
		Description: "PNG chart of sampled metrics (default: temperature and throttling, 24 h), with min, max and last.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props: []tool.Prop{tool.P("metric_names", tool.MinItems(1), tool.MaxItems(chart.MaxSeries)), tool.P("hours", tool.Min(1), tool.Max(168), tool.Default(24)),
			tool.P("job_id", tool.MaxLen(64))},
		OutProps: []tool.Prop{tool.P("start_time", tool.Format("date-time")), tool.P("end_time", tool.Format("date-time"))},
		Slow:     true,
		Run:      ct.run,
		Summary:  chartLine,
	})
}

func (ct *chartTools) run(ctx context.Context, _ *tool.Call, in metricsChartIn) (metricsChartOut, error) {
	job, err := ct.sampler.resolveJob(in.JobID)
	if err != nil {
		return metricsChartOut{}, err
	}
	names := in.MetricNames
	if len(names) == 0 {
		names = defaultChart
	}
	getters := make([]series.Getter, len(names))
	for i, m := range names {
		if slices.Contains(names[:i], m) {
			return metricsChartOut{}, tool.Errf(CodeInvalidArgument, "metric %q is listed twice", m).With("parameter", "metric_names")
		}
		if getters[i], err = series.Lookup(m); err != nil {
			return metricsChartOut{}, tool.Errf(CodeInvalidArgument, "unknown metric %q", m).With("parameter", "metric_names").
				With("known_metrics", series.Names(ct.sampler.recent(job.ID, 5))).Hint("use a name from known_metrics")
		}
	}
	select {
	case ct.turn <- struct{}{}:
		defer func() { <-ct.turn }()
	default:
		return metricsChartOut{}, tool.Errf(CodeResourceExhausted, "another chart is being drawn; one at a time").
			Hint("call again in a few seconds; metrics_get_summary gives the numbers without a picture")
	}
	end := time.Now().Add(time.Second)
	start := end.Add(-time.Duration(in.Hours) * time.Hour)
	// About one point per two pixels across is as fine as a line can show.
	res := series.Fit(end.Sub(start), 10*time.Second, 1, min(chartWidth/2, chart.MaxPoints))
	req := chart.Request{Width: chartWidth, Height: chartHeight, Start: start.Unix(), End: end.Unix() + 1}
	out := metricsChartOut{JobID: job.ID, StartTime: start.UTC().Format(time.RFC3339), EndTime: end.UTC().Format(time.RFC3339),
		Resolution: series.FormatResolution(res), Width: chartWidth, Height: chartHeight, MIMEType: "image/png", Series: make([]chartSeriesOut, len(names))}
	ds := make([]*series.Downsampler, len(names))
	for i, g := range getters {
		agg := series.Avg
		if flagMetrics[names[i]] {
			agg = series.Max
		}
		ds[i] = series.NewDownsampler(g, start, end, res, agg)
		out.Series[i] = chartSeriesOut{Metric: names[i], Unit: unitOf(names[i])}
	}
	lo, hi, last := make([]float64, len(names)), make([]float64, len(names)), make([]float64, len(names))
	err = ct.sampler.Scan(job.ID, start, end, func(s store.Sample) bool {
		for i, g := range getters {
			ds[i].Add(s)
			v, ok := g(s)
			if !ok {
				continue
			}
			if out.Series[i].Samples == 0 || v < lo[i] {
				lo[i] = v
			}
			if out.Series[i].Samples == 0 || v > hi[i] {
				hi[i] = v
			}
			last[i] = v
			out.Series[i].Samples++
		}
		return true
	})
	if err != nil {
		return metricsChartOut{}, err
	}
	for i, d := range ds {
		pts := d.Points()
		cs := chart.Series{Name: names[i], Unit: out.Series[i].Unit, Times: make([]int64, len(pts)), Vals: make([]float64, len(pts))}
		for j, p := range pts {
			cs.Times[j], cs.Vals[j] = p.Time.Unix(), p.Value
		}
		if flagMetrics[names[i]] {
			zero, one := 0.0, 1.0
			cs.Min, cs.Max, cs.Step = &zero, &one, true
		}
		req.Series = append(req.Series, cs)
		so := &out.Series[i]
		so.Points = len(pts)
		if so.Samples > 0 {
			mn, mx, l := sig(lo[i]), sig(hi[i]), sig(last[i])
			so.Min, so.Max, so.Last = &mn, &mx, &l
		}
	}
	png, err := ct.render.Render(ctx, &req)
	if errors.Is(err, chart.ErrUnavailable) {
		return metricsChartOut{}, tool.Errf(CodeUnavailable, "%s", strings.TrimPrefix(err.Error(), "chart: ")).
			Hint("raspi-mcp-chart comes with the raspi-mcp package; metrics_query_history gives the same series as numbers")
	}
	if err != nil {
		return metricsChartOut{}, err
	}
	out.image, out.SizeBytes = png, len(png)
	return out, nil
}

// unitOf is a metric's unit, from the suffix its name carries.
func unitOf(name string) string {
	switch {
	case flagMetrics[name]:
		return "1 = on"
	case strings.HasSuffix(name, "_celsius"), name == "temperature":
		return "°C"
	case strings.HasSuffix(name, "_percent"):
		return "%"
	case strings.HasSuffix(name, "_mhz"):
		return "MHz"
	case strings.HasSuffix(name, "_mbps.up"), strings.HasSuffix(name, "_mbps.down"):
		return "Mbit/s"
	case strings.HasSuffix(name, "_mb_per_sec"):
		return "MB/s"
	case strings.HasSuffix(name, "bytes_per_sec"), strings.HasSuffix(name, "bytes_recv_per_sec"), strings.HasSuffix(name, "bytes_sent_per_sec"):
		return "B/s"
	case strings.HasSuffix(name, "_per_sec"):
		return "/s"
	case strings.HasSuffix(name, "_bytes"):
		return "B"
	}
	return ""
}

// chartLine says what the picture shows, for a client that shows none.
func chartLine(in metricsChartIn, o metricsChartOut) string {
	parts := make([]string, 0, len(o.Series))
	for _, s := range o.Series {
		if s.Samples == 0 {
			parts = append(parts, s.Metric+": no samples")
			continue
		}
		u := s.Unit
		if flagMetrics[s.Metric] {
			u = ""
		}
		parts = append(parts, fmt.Sprintf("%s %g..%g%s (last %g)", s.Metric, *s.Min, *s.Max, u, *s.Last))
	}
	return fmt.Sprintf("%dx%d PNG of the last %d h: %s", o.Width, o.Height, in.Hours, strings.Join(parts, "; "))
}
