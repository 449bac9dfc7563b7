package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/series"
	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/internal/identity"
)

// Answers stay far below the 25,000-token budget of MCP clients.
const (
	maxPoints       = 1000     // query_history: points over all series (about 15 tokens each)
	maxSampleBytes  = 48 << 10 // get_samples: JSON bytes of one page
	maxQueryMetrics = 10
	maxQuerySpan    = 8 * 24 * time.Hour
)

// samplingStartIn is metrics.start_sampling_job: how often to sample and how long
// to keep the samples (tool catalog, spec 002 §4.2).
type samplingStartIn struct {
	IntervalSeconds int `json:"interval_seconds"`
	RetentionHours  int `json:"retention_hours,omitempty"`
	tool.GuardArgs
}

// samplingStopIn is metrics.stop_sampling_job: the job to stop (tool catalog, spec 002 §4.2).
type samplingStopIn struct {
	JobID string `json:"job_id"`
	tool.GuardArgs
}

// jobStatus is a sampling job's id, interval, retention and state, the result
// of starting or stopping one (the tool catalog's SamplingJobStatus, spec 002 §4.2).
type jobStatus struct {
	JobID           string `json:"job_id"`
	IntervalSeconds int    `json:"interval_seconds,omitempty"`
	RetentionHours  int    `json:"retention_hours,omitempty"`
	Status          string `json:"status" jsonschema:"created (dry run), running or stopped"`
	DryRun          bool   `json:"dry_run,omitempty"`
}

// jobList lists the sampling jobs.
type jobList struct {
	Jobs []jobEntry `json:"jobs"`
}

// jobEntry is one job with what it has gathered.
type jobEntry struct {
	JobID             string  `json:"job_id"`
	IntervalSeconds   int     `json:"interval_seconds"`
	RetentionHours    int     `json:"retention_hours"`
	Status            string  `json:"status"`
	Default           bool    `json:"default"`
	CreatedBy         string  `json:"created_by" jsonschema:"who started it; [withheld] unless it is you or you may read the audit trail"`
	CreatedAt         string  `json:"created_at"`
	Samples           int     `json:"samples"`
	FirstSample       string  `json:"first_sample,omitempty"`
	LastSample        string  `json:"last_sample,omitempty"`
	LastSampleAgeSecs float64 `json:"last_sample_age_seconds,omitempty"`
	UnflushedSamples  int     `json:"unflushed_samples"`
}

// metricsSamplesIn is metrics.get_samples: a job, a time range and a limit (tool
// catalog, spec 002 §4.3), plus a cursor.
type metricsSamplesIn struct {
	JobID  string `json:"job_id,omitempty"`
	Since  string `json:"since,omitempty" jsonschema:"default: an hour before until"`
	Until  string `json:"until,omitempty" jsonschema:"default: now"`
	Limit  int    `json:"limit,omitempty"`
	Cursor string `json:"cursor,omitempty" jsonschema:"the previous page's next_cursor"`
}

// sampleRecord is one stored sample: time, CPU, memory, disk and temperature
// (tool catalog, spec 002 §4.3), with additive fields.
type sampleRecord struct {
	Timestamp       string   `json:"timestamp"`
	CPUUsagePercent float64  `json:"cpu_usage_percent"`
	MemoryUsedBytes uint64   `json:"memory_used_bytes"`
	MemoryPercent   float64  `json:"memory_percent"`
	DiskUsedBytes   uint64   `json:"disk_used_bytes"`
	CPUTemperature  *float64 `json:"cpu_temperature_celsius,omitempty"`
	Load1           float64  `json:"load1"`
	UnderVoltage    *bool    `json:"under_voltage,omitempty"`
	Throttled       *bool    `json:"throttled,omitempty"`
}

// metricsSamplesOut is one page.
type metricsSamplesOut struct {
	JobID         string         `json:"job_id"`
	Samples       []sampleRecord `json:"samples"`
	ReturnedCount int            `json:"returned_count"`
	HasMore       bool           `json:"has_more"`
	NextCursor    string         `json:"next_cursor,omitempty"`
	Truncated     bool           `json:"truncated" jsonschema:"the page was cut to stay within the size budget before reaching limit"`
}

