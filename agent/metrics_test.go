package agent

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
)

// startSampler runs the rig's sampler with job seconds shrunk to 10 ms and
// a 50 ms flush interval.
func (r *rig) startSampler() {
	r.t.Helper()
	r.a.sampler.unit = 10 * time.Millisecond
	r.a.sampler.cfg.FlushInterval = config.Duration(50 * time.Millisecond)
	if err := r.a.sampler.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = r.a.sampler.Close() })
}

func TestSamplingJobLifecycle(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	r.startSampler()
	operator := Principal{Name: "op", Role: RoleOperate}

	_, e := callAs[jobStatus](t, r, Principal{Name: "bob", Role: RoleRead}, "metrics_start_sampling_job", map[string]any{"interval_seconds": 5})
	wantErr(t, e, CodePermissionDenied, nil) // a reader may not start a job
	dry, e := callAs[jobStatus](t, r, operator, "metrics_start_sampling_job", map[string]any{"interval_seconds": 5, "dry_run": true})
	if e != nil || dry.Status != "created" || !dry.DryRun {
		t.Fatalf("dry run: %+v %v", dry, e)
	}
	if jobs, _ := r.db.ListJobs(); len(jobs) != 0 {
		t.Fatalf("dry run created %v", jobs)
	}
	job, e := callAs[jobStatus](t, r, operator, "metrics_start_sampling_job", map[string]any{"interval_seconds": 5, "retention_hours": 2})
	if e != nil || job.Status != "running" || job.RetentionHours != 2 {
		t.Fatalf("start: %+v %v", job, e)
	}
	id := job.JobID
	firstJob := func() jobEntry {
		l, e := callAs[jobList](t, r, admin, "metrics_list_sampling_jobs", nil)
		if e != nil || len(l.Jobs) == 0 {
			t.Fatalf("list jobs: %+v %v", l, e)
		}
		return l.Jobs[0]
	}
	waitFor(t, "samples", 5*time.Second, func() bool { return firstJob().Samples >= 5 })
	// Readable before and after a flush.
	got, e := callAs[metricsSamplesOut](t, r, admin, "metrics_get_samples", map[string]any{"job_id": id})
	if e != nil || got.ReturnedCount < 5 {
		t.Fatalf("get_samples: %+v %v", got, e)
	}
	_, e = callAs[jobStatus](t, r, operator, "metrics_stop_sampling_job", map[string]any{"job_id": "job-nope"})
	wantErr(t, e, CodeNotFound, nil)
	stop, e := callAs[jobStatus](t, r, operator, "metrics_stop_sampling_job", map[string]any{"job_id": id})
	if e != nil || stop.Status != "stopped" {
		t.Fatalf("stop: %+v %v", stop, e)
	}
	n1 := firstJob().Samples
	// Once the job's goroutine is gone and the buffer is written, the count
	// is what it was when the stop returned: a reading still in flight at
	// the stop was dropped.
	gone := make(chan struct{})
	go func() { r.a.sampler.wg.Wait(); close(gone) }()
	select {
	case <-gone:
	case <-time.After(hangGuard):
		t.Fatal("the stopped job's goroutine is still running")
	}
	if err := r.a.sampler.flush(); err != nil {
		t.Fatal(err)
	}
	if n2 := firstJob().Samples; n2 != n1 {
		t.Fatalf("a stopped job kept sampling: %v -> %v", n1, n2)
	}
	// Every step was audited and the chain holds.
	recs, _, _ := r.db.QueryAudit(store.AuditQuery{Tool: "metrics.*"})
	if len(recs) != 5 {
		t.Fatalf("audit records for metrics writes: %d", len(recs))
	}
}

func TestJobsSwitchedOffByDefault(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.Jobs = false; c.Metrics.DefaultJob = false })
	_, e := callAs[jobStatus](t, r, admin, "metrics_start_sampling_job", map[string]any{"interval_seconds": 5})
	wantErr(t, e, CodePermissionDenied, nil)
	if !strings.Contains(fmt.Sprint(*e), "[metrics] jobs") { // the switch is named somewhere in the error
		t.Fatalf("%+v", *e)
	}
}

