package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// One sample is a value in its unit, not a line across the screen; two or
// more are a chart whose min, max and last carry the unit.
func TestSparklineUnitsAndOneSample(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	one := sparkline([]point{{start.Add(30 * time.Second), 48.25}}, "cpu_temperature_celsius", start, time.Minute, 60)
	if !strings.HasPrefix(one, "48.25 °C at ") || strings.ContainsAny(one, "▁▂▃▄▅▆▇█") {
		t.Errorf("one sample: %q", one)
	}
	two := sparkline([]point{{start, 10}, {start.Add(5 * time.Minute), 30}}, "cpu_percent", start, time.Minute, 10)
	if !strings.HasPrefix(two, "▁    █    ") || !strings.Contains(two, "min 10 %  max 30 %  last 30 %") {
		t.Errorf("two samples: %q", two)
	}
	if got := withUnit(0.52, "load1"); got != "0.52" {
		t.Errorf("load has no unit: %q", got)
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