// metricsHistoryIn is metrics.query_history: metric names, a time range and a
// bucket size, as the tool catalog's example request spells them (spec 002
// §2.6.3). The names of its first release (metrics, start, end) are still
// accepted: historySpelling.
type metricsHistoryIn struct {
	MetricNames []string `json:"metric_names" jsonschema:"e.g. cpu_percent, net.eth0.bytes_recv_per_sec"`
	StartTime   string   `json:"start_time,omitempty" jsonschema:"default: an hour before end_time"`
	EndTime     string   `json:"end_time,omitempty" jsonschema:"default: now"`
	Resolution  string   `json:"resolution,omitempty" jsonschema:"bucket: 10s, 1m, 5m, 1h, 1d"`
	Aggregation string   `json:"aggregation,omitempty"`
	JobID       string   `json:"job_id,omitempty"`
}

// historySpelling maps the first release's parameter names to the tool
// catalog's (metric_names, start_time, end_time).
var historySpelling = tool.Renames(map[string]string{"metrics": "metric_names", "start": "start_time", "end": "end_time"})

// metricsHistoryOut is metrics.query_history's answer, each metric's points by time
// and the range and resolution (the tool catalog's example, spec 002 §2.6.3),
// with how it was computed.
type metricsHistoryOut struct {
	Metrics             map[string][]historyPoint `json:"metrics" jsonschema:"per metric name, its points oldest first; a bucket without samples has no point"`
	StartTime           string                    `json:"start_time"`
	EndTime             string                    `json:"end_time"`
	Resolution          string                    `json:"resolution" jsonschema:"bucket size used, such as 1m"`
	DataPoints          int                       `json:"data_points" jsonschema:"buckets between start_time and end_time at resolution"`
	JobID               string                    `json:"job_id"`
	ResolutionRequested string                    `json:"resolution_requested"`
	Aggregation         string                    `json:"aggregation"`
	Coarsened           bool                      `json:"coarsened"`
	Note                string                    `json:"note,omitempty"`
}

// historyPoint is one bucket: its start and its aggregated value.
type historyPoint struct {
	Timestamp string  `json:"timestamp"`
	Value     float64 `json:"value"`
}

// metricsSummaryIn names the window.
type metricsSummaryIn struct {
	Window string `json:"window,omitempty" jsonschema:"e.g. 15m, 24h, 7d"`
	JobID  string `json:"job_id,omitempty"`
}

// metricsSummaryOut fits in a few hundred tokens.
type metricsSummaryOut struct {
	JobID     string       `json:"job_id"`
	Window    string       `json:"window"`
	Start     string       `json:"start"`
	End       string       `json:"end"`
	Samples   int          `json:"samples"`
	Stats     []statOut    `json:"stats"`
	Episodes  []episodeOut `json:"episodes"`
	Anomalies []anomalyOut `json:"anomalies"`
}

// statOut is one metric over the window.
type statOut struct {
	Metric string  `json:"metric"`
	Min    float64 `json:"min"`
	Avg    float64 `json:"avg"`
	Max    float64 `json:"max"`
	P95    float64 `json:"p95"`
	Last   float64 `json:"last"`
}

// episodeOut is a stretch with a firmware flag set.
type episodeOut struct {
	Kind            string `json:"kind" jsonschema:"under_voltage, throttled, freq_capped or soft_temp_limit"`
	Start           string `json:"start"`
	End             string `json:"end"`
	DurationSeconds int64  `json:"duration_seconds"`
	BetweenSamples  bool   `json:"between_samples" jsonschema:"no sample saw it: the firmware's since-boot flag turned on between start and end"`
}

// anomalyOut is something worth a look.
type anomalyOut struct {
	Metric  string  `json:"metric"`
	Time    string  `json:"time"`
	Value   float64 `json:"value"`
	Message string  `json:"message"`
}

