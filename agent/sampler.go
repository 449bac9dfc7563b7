package agent

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/agent/tool"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
)

// sampler runs the sampling jobs. Each running job reads the device on its own
// ticker; samples wait in memory and are written in one transaction per
// flush interval, which spares the SD card (every commit rewrites a handful
// of 4 KiB pages however few samples it carries) at the cost of at most one
// interval lost on a power cut. To narrow that window where it matters, the
// buffer is also written at a clean stop, when the agent schedules a reboot
// or shutdown and shortly before it is due (Flush), and as soon as a sample
// shows the supply in under-voltage, the usual prelude to a brown-out. Jobs
// live in the jobs bucket, so they resume after a restart or a reboot.
type sampler struct {
	db   *store.DB
	sys  sysinfo.Source
	ctr  sysinfo.CounterSource // nil: no network or disk rates
	cfg  config.Metrics
	log  *slog.Logger
	now  func() time.Time
	unit time.Duration // length of one "second" of a job interval; tests shrink it

	// flushing is held while a flush hands the buffer to the store, so
	// Jobs never counts a batch in neither place, or in both; it also
	// keeps flushes one at a time, so a retried batch keeps its order.
	flushing  sync.Mutex
	mu        sync.Mutex
	running   map[string]context.CancelFunc
	buf       map[string][]store.Sample
	last      map[string]time.Time // newest sample per job, flushed or not
	taken     int64
	lastFlush time.Time
	lastPrune time.Time
	flushErr  error
	underVolt bool          // the newest sample showed under-voltage now
	flushC    chan struct{} // asks the flusher for a flush now
	wg        sync.WaitGroup
	ctx       context.Context // jobs started by a tool call outlive the call
	stop      context.CancelFunc
	done      chan struct{}
}

// newSampler builds a sampler; Start runs it.
func newSampler(db *store.DB, sys sysinfo.Source, cfg config.Metrics, log *slog.Logger) *sampler {
	ctr, _ := sys.(sysinfo.CounterSource)
	return &sampler{db: db, sys: sys, ctr: ctr, cfg: cfg, log: log, now: time.Now, unit: time.Second,
		running: map[string]context.CancelFunc{}, buf: map[string][]store.Sample{}, last: map[string]time.Time{},
		flushC: make(chan struct{}, 1)}
}

// Start resumes the stored running jobs, creates the default job on first
// run, and starts the flusher.
func (s *sampler) Start(ctx context.Context) error {
	s.ctx, s.stop = context.WithCancel(ctx)
	ctx = s.ctx
	s.done = make(chan struct{})
	jobs, err := s.db.ListJobs()
	if err != nil {
		return err
	}
	hasDefault := false
	for _, j := range jobs {
		hasDefault = hasDefault || j.Default
		if st, err := s.db.SampleStats(j.ID); err == nil && !st.Last.IsZero() {
			s.last[j.ID] = st.Last
		}
		if j.Status == "running" {
			s.run(ctx, j)
		}
	}
	if !hasDefault && s.cfg.DefaultJob {
		j, err := s.create(int(s.cfg.DefaultInterval.D()/time.Second), int(s.cfg.DefaultRetention.D()/time.Hour), "config", true)
		if err != nil {
			return err
		}
		s.log.Info("default sampling job started", "job", j.ID, "interval_s", j.IntervalSeconds, "retention_h", j.RetentionHours)
	}
	go s.flusher(ctx)
	return nil
}

// Close stops every job and writes what is buffered.
func (s *sampler) Close() error {
	if s.stop == nil {
		return nil
	}
	s.stop()
	<-s.done
	s.wg.Wait()
	return s.flush()
}

func (s *sampler) flusher(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.FlushInterval.D())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.flushC:
		}
		if err := s.flush(); err != nil {
			s.log.Error("flushing samples", "err", err)
		}
	}
}

// Flush writes the buffered samples now, for callers about to put them at
// risk: the power tools before a reboot or shutdown they scheduled.
func (s *sampler) Flush() error { return s.flush() }

// flushSoon asks the flusher for a flush without waiting for it.
func (s *sampler) flushSoon() {
	select {
	case s.flushC <- struct{}{}:
	default:
	}
}

