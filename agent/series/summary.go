package series

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
)

// Stats summarises one metric over a window.
type Stats struct {
	Metric string
	Count  int
	Min    float64
	Avg    float64
	Max    float64
	P95    float64 // nearest-rank 95th percentile
	Last   float64
}

// StatsOf computes Stats of get over samples; Count 0 when there is no value.
func StatsOf(metric string, samples []store.Sample, get Getter) Stats {
	vals := make([]float64, 0, len(samples))
	st := Stats{Metric: metric}
	for _, s := range samples {
		if v, ok := get(s); ok {
			vals = append(vals, v)
			st.Last = v
		}
	}
	st.Count = len(vals)
	if st.Count == 0 {
		return st
	}
	sum := 0.0
	for _, v := range vals {
		sum += v
	}
	st.Avg = sum / float64(len(vals))
	sort.Float64s(vals)
	st.Min, st.Max = vals[0], vals[len(vals)-1]
	rank := int(math.Ceil(0.95*float64(len(vals)))) - 1
	st.P95 = vals[max(rank, 0)]
	return st
}

// Episode is a stretch of time a firmware flag was set.
type Episode struct {
	Kind  string // under_voltage, throttled, freq_capped, soft_temp_limit
	Start time.Time
	End   time.Time // the last sample that still showed it, or when it was found
	// Between is true when no sample saw the flag set: the firmware's
	// since-boot bit turned on between two samples, so the episode happened
	// somewhere in [Start, End].
	Between bool
	Samples int
}

var flags = []struct {
	kind      string
	now, ever uint
}{
	{"under_voltage", 0, 16}, {"freq_capped", 1, 17}, {"throttled", 2, 18}, {"soft_temp_limit", 3, 19},
}

// Episodes finds when each throttling flag was set. A gap longer than gap
// between samples ends an episode, since nothing is known in it.
func Episodes(samples []store.Sample, gap time.Duration) []Episode {
	var out []Episode
	for _, f := range flags {
		var (
			open *Episode
			prev *store.Sample
		)
		for i := range samples {
			s := &samples[i]
			if !s.ThrottleKnown(f.now) {
				continue
			}
			now := s.Throttle>>f.now&1 == 1
			if open != nil && (!now || (prev != nil && s.Time.Sub(prev.Time) > gap)) {
				out = append(out, *open)
				open = nil
			}
			switch {
			case now && open == nil:
				open = &Episode{Kind: f.kind, Start: s.Time, End: s.Time, Samples: 1}
			case now:
				open.End = s.Time
				open.Samples++
			case prev != nil && prev.ThrottleKnown(f.ever) && s.ThrottleKnown(f.ever) &&
				prev.Throttle>>f.ever&1 == 0 && s.Throttle>>f.ever&1 == 1 && s.Time.Sub(prev.Time) <= gap:
				out = append(out, Episode{Kind: f.kind, Start: prev.Time, End: s.Time, Between: true})
			}
			prev = s
		}
		if open != nil {
			out = append(out, *open)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// Anomaly is something a Pi owner would want to hear about.
type Anomaly struct {
	Metric    string
	Time      time.Time
	Value     float64
	Threshold float64
	Severity  int // higher is worse; used to rank
	Message   string
}

// threshold rules: a value at or above limit for at least run consecutive samples.
var rules = []struct {
	metric string
	limit  float64
	run    int
	sev    int
	what   string
}{
	{"cpu_temperature_celsius", 80, 1, 5, "CPU at %.1f°C: the firmware throttles from 80°C (soft limit) and 85°C"},
	{"memory_percent", 90, 3, 4, "memory %.0f%% used for several samples: risk of the OOM killer"},
	{"disk_percent", 90, 1, 4, "root file system %.0f%% full"},
	{"swap_percent", 50, 3, 3, "swap %.0f%% used: the SD card is being written as memory"},
	{"cpu_percent", 90, 3, 2, "CPU above 90%% for several samples (peak %.0f%%)"},
}

// Anomalies returns at most n anomalies, worst first: threshold rules, and
// isolated spikes more than four standard deviations above a metric's mean.
func Anomalies(samples []store.Sample, n int) []Anomaly {
	var out []Anomaly
	for _, r := range rules {
		get, _ := Lookup(r.metric)
		streak, peak, at := 0, 0.0, time.Time{}
		fire := func() {
			if streak >= r.run {
				out = append(out, Anomaly{Metric: r.metric, Time: at, Value: round(peak), Threshold: r.limit, Severity: r.sev, Message: fmt.Sprintf(r.what, peak)})
			}
			streak, peak = 0, 0
		}
		for _, s := range samples {
			v, ok := get(s)
			if !ok || v < r.limit {
				fire()
				continue
			}
			if streak == 0 || v > peak {
				peak, at = v, s.Time
			}
			streak++
		}
		fire()
	}
	for _, m := range []string{"cpu_percent", "cpu_temperature_celsius", "load1"} {
		get, _ := Lookup(m)
		st := StatsOf(m, samples, get)
		if st.Count < 30 {
			continue
		}
		var ss float64
		for _, s := range samples {
			if v, ok := get(s); ok {
				ss += (v - st.Avg) * (v - st.Avg)
			}
		}
		sd := math.Sqrt(ss / float64(st.Count))
		if sd == 0 {
			continue
		}
		for _, s := range samples {
			if v, ok := get(s); ok && v > st.Avg+4*sd {
				out = append(out, Anomaly{Metric: m, Time: s.Time, Value: round(v), Threshold: round(st.Avg + 4*sd), Severity: 1,
					Message: fmt.Sprintf("%s spike to %.1f (mean %.1f)", m, v, st.Avg)})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Severity != out[j].Severity {
			return out[i].Severity > out[j].Severity
		}
		return out[i].Value > out[j].Value
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}

func round(v float64) float64 { return math.Round(v*100) / 100 }