var summaryMetrics = []string{"cpu_percent", "cpu_temperature_celsius", "memory_percent", "load1", "disk_percent", "cpu_frequency_mhz", "swap_percent"}

// metricsTools are the metrics namespace's tools: the sampler whose jobs
// and samples they start, stop and read, the job limit in the config, and
// who may see who started a job (the audit trail's to say).
type metricsTools struct {
	conf         func() *config.Config
	sampler      *sampler
	mayReadAudit auditReader
	wire         func(string) string // a tool's wire name, for suggested calls
}

func (a *Agent) registerMetrics() {
	// The realtime snapshot is system's health snapshot under a second name
	// (system.go builds it), so it is added here, before the rest of the
	// namespace, as it always was.
	tool.Add(a.tools, a.healthReader().spec("metrics.get_realtime_metrics", "Realtime metrics",
		"The same snapshot as system_get_health_snapshot."))
	(&metricsTools{conf: a.conf, sampler: a.sampler, mayReadAudit: a.mayReadAudit, wire: a.wire}).register(a.tools)
}

func (mt *metricsTools) register(r *tool.Registry) {
	jobsGate := config.SwitchMetricsJobs
	tool.Add(r, tool.Spec[samplingStartIn, jobStatus]{
		ID: "metrics.start_sampling_job", Title: "Start sampling",
		Description: "Start a background job sampling health, network and disk rates; it survives reboots.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow, Gate: jobsGate},
		Props:       []tool.Prop{tool.P("interval_seconds", tool.Min(5), tool.Max(3600)), tool.P("retention_hours", tool.Min(1), tool.Max(168), tool.Default(24))},
		Example:     &samplingStartIn{IntervalSeconds: 10},
		Run:         mt.startJob,
		Summary: func(_ samplingStartIn, o jobStatus) string {
			return fmt.Sprintf("sampling job %s %s: every %d s, kept %d h", o.JobID, o.Status, o.IntervalSeconds, o.RetentionHours)
		},
	})
	tool.Add(r, tool.Spec[samplingStopIn, jobStatus]{
		ID: "metrics.stop_sampling_job", Title: "Stop sampling",
		Description: "Stop a sampling job; its samples stay until retention ends.",
		Rule:        tool.Rule{MinRole: identity.RoleOperate, Risk: tool.RiskLow, Gate: jobsGate},
		Idempotent:  true,
		Props:       []tool.Prop{tool.P("job_id", tool.MinLen(1), tool.MaxLen(64))},
		Example:     &samplingStopIn{JobID: "job-nope"}, // no such job: stops nothing
		Run:         mt.stopJob,
		Summary: func(_ samplingStopIn, o jobStatus) string {
			return fmt.Sprintf("sampling job %s %s", o.JobID, o.Status)
		},
	})
	tool.Add(r, tool.Spec[noArgs, jobList]{
		ID: "metrics.list_sampling_jobs", Title: "Sampling jobs",
		Description: "The sampling jobs and their state.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Run: func(_ context.Context, c *tool.Call, _ noArgs) (jobList, error) {
			return jobsFor(mt.sampler, mt.mayReadAudit, c.Principal)
		},
		Summary: func(_ noArgs, l jobList) string {
			run := 0
			for _, j := range l.Jobs {
				if j.Status == "running" {
					run++
				}
			}
			return fmt.Sprintf("%d sampling jobs, %d running", len(l.Jobs), run)
		},
	})
	tool.Add(r, tool.Spec[metricsSamplesIn, metricsSamplesOut]{
		ID: "metrics.get_samples", Title: "Raw samples",
		Description: "A job's raw samples, oldest first. For long ranges use metrics_query_history.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props: []tool.Prop{tool.P("limit", tool.Min(1), tool.Max(1000), tool.Default(100)), tool.P("since", tool.Format("date-time")), tool.P("until", tool.Format("date-time")),
			tool.P("job_id", tool.MaxLen(64)), tool.P("cursor", tool.MaxLen(64))},
		Run: mt.getSamples,
		Summary: func(_ metricsSamplesIn, o metricsSamplesOut) string {
			return fmt.Sprintf("%d samples of %s (more: %v)", o.ReturnedCount, o.JobID, o.HasMore)
		},
	})
	tool.Add(r, tool.Spec[metricsHistoryIn, metricsHistoryOut]{
		ID: "metrics.query_history", Title: "Metric history",
		Description: "Metric history, downsampled, up to 7 days back.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props: []tool.Prop{tool.P("start_time", tool.Format("date-time")), tool.P("end_time", tool.Format("date-time")), tool.P("resolution", tool.Default("1m"), tool.MaxLen(8)),
			tool.P("aggregation", tool.Enum("avg", "min", "max", "last"), tool.Default("avg")), tool.P("job_id", tool.MaxLen(64)), tool.P("metric_names", tool.MinItems(1), tool.MaxItems(maxQueryMetrics))},
		OutProps: []tool.Prop{tool.P("start_time", tool.Format("date-time")), tool.P("end_time", tool.Format("date-time"))},
		Spelling: historySpelling,
		Example:  &metricsHistoryIn{MetricNames: []string{"cpu_percent"}},
		Run:      mt.queryHistory,
		Summary: func(_ metricsHistoryIn, o metricsHistoryOut) string {
			n := 0
			for _, s := range o.Metrics {
				n += len(s)
			}
			c := ""
			if o.Coarsened {
				c = " (coarsened from " + o.ResolutionRequested + ")"
			}
			return fmt.Sprintf("%d series, %d points at %s %s%s", len(o.Metrics), n, o.Resolution, o.Aggregation, c)
		},
	})
	tool.Add(r, tool.Spec[metricsSummaryIn, metricsSummaryOut]{
		ID: "metrics.get_summary", Title: "Metrics summary",
		Description: "A window's summary: min/avg/max/p95 per metric, throttling episodes, anomalies.",
		Rule:        tool.Rule{MinRole: identity.RoleRead},
		Props:       []tool.Prop{tool.P("window", tool.Default("1h"), tool.MaxLen(8)), tool.P("job_id", tool.MaxLen(64))},
		Run:         mt.summary,
		Summary:     summaryLine,
	})
}