// flush writes the buffer, one transaction per job. Retention rides along
// in the same commits once per pruneEvery: a prune of its own would be a
// commit (meta page, fsync) of its own.
func (s *sampler) flush() error {
	s.flushing.Lock()
	defer s.flushing.Unlock()
	s.mu.Lock()
	buf := s.buf
	s.buf = map[string][]store.Sample{}
	s.mu.Unlock()
	var errs []error
	var jobs map[string]store.Job
	pruning := s.now().Sub(s.lastPrune) >= pruneEvery
	if pruning {
		list, err := s.db.ListJobs()
		if err != nil {
			errs = append(errs, err)
			pruning = false
		}
		jobs = make(map[string]store.Job, len(list))
		for _, j := range list {
			jobs[j.ID] = j
		}
	}
	now := s.now()
	for job, batch := range buf {
		var err error
		if j, ok := jobs[job]; ok && pruning {
			if _, err = s.db.AppendSamplesPruning(job, batch, retentionBound(now, j)); err != nil {
				// Retention failing (a damaged old block, say) must not
				// keep the new samples from disk.
				errs = append(errs, err)
				err = s.db.AppendSamples(job, batch)
			}
		} else {
			err = s.db.AppendSamples(job, batch)
		}
		if err != nil {
			errs = append(errs, err)
			// Keep them for the next flush rather than lose them.
			s.mu.Lock()
			s.buf[job] = append(batch, s.buf[job]...)
			s.mu.Unlock()
		}
	}
	if pruning {
		if err := s.prune(jobs, buf); err != nil {
			errs = append(errs, err)
		} else {
			s.lastPrune = now
		}
	}
	err := errors.Join(errs...)
	s.mu.Lock()
	s.lastFlush, s.flushErr = s.now(), err
	s.mu.Unlock()
	return err
}

func retentionBound(now time.Time, j store.Job) time.Time {
	return now.Add(-time.Duration(j.RetentionHours) * time.Hour)
}

// prune applies retention to the jobs the flush did not write (those it
// wrote were pruned in the same commit), and forgets stopped jobs once
// their history is gone.
func (s *sampler) prune(jobs map[string]store.Job, flushed map[string][]store.Sample) error {
	now := s.now()
	for _, j := range jobs {
		if _, ok := flushed[j.ID]; !ok {
			if _, err := s.db.PruneSamples(j.ID, retentionBound(now, j)); err != nil {
				return err
			}
		}
		if j.Status == "stopped" && !j.Default {
			if st, err := s.db.SampleStats(j.ID); err == nil && st.Count == 0 && now.Sub(j.StoppedAt) > time.Duration(j.RetentionHours)*time.Hour {
				_ = s.db.DeleteSamples(j.ID)
				_ = s.db.DeleteJob(j.ID)
			}
		}
	}
	return nil
}

// pruneEvery is how often retention runs.
const pruneEvery = time.Hour

// throttleUnderVoltage is bit 0 of the firmware's get_throttled value:
// under-voltage now (bit 16 is "since boot").
const throttleUnderVoltage = 1 << 0

var errTooManyJobs = errors.New("too many sampling jobs")

// Create stores and starts a job.
func (s *sampler) create(interval, retention int, by string, isDefault bool) (store.Job, error) {
	s.mu.Lock()
	n := len(s.running)
	s.mu.Unlock()
	if n >= s.cfg.MaxJobs {
		return store.Job{}, errTooManyJobs
	}
	id, err := store.NewJobID()
	if err != nil {
		return store.Job{}, err
	}
	j := store.Job{ID: id, IntervalSeconds: interval, RetentionHours: retention, Status: "running", Default: isDefault, CreatedBy: by, CreatedAt: s.now().UTC()}
	if err := s.db.PutJob(j); err != nil {
		return store.Job{}, err
	}
	s.run(s.ctx, j)
	return j, nil
}

// StopJob marks a job stopped (its samples stay until retention removes them).
func (s *sampler) StopJob(id string) (store.Job, error) {
	j, err := s.db.GetJob(id)
	if err != nil {
		return store.Job{}, err
	}
	s.mu.Lock()
	if cancel, ok := s.running[id]; ok {
		cancel()
		delete(s.running, id)
	}
	s.mu.Unlock()
	if j.Status != "stopped" {
		j.Status, j.StoppedAt = "stopped", s.now().UTC()
		if err := s.db.PutJob(j); err != nil {
			return store.Job{}, err
		}
	}
	return j, nil
}