func TestJobsResumeAfterRestartAndDefaultJob(t *testing.T) {
	r := newRig(t, nil)
	r.startSampler()
	jobs, _ := r.db.ListJobs()
	if len(jobs) != 1 || !jobs[0].Default || jobs[0].IntervalSeconds != 10 || jobs[0].RetentionHours != 48 {
		t.Fatalf("default job: %+v", jobs)
	}
	started, e := callAs[jobStatus](t, r, admin, "metrics_start_sampling_job", map[string]any{"interval_seconds": 5})
	if e != nil {
		t.Fatal(e)
	}
	extra := started.JobID
	if _, e := callAs[jobStatus](t, r, admin, "metrics_stop_sampling_job", map[string]any{"job_id": jobs[0].ID}); e != nil {
		t.Fatal(e)
	}
	waitFor(t, "a flush", 5*time.Second, func() bool {
		st, _ := r.db.SampleStats(extra)
		return st.Count >= 3
	})
	if err := r.a.sampler.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := r.db.SampleStats(extra)
	// A new sampler on the same file: the running job resumes, the stopped
	// default job stays stopped and is not created again.
	s2 := newSampler(r.db, sysinfo.NewSim(sysinfo.SimOptions{}), r.cfg.Metrics, r.a.log)
	s2.unit, s2.cfg.FlushInterval = 10*time.Millisecond, config.Duration(50*time.Millisecond)
	if err := s2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	waitFor(t, "resumed sampling", 5*time.Second, func() bool {
		st, _ := r.db.SampleStats(extra)
		return st.Count >= before.Count+3
	})
	jobs, _ = r.db.ListJobs()
	if len(jobs) != 2 {
		t.Fatalf("jobs after restart: %+v", jobs)
	}
	for _, j := range jobs {
		if j.Default && j.Status != "stopped" {
			t.Fatalf("stopped default job came back: %+v", j)
		}
	}
}

// putSeries stores a hand-made series under a job and returns the job id.
func putSeries(t *testing.T, r *rig, samples []store.Sample) string {
	t.Helper()
	j := store.Job{ID: "job-hand", IntervalSeconds: 10, RetentionHours: 168, Status: "stopped", CreatedBy: "test", CreatedAt: samples[0].Time}
	if err := r.db.PutJob(j); err != nil {
		t.Fatal(err)
	}
	if err := r.db.AppendSamples(j.ID, samples); err != nil {
		t.Fatal(err)
	}
	return j.ID
}