func (mt *metricsTools) startJob(ctx context.Context, c *tool.Call, in samplingStartIn) (jobStatus, error) {
	if c.DryRun {
		return jobStatus{JobID: "dry-run", IntervalSeconds: in.IntervalSeconds, RetentionHours: in.RetentionHours, Status: "created", DryRun: true}, nil
	}
	j, err := mt.sampler.create(in.IntervalSeconds, in.RetentionHours, c.Principal.Name, false)
	if errors.Is(err, errTooManyJobs) {
		return jobStatus{}, tool.Errf(CodeResourceExhausted, "at most %d sampling jobs may run", mt.conf().Metrics.MaxJobs).
			Suggest(tool.SuggestedCall{Tool: mt.wire("metrics.list_sampling_jobs"), Why: "find a job to stop or reuse"})
	}
	if err != nil {
		return jobStatus{}, err
	}
	return jobStatus{JobID: j.ID, IntervalSeconds: j.IntervalSeconds, RetentionHours: j.RetentionHours, Status: j.Status}, nil
}

func (mt *metricsTools) stopJob(_ context.Context, c *tool.Call, in samplingStopIn) (jobStatus, error) {
	j, err := mt.sampler.db.GetJob(in.JobID)
	if errors.Is(err, store.ErrJobNotFound) {
		return jobStatus{}, tool.Errf(CodeNotFound, "no sampling job %q", in.JobID).With("parameter", "job_id").
			Suggest(tool.SuggestedCall{Tool: mt.wire("metrics.list_sampling_jobs"), Why: "see the jobs and their ids"})
	}
	if err != nil {
		return jobStatus{}, err
	}
	if c.DryRun {
		return jobStatus{JobID: j.ID, IntervalSeconds: j.IntervalSeconds, RetentionHours: j.RetentionHours, Status: j.Status, DryRun: true}, nil
	}
	if j, err = mt.sampler.StopJob(in.JobID); err != nil {
		return jobStatus{}, err
	}
	return jobStatus{JobID: j.ID, IntervalSeconds: j.IntervalSeconds, RetentionHours: j.RetentionHours, Status: j.Status}, nil
}

