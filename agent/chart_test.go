package agent

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/chart"
)

// chartSamples is 40 minutes of samples every 10 s: the temperature climbs
// from 45 to 63.9 °C, throttled for the last ten minutes, then ends at 50.
func chartSamples() []store.Sample {
	t0 := time.Now().UTC().Add(-45 * time.Minute)
	var s []store.Sample
	for i := range 240 {
		smp := store.Sample{Time: t0.Add(time.Duration(i) * 10 * time.Second), TempC: float32(45 + float64(i%190)/10), CPUPercent: 20, MemTotal: 100, MemUsed: 40, HasThrottle: true}
		if i >= 180 {
			smp.Throttle = 0x4 | 0x40000
		}
		s = append(s, smp)
	}
	s[len(s)-1].TempC = 50
	return s
}

// chartImage is the result's image block, decoded.
func chartImage(t *testing.T, res *mcp.CallToolResult) (w, h int) {
	t.Helper()
	for _, c := range res.Content {
		if im, ok := c.(*mcp.ImageContent); ok {
			if im.MIMEType != "image/png" {
				t.Fatalf("image block of %s", im.MIMEType)
			}
			img, err := png.Decode(bytes.NewReader(im.Data))
			if err != nil {
				t.Fatalf("the image block does not decode: %v", err)
			}
			return img.Bounds().Dx(), img.Bounds().Dy()
		}
	}
	t.Fatalf("no image block in %d blocks", len(res.Content))
	return 0, 0
}

// Through a real session as a reader: an image block that decodes at the
// asked size, and min, max and last from the samples, not the buckets.
func TestMetricsGetChart(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	id := putSeries(t, r, chartSamples())
	res := r.call(t, reader, "metrics_get_chart", map[string]any{"job_id": id, "hours": 1})
	out, e := decodeResult[metricsChartOut](t, res)
	if e != nil {
		t.Fatal(e)
	}
	if w, h := chartImage(t, res); w != 800 || h != 400 {
		t.Fatalf("image %dx%d, want 800x400", w, h)
	}
	if out.SizeBytes == 0 || out.MIMEType != "image/png" || out.Resolution != "10s" {
		t.Errorf("%+v", out)
	}
	if first, _, _ := strings.Cut(res.Content[0].(*mcp.TextContent).Text, "\n"); first != "800x400 PNG of the last 1 h: cpu_temperature_celsius 45..63.9°C (last 50); throttled 0..1 (last 1)" {
		t.Errorf("summary %q", first)
	}
	f := func(v float64) *float64 { return &v }
	diff(t, "series", []chartSeriesOut{
		{Metric: "cpu_temperature_celsius", Unit: "°C", Samples: 240, Points: 240, Min: f(45), Max: f(63.9), Last: f(50)},
		{Metric: "throttled", Unit: "1 = on", Samples: 240, Points: 240, Min: f(0), Max: f(1), Last: f(1)},
	}, out.Series)

	// A day at the default width is drawn in 5-minute buckets (the 40
	// minutes of samples fall in 8 or 9 of them); one metric is one panel.
	res = r.call(t, reader, "metrics_get_chart", map[string]any{"job_id": id, "metric_names": []string{"temperature"}})
	out, e = decodeResult[metricsChartOut](t, res)
	if e != nil {
		t.Fatal(e)
	}
	if w, h := chartImage(t, res); w != 800 || h != 400 || out.Resolution != "5m" || len(out.Series) != 1 || out.Series[0].Points < 8 || out.Series[0].Points > 9 || *out.Series[0].Max != 63.9 {
		t.Errorf("%dx%d %+v", w, h, out)
	}
}

// blockingChart holds every chart until released.
type blockingChart struct{ in, release chan struct{} }

func (b blockingChart) Render(ctx context.Context, _ *chart.Request) ([]byte, error) {
	b.in <- struct{}{}
	<-b.release
	return nil, context.Canceled
}

// Bad names are refused before anything is drawn; while one chart is
// drawn, a second is refused rather than queued; a missing renderer is
// unavailable.
func TestMetricsGetChartDenials(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	id := putSeries(t, r, chartSamples())
	for name, args := range map[string]map[string]any{
		"unknown metric": {"job_id": id, "metric_names": []string{"cpu_temperature_kelvin"}},
		"listed twice":   {"job_id": id, "metric_names": []string{"throttled", "throttled"}},
		"too many hours": {"job_id": id, "hours": 169},
		"a size":         {"job_id": id, "width": 1000},
		"five metrics":   {"job_id": id, "metric_names": []string{"cpu_percent", "load1", "load5", "load15", "throttled"}},
	} {
		_, e := callAs[metricsChartOut](t, r, reader, "metrics_get_chart", args)
		t.Run(name, func(t *testing.T) { wantErr(t, e, CodeInvalidArgument, nil) })
	}
	_, e := callAs[metricsChartOut](t, r, reader, "metrics_get_chart", map[string]any{"job_id": "job-nope"})
	wantErr(t, e, CodeNotFound, nil)

	b := blockingChart{in: make(chan struct{}), release: make(chan struct{})}
	r.a.charts.render = b
	done := make(chan *mcp.CallToolResult)
	go func() { res, _ := r.as(reader, "metrics_get_chart", map[string]any{"job_id": id}); done <- res }()
	<-b.in // the first chart is being drawn
	_, e = callAs[metricsChartOut](t, r, reader, "metrics_get_chart", map[string]any{"job_id": id})
	wantErr(t, e, CodeResourceExhausted, nil)
	close(b.release)
	<-done

	r.a.charts.render = chart.Unavailable("raspi-mcp-chart is not installed")
	_, e = callAs[metricsChartOut](t, r, reader, "metrics_get_chart", map[string]any{"job_id": id})
	wantErr(t, e, CodeUnavailable, nil)
}

// Through the real raspi-mcp-chart process, as a serving agent draws.
func TestMetricsGetChartThroughProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds raspi-mcp-chart")
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+"/", "../cmd/raspi-mcp-chart")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build raspi-mcp-chart: %v\n%s", err, out)
	}
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	id := putSeries(t, r, chartSamples())
	r.a.charts.render = chart.Process{Bin: filepath.Join(dir, "raspi-mcp-chart")}
	res := r.call(t, reader, "metrics_get_chart", map[string]any{"job_id": id, "hours": 2})
	if _, e := decodeResult[metricsChartOut](t, res); e != nil {
		t.Fatal(e)
	}
	if w, h := chartImage(t, res); w != 800 || h != 400 {
		t.Fatalf("image %dx%d", w, h)
	}
}