func (s *sampler) run(ctx context.Context, j store.Job) {
	jctx, cancel := context.WithCancel(ctx)
	s.mu.Lock()
	s.running[j.ID] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		every := time.Duration(j.IntervalSeconds) * s.unit
		var prev *sysinfo.Counters
		tick := func() {
			smp, cur, err := s.read(jctx, prev)
			if err != nil {
				if jctx.Err() == nil {
					s.log.Warn("sampling failed", "job", j.ID, "err", err)
				}
				return
			}
			prev = cur
			s.mu.Lock()
			// StopJob cancels under s.mu: a reading that finishes after
			// the stop is dropped, so a stopped job never grows.
			if jctx.Err() != nil {
				s.mu.Unlock()
				return
			}
			s.buf[j.ID] = append(s.buf[j.ID], smp)
			s.last[j.ID] = smp.Time
			s.taken++
			uv := smp.HasThrottle && smp.Throttle&throttleUnderVoltage != 0
			rising := uv && !s.underVolt
			s.underVolt = uv
			s.mu.Unlock()
			if rising {
				// The supply is sagging: a brown-out may follow within
				// seconds, so write what is buffered now.
				s.log.Warn("under-voltage reported; flushing samples", "job", j.ID)
				s.flushSoon()
			}
		}
		tick()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-jctx.Done():
				return
			case <-t.C:
				tick()
			}
		}
	}()
}

// read takes one sample; rates need the previous counters, so the first
// sample of a run has none.
func (s *sampler) read(ctx context.Context, prev *sysinfo.Counters) (store.Sample, *sysinfo.Counters, error) {
	h, err := s.sys.Health(ctx)
	if err != nil {
		return store.Sample{}, nil, err
	}
	smp := sampleOf(h)
	if s.ctr == nil {
		return smp, nil, nil
	}
	cur, err := s.ctr.Counters(ctx)
	if err != nil {
		return smp, nil, nil // rates are extra: a sample without them is still a sample
	}
	if prev != nil {
		net, disk := sysinfo.Rates(*prev, cur)
		for _, r := range net {
			smp.Net = append(smp.Net, store.NetRate{Name: r.Name, RxBytesPerSec: float32(r.RxBytesPerSec), TxBytesPerSec: float32(r.TxBytesPerSec),
				RxPacketsPerSec: float32(r.RxPacketsPerSec), TxPacketsPerSec: float32(r.TxPacketsPerSec), RxErrorsPerSec: float32(r.RxErrorsPerSec),
				TxErrorsPerSec: float32(r.TxErrorsPerSec), RxDropsPerSec: float32(r.RxDropsPerSec), TxDropsPerSec: float32(r.TxDropsPerSec)})
		}
		for _, r := range disk {
			smp.Disk = append(smp.Disk, store.DiskRate{Name: r.Name, ReadBytesPerSec: float32(r.ReadBytesPerSec), WriteBytesPerSec: float32(r.WriteBytesPerSec),
				ReadIOPS: float32(r.ReadIOPS), WriteIOPS: float32(r.WriteIOPS), BusyPercent: float32(r.BusyPercent)})
		}
	}
	return smp, &cur, nil
}

func sampleOf(h sysinfo.Health) store.Sample {
	opt := func(p *float64) float32 {
		if p == nil {
			return float32(math.NaN())
		}
		return float32(*p)
	}
	s := store.Sample{Time: h.Time, CPUPercent: float32(h.CPUUsagePercent), FreqMHz: opt(h.CPUFreqMHz), TempC: opt(h.TemperatureCelsius),
		Load1: float32(h.Load1), Load5: float32(h.Load5), Load15: float32(h.Load15),
		MemTotal: h.MemoryTotalBytes, MemUsed: h.MemoryUsedBytes, MemAvail: h.MemoryAvailableBytes,
		SwapTotal: h.SwapTotalBytes, SwapUsed: h.SwapUsedBytes, DiskTotal: h.DiskTotalBytes, DiskUsed: h.DiskUsedBytes}
	if t := h.Throttle; t != nil {
		s.HasThrottle, s.Throttle = true, t.Raw&store.ThrottleKnownBits
		if t.UnderVoltageOnly {
			s.Throttle = t.Raw&1 | store.UnderVoltageOnly
		}
	}
	return s
}

// recent returns up to n of a job's newest samples, newest first, buffered
// ones included: with a long flush interval a new job has nothing stored
// for a while.
func (s *sampler) recent(job string, n int) []store.Sample {
	s.mu.Lock()
	pending := s.buf[job]
	out := make([]store.Sample, 0, n)
	for i := len(pending) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, pending[i])
	}
	s.mu.Unlock()
	if len(out) < n {
		_ = s.db.ScanSamplesDesc(job, time.Time{}, time.Time{}, func(x store.Sample) bool {
			out = append(out, x)
			return len(out) < n
		})
	}
	return out
}

