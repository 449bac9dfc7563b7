package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent"
	"github.com/raspi-mcp/raspi-mcp/agent/series"
)

// cmdMetrics prints a sparkline per metric for a person at the console.
func cmdMetrics(args []string) error {
	fs := flag.NewFlagSet("metrics", flag.ExitOnError)
	var w where
	w.flags(fs)
	hours := fs.Float64("hours", 6, "how many hours back")
	names := fs.String("metrics", "cpu_percent,cpu_temperature_celsius,memory_percent,load1", "comma-separated metric names")
	width := fs.Int("width", 60, "characters per chart")
	_ = fs.Parse(args)
	if *hours <= 0 || *hours > 168 || *width < 10 || *width > 400 {
		return &exitError{code: 2, msg: "--hours must be in (0, 168] and --width in [10, 400]"}
	}
	span := time.Duration(*hours * float64(time.Hour))
	res := (span / time.Duration(*width)).Round(time.Second)
	if res < 10*time.Second {
		res = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := session(ctx, w.agentSocket())
	if err != nil {
		return err
	}
	defer s.Close()
	end := time.Now().UTC()
	var h agent.HistoryOut
	_, err = callTool(ctx, s, "metrics_query_history", map[string]any{
		"metric_names": strings.Split(*names, ","), "start_time": end.Add(-span).Format(time.RFC3339), "end_time": end.Format(time.RFC3339),
		"resolution": res.String(), "aggregation": "max",
	}, &h)
	if err != nil {
		return err
	}
	fmt.Printf("last %s, job %s, one column per %s (max)\n", span, h.JobID, h.Resolution)
	step, _ := series.ParseResolution(h.Resolution)
	start, _ := time.Parse(time.RFC3339, h.StartTime)
	for _, name := range strings.Split(*names, ",") {
		var pts [][]float64
		for _, p := range h.Metrics[name] {
			if t, err := time.Parse(time.RFC3339, p.Timestamp); err == nil {
				pts = append(pts, []float64{float64(t.Unix()), p.Value})
			}
		}
		fmt.Printf("%-24s %s\n", name, sparkline(pts, start, step, *width))
	}
	return nil
}

// sparkline draws points into width columns; columns without data are blank.
func sparkline(points [][]float64, start time.Time, step time.Duration, width int) string {
	if len(points) == 0 {
		return "(no data)"
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range points {
		lo, hi = math.Min(lo, p[1]), math.Max(hi, p[1])
	}
	bars := []rune("▁▂▃▄▅▆▇█")
	cols := []rune(strings.Repeat(" ", width))
	for _, p := range points {
		i := int(time.Unix(int64(p[0]), 0).Sub(start) / step)
		if i < 0 || i >= width {
			continue
		}
		k := 0
		if hi > lo {
			k = int((p[1] - lo) / (hi - lo) * float64(len(bars)-1))
		}
		cols[i] = bars[k]
	}
	last := points[len(points)-1][1]
	return fmt.Sprintf("%s  min %.4g max %.4g last %.4g", string(cols), lo, hi, last)
}