// listJobs is every sampling job with what it has gathered, names as stored.
func listJobs(s *sampler) (jobList, error) {
	infos, err := s.Jobs()
	if err != nil {
		return jobList{}, err
	}
	out := jobList{Jobs: []jobEntry{}}
	now := time.Now()
	for _, j := range infos {
		e := jobEntry{JobID: j.ID, IntervalSeconds: j.IntervalSeconds, RetentionHours: j.RetentionHours, Status: j.Status, Default: j.Default,
			CreatedBy: j.CreatedBy, CreatedAt: j.CreatedAt.UTC().Format(time.RFC3339), Samples: j.Samples, UnflushedSamples: j.Buffered}
		if !j.First.IsZero() {
			e.FirstSample = j.First.UTC().Format(time.RFC3339)
		}
		if !j.Last.IsZero() {
			e.LastSample = j.Last.UTC().Format(time.RFC3339)
			e.LastSampleAgeSecs = math.Round(now.Sub(j.Last).Seconds()*10) / 10
		}
		out.Jobs = append(out.Jobs, e)
	}
	return out, nil
}

// window parses a since/until pair with a default span before until.
func window(sinceName, since, untilName, until string, span time.Duration) (time.Time, time.Time, error) {
	u, err := parseTime(untilName, until)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	if u.IsZero() {
		u = time.Now().Add(time.Second)
	}
	s, err := parseTime(sinceName, since)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	if s.IsZero() {
		s = u.Add(-span)
	}
	if !s.Before(u) {
		return time.Time{}, time.Time{}, tool.Errf(CodeInvalidArgument, "%s (%s) must be before %s (%s)", sinceName, s.Format(time.RFC3339), untilName, u.Format(time.RFC3339)).
			With("parameter", sinceName)
	}
	return s, u, nil
}

func (mt *metricsTools) getSamples(_ context.Context, _ *tool.Call, in metricsSamplesIn) (metricsSamplesOut, error) {
	job, err := mt.sampler.resolveJob(in.JobID)
	if err != nil {
		return metricsSamplesOut{}, err
	}
	from, until, err := window("since", in.Since, "until", in.Until, time.Hour)
	if err != nil {
		return metricsSamplesOut{}, err
	}
	if in.Cursor != "" {
		c, err := time.Parse(time.RFC3339Nano, in.Cursor)
		if err != nil || c.Before(from) || !c.Before(until) {
			return metricsSamplesOut{}, tool.Errf(CodeInvalidArgument, "cursor %q is not a next_cursor of this range", in.Cursor).With("parameter", "cursor")
		}
		from = c
	}
	out := metricsSamplesOut{JobID: job.ID, Samples: []sampleRecord{}}
	size := 0
	err = mt.sampler.Scan(job.ID, from, until, func(s store.Sample) bool {
		so := sampleOut(s)
		b, _ := json.Marshal(so)
		if len(out.Samples) == in.Limit || size+len(b) > maxSampleBytes {
			out.HasMore, out.NextCursor = true, s.Time.UTC().Format(time.RFC3339Nano)
			out.Truncated = len(out.Samples) < in.Limit
			return false
		}
		size += len(b) + 1
		out.Samples = append(out.Samples, so)
		return true
	})
	out.ReturnedCount = len(out.Samples)
	return out, err
}