func TestQueryHistoryHandComputed(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	t0 := time.Now().UTC().Truncate(time.Hour).Add(-2 * time.Hour)
	var s []store.Sample
	// minute 0: cpu 10..60 every 10 s; minute 1: nothing (agent down); minute 2: 5, 7.
	for i, v := range []float64{10, 20, 30, 40, 50, 60} {
		s = append(s, store.Sample{Time: t0.Add(time.Duration(i) * 10 * time.Second), CPUPercent: float32(v), TempC: float32(40 + i),
			MemTotal: 1000, MemUsed: 250, Net: []store.NetRate{{Name: "eth0", RxBytesPerSec: float32(100 * (i + 1))}}})
	}
	s = append(s, store.Sample{Time: t0.Add(120 * time.Second), CPUPercent: 5, TempC: float32(math.NaN()), MemTotal: 1000, MemUsed: 500},
		store.Sample{Time: t0.Add(130 * time.Second), CPUPercent: 7, TempC: float32(math.NaN()), MemTotal: 1000, MemUsed: 500})
	id := putSeries(t, r, s)
	q := func(extra map[string]any) metricsHistoryOut {
		args := map[string]any{"job_id": id, "start": t0.Format(time.RFC3339), "end": t0.Add(3 * time.Minute).Format(time.RFC3339), "resolution": "1m",
			"metrics": []string{"cpu_percent", "memory_percent", "cpu_temperature_celsius", "net.eth0.rx_bytes_per_sec"}}
		for k, v := range extra {
			args[k] = v
		}
		out, e := callAs[metricsHistoryOut](t, r, admin, "metrics_query_history", args)
		if e != nil {
			t.Fatal(e)
		}
		return out
	}
	names := []string{"cpu_percent", "memory_percent", "cpu_temperature_celsius", "net.eth0.rx_bytes_per_sec"}
	// pts writes a metric's points as [[unix seconds, value] ...].
	pts := func(h metricsHistoryOut, i int) string {
		var out [][]float64
		for _, p := range h.Metrics[names[i]] {
			ts, _ := time.Parse(time.RFC3339, p.Timestamp)
			out = append(out, []float64{float64(ts.Unix()), p.Value})
		}
		return fmt.Sprint(out)
	}
	m0, m2 := float64(t0.Unix()), float64(t0.Add(2*time.Minute).Unix())
	sc := q(nil)
	for i, want := range []string{
		fmt.Sprint([][]float64{{m0, 35}, {m2, 6}}),
		fmt.Sprint([][]float64{{m0, 25}, {m2, 50}}),
		fmt.Sprint([][]float64{{m0, 42.5}}), // no sensor in minute 2: no point, not zero
		fmt.Sprint([][]float64{{m0, 350}}),  // eth0 gone in minute 2
	} {
		if got := pts(sc, i); got != want {
			t.Errorf("series %d: got %s want %s", i, got, want)
		}
	}
	if sc.Coarsened || sc.Resolution != "1m" || sc.DataPoints != 3 ||
		sc.StartTime != t0.Format(time.RFC3339) || sc.EndTime != t0.Add(3*time.Minute).Format(time.RFC3339) {
		t.Errorf("%+v", sc)
	}
	// The spec's parameter names give the same answer as the first release's.
	spec := map[string]any{"job_id": id, "start_time": t0.Format(time.RFC3339), "end_time": t0.Add(3 * time.Minute).Format(time.RFC3339),
		"resolution": "1m", "metric_names": names}
	if sc2, e := callAs[metricsHistoryOut](t, r, admin, "metrics_query_history", spec); e != nil {
		t.Errorf("spec names: %v", e)
	} else {
		diff(t, "spec names against old names", sc, sc2)
	}
	if got := pts(q(map[string]any{"aggregation": "max"}), 0); got != fmt.Sprint([][]float64{{m0, 60}, {m2, 7}}) {
		t.Errorf("max: %s", got)
	}
	if got := pts(q(map[string]any{"aggregation": "last"}), 0); got != fmt.Sprint([][]float64{{m0, 60}, {m2, 7}}) {
		t.Errorf("last: %s", got)
	}
	if got := pts(q(map[string]any{"aggregation": "min"}), 0); got != fmt.Sprint([][]float64{{m0, 10}, {m2, 5}}) {
		t.Errorf("min: %s", got)
	}
	// Six days at 10 s for 4 metrics would be 207,000 points: coarsened to
	// 1h (30m would be 1,152 > 1,000), and said so.
	sc = q(map[string]any{"start": t0.Add(-6 * 24 * time.Hour).Format(time.RFC3339), "resolution": "10s"})
	if !sc.Coarsened || sc.Resolution != "1h" || !strings.Contains(sc.Note, "coarsened") {
		t.Errorf("coarsening: %v %v %v", sc.Coarsened, sc.Resolution, sc.Note)
	}
	for name, args := range map[string]map[string]any{
		"unknown metric":  {"metrics": []string{"cpu_percent", "cpu_load"}},
		"inverted range":  {"start": t0.Add(time.Hour).Format(time.RFC3339)},
		"bad resolution":  {"resolution": "1 minute"},
		"too long":        {"start": t0.Add(-9 * 24 * time.Hour).Format(time.RFC3339)},
		"duplicate":       {"metrics": []string{"cpu_percent", "cpu_percent"}},
		"no metrics":      {"metrics": []string{}},
		"bad time":        {"end": "tomorrow"},
		"bad aggregation": {"aggregation": "median"},
	} {
		full := map[string]any{"job_id": id, "start": t0.Format(time.RFC3339), "end": t0.Add(3 * time.Minute).Format(time.RFC3339), "metrics": []string{"cpu_percent"}}
		for k, v := range args {
			full[k] = v
		}
		t.Run(name, func(t *testing.T) {
			_, e := callAs[metricsHistoryOut](t, r, admin, "metrics_query_history", full)
			wantErr(t, e, CodeInvalidArgument, nil)
			if name == "unknown metric" && !strings.Contains(fmt.Sprint(*e), "net.eth0.bytes_recv_per_sec") {
				t.Errorf("unknown metric does not list the known ones: %+v", *e)
			}
		})
	}
	_, e := callAs[metricsHistoryOut](t, r, admin, "metrics_query_history", map[string]any{"job_id": "job-nope", "metrics": []string{"cpu_percent"}})
	wantErr(t, e, CodeNotFound, nil)
}