// Scan calls fn for a job's samples in [from, until), oldest first: the
// stored ones, then those still waiting for the next flush.
func (s *sampler) Scan(job string, from, until time.Time, fn func(store.Sample) bool) error {
	// No flush may run between taking the buffer and reading the file, or
	// samples in flight between the two would be in neither.
	s.flushing.Lock()
	defer s.flushing.Unlock()
	s.mu.Lock()
	pending := append([]store.Sample(nil), s.buf[job]...)
	s.mu.Unlock()
	stopped := false
	var last time.Time
	err := s.db.ScanSamples(job, from, until, func(x store.Sample) bool {
		last = x.Time
		if !fn(x) {
			stopped = true
			return false
		}
		return true
	})
	if err != nil || stopped {
		return err
	}
	for _, x := range pending {
		if x.Time.Before(from) || (!until.IsZero() && !x.Time.Before(until)) || !x.Time.After(last) {
			continue
		}
		if !fn(x) {
			return nil
		}
	}
	return nil
}

// jobInfo is a job with what it has gathered.
type jobInfo struct {
	store.Job
	Samples  int
	First    time.Time
	Last     time.Time
	Buffered int
}

// Jobs lists every job with its sample counts.
func (s *sampler) Jobs() ([]jobInfo, error) {
	jobs, err := s.db.ListJobs()
	if err != nil {
		return nil, err
	}
	out := make([]jobInfo, 0, len(jobs))
	for _, j := range jobs {
		s.flushing.Lock()
		st, err := s.db.SampleStats(j.ID)
		if err != nil {
			s.flushing.Unlock()
			return nil, err
		}
		s.mu.Lock()
		pend := s.buf[j.ID]
		last := s.last[j.ID]
		s.mu.Unlock()
		s.flushing.Unlock()
		ji := jobInfo{Job: j, Samples: st.Count + len(pend), First: st.First, Last: last, Buffered: len(pend)}
		if ji.First.IsZero() && len(pend) > 0 {
			ji.First = pend[0].Time
		}
		out = append(out, ji)
	}
	sort.SliceStable(out, func(i, k int) bool { return out[i].CreatedAt.Before(out[k].CreatedAt) })
	return out, nil
}

// resolveJob picks the job a query means: the given id, else the default
// job, else the newest running one.
func (s *sampler) resolveJob(id string) (store.Job, error) {
	if id != "" {
		j, err := s.db.GetJob(id)
		if errors.Is(err, store.ErrJobNotFound) {
			return store.Job{}, tool.Errf(CodeNotFound, "no sampling job %q", id).With("parameter", "job_id").
				Suggest(tool.SuggestedCall{Tool: "metrics_list_sampling_jobs", Why: "see the jobs and their ids"})
		}
		return j, err
	}
	jobs, err := s.db.ListJobs()
	if err != nil {
		return store.Job{}, err
	}
	var pick *store.Job
	for i := range jobs {
		j := &jobs[i]
		if j.Default && j.Status == "running" {
			return *j, nil
		}
		if j.Status == "running" || pick == nil {
			pick = j
		}
	}
	if pick == nil {
		return store.Job{}, tool.Errf(CodeFailedPrecondition, "no sampling job has run on this device, so there is no history").
			Suggest(tool.SuggestedCall{Tool: "metrics_start_sampling_job", Arguments: map[string]any{"interval_seconds": 10, "retention_hours": 48}, Why: "start collecting history"})
	}
	return *pick, nil
}

// Stats of the sampler for status screens.
func (s *sampler) Stats() (taken int64, lastFlush time.Time, flushErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taken, s.lastFlush, s.flushErr
}

// samplerHealth is how the sampler keeps up, for /metrics.
type samplerHealth struct {
	Jobs     []jobLag
	Buffered int  // samples taken and not yet flushed to the store
	FlushOK  bool // the last flush reached the store
}

// jobLag is how far a sampling job is behind: the age of its newest sample
// beyond one interval (0 is on time; a growing value is a job that stopped
// sampling). Measured is false for a job that is not running or has no
// sample yet, which has no lag to speak of.
type jobLag struct {
	ID       string
	Lag      time.Duration
	Measured bool
}

// Health reports how the sampler keeps up, read under its own lock so that
// no caller reaches into its state.
func (s *sampler) Health() (samplerHealth, error) {
	jobs, err := s.db.ListJobs()
	if err != nil {
		return samplerHealth{}, err
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	h := samplerHealth{FlushOK: s.flushErr == nil, Jobs: make([]jobLag, len(jobs))}
	for _, b := range s.buf {
		h.Buffered += len(b)
	}
	for i, j := range jobs {
		h.Jobs[i].ID = j.ID
		_, running := s.running[j.ID]
		if last, ok := s.last[j.ID]; ok && running && j.Status == "running" {
			h.Jobs[i].Lag = max(now.Sub(last)-time.Duration(j.IntervalSeconds)*s.unit, 0)
			h.Jobs[i].Measured = true
		}
	}
	return h, nil
}