func sampleOut(s store.Sample) sampleRecord {
	o := sampleRecord{Timestamp: s.Time.UTC().Format(time.RFC3339), CPUUsagePercent: r2(float64(s.CPUPercent)), MemoryUsedBytes: s.MemUsed,
		DiskUsedBytes: s.DiskUsed, Load1: r2(float64(s.Load1))}
	if s.MemTotal > 0 {
		o.MemoryPercent = r2(float64(s.MemUsed) / float64(s.MemTotal) * 100)
	}
	if !math.IsNaN(float64(s.TempC)) {
		t := r2(float64(s.TempC))
		o.CPUTemperature = &t
	}
	if s.ThrottleKnown(0) {
		uv := s.Throttle&1 == 1
		o.UnderVoltage = &uv
	}
	if s.ThrottleKnown(2) {
		th := s.Throttle&4 == 4
		o.Throttled = &th
	}
	return o
}

func r2(v float64) float64 { return math.Round(v*100) / 100 }

func (mt *metricsTools) queryHistory(_ context.Context, _ *tool.Call, in metricsHistoryIn) (metricsHistoryOut, error) {
	job, err := mt.sampler.resolveJob(in.JobID)
	if err != nil {
		return metricsHistoryOut{}, err
	}
	start, end, err := window("start_time", in.StartTime, "end_time", in.EndTime, time.Hour)
	if err != nil {
		return metricsHistoryOut{}, err
	}
	if end.Sub(start) > maxQuerySpan {
		return metricsHistoryOut{}, tool.Errf(CodeInvalidArgument, "the range spans %s; at most 8 days (retention is at most 7)", end.Sub(start).Round(time.Hour)).With("parameter", "start_time")
	}
	res, err := series.ParseResolution(in.Resolution)
	if err != nil {
		return metricsHistoryOut{}, tool.Errf(CodeInvalidArgument, "%s", strings.TrimPrefix(err.Error(), "series: ")).With("parameter", "resolution")
	}
	getters := make([]series.Getter, len(in.MetricNames))
	seen := map[string]bool{}
	for i, m := range in.MetricNames {
		if seen[m] {
			return metricsHistoryOut{}, tool.Errf(CodeInvalidArgument, "metric %q is listed twice", m).With("parameter", "metric_names")
		}
		seen[m] = true
		if getters[i], err = series.Lookup(m); err != nil {
			return metricsHistoryOut{}, mt.unknownMetric(job.ID, m)
		}
	}
	used := series.Fit(end.Sub(start), res, len(in.MetricNames), maxPoints)
	out := metricsHistoryOut{JobID: job.ID, StartTime: start.UTC().Format(time.RFC3339), EndTime: end.UTC().Format(time.RFC3339),
		ResolutionRequested: in.Resolution, Resolution: series.FormatResolution(used), DataPoints: int((end.Sub(start) + used - 1) / used),
		Aggregation: in.Aggregation, Coarsened: used != res, Metrics: map[string][]historyPoint{}}
	if out.Coarsened {
		out.Note = fmt.Sprintf("%s over %s for %d metrics would exceed %d points; coarsened to %s", in.Resolution, end.Sub(start).Round(time.Second), len(in.MetricNames), maxPoints, out.Resolution)
	}
	ds := make([]*series.Downsampler, len(getters))
	for i, g := range getters {
		ds[i] = series.NewDownsampler(g, start, end, used, series.Aggregation(in.Aggregation))
	}
	err = mt.sampler.Scan(job.ID, start, end, func(s store.Sample) bool {
		for _, d := range ds {
			d.Add(s)
		}
		return true
	})
	if err != nil {
		return metricsHistoryOut{}, err
	}
	for i, d := range ds {
		pts := d.Points()
		hp := make([]historyPoint, 0, len(pts))
		for _, p := range pts {
			hp = append(hp, historyPoint{Timestamp: p.Time.UTC().Format(time.RFC3339), Value: sig(p.Value)})
		}
		out.Metrics[in.MetricNames[i]] = hp
	}
	return out, nil
}