func TestGetSamplesPages(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	t0 := time.Now().UTC().Add(-50 * time.Minute).Truncate(time.Second)
	var s []store.Sample
	for i := range 250 {
		s = append(s, store.Sample{Time: t0.Add(time.Duration(i) * 10 * time.Second), CPUPercent: float32(i % 100), TempC: float32(math.NaN()), MemTotal: 100, MemUsed: 50})
	}
	id := putSeries(t, r, s)
	seen, cursor := 0, ""
	for page := 0; ; page++ {
		args := map[string]any{"job_id": id, "limit": 100}
		if cursor != "" {
			args["cursor"] = cursor
		}
		sc, e := callAs[metricsSamplesOut](t, r, admin, "metrics_get_samples", args)
		if e != nil {
			t.Fatal(e)
		}
		got := sc.Samples
		first := got[0].Timestamp
		if want := t0.Add(time.Duration(seen) * 10 * time.Second).Format(time.RFC3339); first != want {
			t.Fatalf("page %d starts at %s, want %s", page, first, want)
		}
		seen += len(got)
		if !sc.HasMore {
			break
		}
		cursor = sc.NextCursor
	}
	if seen != 250 {
		t.Fatalf("paged through %d of 250", seen)
	}
	_, e := callAs[metricsSamplesOut](t, r, admin, "metrics_get_samples", map[string]any{"job_id": id, "cursor": "garbage"})
	wantErr(t, e, CodeInvalidArgument, nil) // bad cursor
	all, e := callAs[metricsSamplesOut](t, r, admin, "metrics_get_samples", map[string]any{"job_id": id, "limit": 1000, "since": t0.Format(time.RFC3339)})
	if e != nil || all.Truncated || all.ReturnedCount != 250 {
		t.Fatalf("limit 1000: %v %v %v", all.ReturnedCount, all.Truncated, e)
	}
}

func TestSummaryFindsEpisodesAndAnomalies(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	t0 := time.Now().UTC().Add(-30 * time.Minute)
	var s []store.Sample
	for i := range 100 {
		smp := store.Sample{Time: t0.Add(time.Duration(i) * 10 * time.Second), CPUPercent: 20, TempC: 50, MemTotal: 100, MemUsed: 40, DiskTotal: 100, DiskUsed: 30, HasThrottle: true}
		if i >= 40 && i < 45 {
			smp.Throttle = 0x1 | 0x10000 // under-voltage now
		} else if i >= 45 {
			smp.Throttle = 0x10000
		}
		if i == 70 {
			smp.TempC = 82
		}
		s = append(s, smp)
	}
	id := putSeries(t, r, s)
	sc, e := callAs[metricsSummaryOut](t, r, admin, "metrics_get_summary", map[string]any{"job_id": id, "window": "1h"})
	if e != nil {
		t.Fatal(e)
	}
	eps := sc.Episodes
	if len(eps) != 1 || eps[0].Kind != "under_voltage" || eps[0].DurationSeconds != 40 {
		t.Fatalf("episodes: %+v", eps)
	}
	an := sc.Anomalies
	if len(an) == 0 || an[0].Metric != "cpu_temperature_celsius" || an[0].Value != 82 {
		t.Fatalf("anomalies: %+v", an)
	}
	if sc.Samples != 100 {
		t.Fatalf("samples %v", sc.Samples)
	}
	_, e = callAs[metricsSummaryOut](t, r, admin, "metrics_get_summary", map[string]any{"job_id": id, "window": "forever"})
	wantErr(t, e, CodeInvalidArgument, nil) // bad window
}