// sig keeps four significant decimals: enough for any sensor, fewer tokens.
func sig(v float64) float64 {
	if v == 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return v
	}
	mag := math.Pow(10, 4-math.Ceil(math.Log10(math.Abs(v))))
	if mag < 1 {
		return math.Round(v)
	}
	return math.Round(v*mag) / mag
}

// unknownMetric lists the names the job's newest stored samples offer.
func (mt *metricsTools) unknownMetric(job, name string) error {
	recent := mt.sampler.recent(job, 5)
	return tool.Errf(CodeInvalidArgument, "unknown metric %q", name).With("parameter", "metric_names").With("known_metrics", series.Names(recent)).
		Hint("use a name from known_metrics; device metrics are net.<interface>.<field> and disk.<device>.<field>")
}

func (mt *metricsTools) summary(_ context.Context, _ *tool.Call, in metricsSummaryIn) (metricsSummaryOut, error) {
	job, err := mt.sampler.resolveJob(in.JobID)
	if err != nil {
		return metricsSummaryOut{}, err
	}
	span, err := series.ParseResolution(in.Window)
	if err != nil {
		return metricsSummaryOut{}, tool.Errf(CodeInvalidArgument, "window %q: want a duration from 1s to 7d such as 1h or 24h", in.Window).With("parameter", "window")
	}
	end := time.Now().Add(time.Second)
	start := end.Add(-span)
	var samples []store.Sample
	err = mt.sampler.Scan(job.ID, start, end, func(s store.Sample) bool {
		s.Net, s.Disk = nil, nil // the summary needs the scalars only
		samples = append(samples, s)
		return true
	})
	if err != nil {
		return metricsSummaryOut{}, err
	}
	out := metricsSummaryOut{JobID: job.ID, Window: in.Window, Start: start.UTC().Format(time.RFC3339), End: end.UTC().Format(time.RFC3339),
		Samples: len(samples), Stats: []statOut{}, Episodes: []episodeOut{}, Anomalies: []anomalyOut{}}
	for _, m := range summaryMetrics {
		g, _ := series.Lookup(m)
		st := series.StatsOf(m, samples, g)
		if st.Count == 0 {
			continue
		}
		out.Stats = append(out.Stats, statOut{Metric: m, Min: sig(st.Min), Avg: sig(st.Avg), Max: sig(st.Max), P95: sig(st.P95), Last: sig(st.Last)})
	}
	gap := 3 * time.Duration(job.IntervalSeconds) * time.Second
	for _, e := range series.Episodes(samples, gap) {
		out.Episodes = append(out.Episodes, episodeOut{Kind: e.Kind, Start: e.Start.UTC().Format(time.RFC3339), End: e.End.UTC().Format(time.RFC3339),
			DurationSeconds: int64(e.End.Sub(e.Start).Seconds()), BetweenSamples: e.Between})
	}
	if len(out.Episodes) > 20 {
		out.Episodes = out.Episodes[len(out.Episodes)-20:]
	}
	for _, an := range series.Anomalies(samples, 5) {
		out.Anomalies = append(out.Anomalies, anomalyOut{Metric: an.Metric, Time: an.Time.UTC().Format(time.RFC3339), Value: an.Value, Message: an.Message})
	}
	return out, nil
}

func summaryLine(_ metricsSummaryIn, o metricsSummaryOut) string {
	var parts []string
	for _, s := range o.Stats {
		switch s.Metric {
		case "cpu_percent":
			parts = append(parts, fmt.Sprintf("cpu avg %.0f%% max %.0f%%", s.Avg, s.Max))
		case "cpu_temperature_celsius":
			parts = append(parts, fmt.Sprintf("temp max %.1f°C", s.Max))
		case "memory_percent":
			parts = append(parts, fmt.Sprintf("mem max %.0f%%", s.Max))
		}
	}
	return fmt.Sprintf("last %s, %d samples: %s; %d throttling/under-voltage episodes, %d anomalies",
		o.Window, o.Samples, strings.Join(parts, ", "), len(o.Episodes), len(o.Anomalies))
}