func TestRetentionPrunes(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	now := time.Now().UTC()
	var s []store.Sample
	for i := range 10 {
		// Hourly from 9.5 h ago to 0.5 h ago: 3 h retention keeps 2.5, 1.5, 0.5 h ago.
		s = append(s, store.Sample{Time: now.Add(-time.Duration(10-i)*time.Hour + 30*time.Minute), TempC: float32(math.NaN())})
	}
	j := store.Job{ID: "job-ret", IntervalSeconds: 3600, RetentionHours: 3, Status: "running", CreatedAt: s[0].Time}
	_ = r.db.PutJob(j)
	_ = r.db.AppendSamples(j.ID, s)
	if err := r.a.sampler.flush(); err != nil { // retention rides on the flush
		t.Fatal(err)
	}
	st, _ := r.db.SampleStats(j.ID)
	if st.Count != 3 || st.First.Before(now.Add(-3*time.Hour)) {
		t.Fatalf("after pruning to 3 h: %+v", st)
	}
}

// fakeBoard returns scripted health and counters, one step per reading.
type fakeBoard struct {
	sysinfo.Source
	step  int
	times []time.Time
	rx    []uint64
}

func (f *fakeBoard) Health(ctx context.Context) (sysinfo.Health, error) {
	h, err := f.Source.Health(ctx)
	h.Time = f.times[f.step]
	return h, err
}

func (f *fakeBoard) Counters(context.Context) (sysinfo.Counters, error) {
	c := sysinfo.Counters{Time: f.times[f.step], Net: []sysinfo.NetCounters{{Name: "wlan0", RxBytes: f.rx[f.step], RxPackets: uint64(f.step * 10)}}}
	f.step++
	return c, nil
}

// Counter deltas become rates, across a 32-bit wrap, and a gap in sampling
// stays a gap in the downsampled series.
func TestRatesAcrossWrapAndGapThroughTheQuery(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	t0 := time.Now().UTC().Truncate(time.Minute).Add(-30 * time.Minute)
	fb := &fakeBoard{Source: sysinfo.NewSim(sysinfo.SimOptions{}),
		// 0 s, 10 s, 20 s, then the agent is down until 120 s, then 130 s.
		times: []time.Time{t0, t0.Add(10 * time.Second), t0.Add(20 * time.Second), t0.Add(120 * time.Second), t0.Add(130 * time.Second)},
		rx:    []uint64{4294966000, 4294967000, 704, 5000, 15000}, // wraps at 2^32 between 10 s and 20 s
	}
	smp := newSampler(r.db, fb, r.cfg.Metrics, r.a.log)
	var prev *sysinfo.Counters
	var got []store.Sample
	for i := range fb.times {
		if i == 3 {
			prev = nil // a restart: no rate across the gap
		}
		s, cur, err := smp.read(context.Background(), prev)
		if err != nil {
			t.Fatal(err)
		}
		prev = cur
		got = append(got, s)
	}
	// Hand-computed: (4294967000-4294966000)/10 = 100; (704 + 2^32 - 4294967000)/10 = 100; (15000-5000)/10 = 1000.
	want := []float32{-1, 100, 100, -1, 1000}
	for i, s := range got {
		if want[i] < 0 {
			if len(s.Net) != 0 {
				t.Errorf("sample %d has a rate without a previous reading: %+v", i, s.Net)
			}
			continue
		}
		if len(s.Net) != 1 || s.Net[0].RxBytesPerSec != want[i] {
			t.Errorf("sample %d: %+v, want rx %v B/s", i, s.Net, want[i])
		}
	}
	id := putSeries(t, r, got)
	sc, e := callAs[metricsHistoryOut](t, r, admin, "metrics_query_history", map[string]any{"job_id": id, "metrics": []string{"net.wlan0.rx_bytes_per_sec"},
		"start": t0.Format(time.RFC3339), "end": t0.Add(3 * time.Minute).Format(time.RFC3339), "resolution": "1m"})
	if e != nil {
		t.Fatal(e)
	}
	diff(t, "wlan0 rx points", []historyPoint{{Timestamp: t0.Format(time.RFC3339), Value: 100}, {Timestamp: t0.Add(2 * time.Minute).Format(time.RFC3339), Value: 1000}},
		sc.Metrics["net.wlan0.rx_bytes_per_sec"])
}
