package store

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/raspi-mcp/raspi-mcp/internal/iostat"
)

// procIO reads one counter of /proc/self/io (iostat.Proc): write_bytes,
// pages dirtied, the SD-card wear figure, or wchar, bytes handed to write.
func procIO(field string) (n int64, ok bool) { return iostat.Proc("self", field) }

// ioMeter reports bytes written per sample from /proc/self/io: disk_B/sample
// from write_bytes (pages dirtied, what reaches the card) and wchar_B/sample
// from wchar (bytes handed to pwrite), the figure BenchmarkAppendAudit uses.
type ioMeter struct{ disk0, wchar0 int64 }

func startIO() ioMeter {
	d, _ := procIO("write_bytes")
	w, _ := procIO("wchar")
	return ioMeter{d, w}
}

func (m ioMeter) report(b *testing.B, samples int) {
	if d, ok := procIO("write_bytes"); ok {
		b.ReportMetric(float64(d-m.disk0)/float64(samples), "disk_B/sample")
	}
	if w, ok := procIO("wchar"); ok {
		b.ReportMetric(float64(w-m.wchar0)/float64(samples), "wchar_B/sample")
	}
}

// prefillDay gives job a day of history (17,280 samples) with fsync off, so
// append benchmarks measure a tree of realistic depth rather than an empty
// bucket. It returns the index of the next sample.
func prefillDay(b *testing.B, db *DB, job string) int {
	b.Helper()
	db.bolt.NoSync = true
	appendBatches(b, db, job, 0, samplesPerDay/12, 12)
	db.bolt.NoSync = false
	return samplesPerDay
}

const (
	samplesPerDay  = 24 * 60 * 60 / 5
	samplesPerWeek = 7 * samplesPerDay
)

// benchAppend appends b.N batches of size samples, durably, after a day of
// history.
func benchAppend(b *testing.B, size int) {
	db := openTest(b)
	next := prefillDay(b, db, "job-a")
	batch := make([]Sample, size)
	for j := range batch {
		batch[j] = realisticSample(next + j)
	}
	io := startIO()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range batch {
			batch[j].Time = at(next)
			next++
		}
		if err := db.AppendSamples("job-a", batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	io.report(b, b.N*size)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/sample")
}

// BenchmarkAppendSamplesBatch12 is the sampler's pattern: 12 samples (one
// minute at 5 s) per transaction, one fsync per minute.
func BenchmarkAppendSamplesBatch12(b *testing.B) { benchAppend(b, 12) }

// BenchmarkAppendSamplesOnePerTx is the anti-pattern, a commit per sample,
// for comparison: the same pages are rewritten for one sample instead of 12.
func BenchmarkAppendSamplesOnePerTx(b *testing.B) { benchAppend(b, 1) }

func BenchmarkSamplesEncode(b *testing.B) {
	s := realisticSample(1)
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = EncodeSample(buf[:0], s)
	}
	b.ReportMetric(float64(len(buf)), "B/sample")
}

func BenchmarkSamplesDecode(b *testing.B) {
	enc := EncodeSample(nil, realisticSample(1))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeSample(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// weekFixture is a store holding 7 days of samples at 5 s, written as the
// sampler writes them (batches of 12, synthetic times), shared by the
// benchmarks that need it and built at most once per test binary run.
type weekFixture struct {
	once  sync.Once
	dir   string
	db    *DB
	err   error
	build time.Duration
}

var week weekFixture // test-only; TestMain removes it

func TestMain(m *testing.M) {
	code := m.Run()
	if week.db != nil {
		_ = week.db.Close()
	}
	if week.dir != "" {
		_ = os.RemoveAll(week.dir)
	}
	os.Exit(code)
}

// weekDB returns the 7-day fixture. It is built with fsync off: bbolt lays
// out pages the same either way, and 10,080 fsyncs would take minutes on a
// slow disk for nothing the size figures depend on.
func weekDB(b *testing.B) *DB {
	b.Helper()
	week.once.Do(func() {
		week.dir, week.err = os.MkdirTemp("", "store-week-")
		if week.err != nil {
			return
		}
		week.db, week.err = Open(filepath.Join(week.dir, "state.db"), Options{})
		if week.err != nil {
			return
		}
		start := time.Now()
		week.db.bolt.NoSync = true
		batch := make([]Sample, 12)
		for i := 0; i < samplesPerWeek && week.err == nil; i += len(batch) {
			for j := range batch {
				batch[j] = realisticSample(i + j)
			}
			week.err = week.db.AppendSamples("job-a", batch)
		}
		week.db.bolt.NoSync = false
		if week.err == nil {
			week.err = week.db.bolt.Sync()
		}
		week.build = time.Since(start)
	})
	if week.err != nil {
		b.Fatalf("7-day fixture: %v", week.err)
	}
	return week.db
}

// BenchmarkSamplesStats7Days times SampleStats over a week of samples and
// reports the database size that week takes: file_B is the file's length
// (bbolt grows it ahead in steps, up to 16 MiB past the data), disk_B the
// blocks actually allocated, used_B the pages bbolt has handed out (its high
// water mark), each also per sample.
func BenchmarkSamplesStats7Days(b *testing.B) {
	db := weekDB(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st, err := db.SampleStats("job-a")
		if err != nil || st.Count != samplesPerWeek {
			b.Fatalf("SampleStats = %+v, %v", st, err)
		}
	}
	b.StopTimer()
	fi, err := os.Stat(db.Path())
	if err != nil {
		b.Fatal(err)
	}
	var used int64
	var leaves, branches int
	var fill float64
	err = db.bolt.View(func(tx *bolt.Tx) error {
		used = tx.Size()
		st := jobSamples(tx, "job-a").Stats()
		leaves, branches = st.LeafPageN, st.BranchPageN
		fill = float64(st.LeafInuse) / float64(st.LeafAlloc)
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size()), "file_B")
	b.ReportMetric(float64(fi.Size())/samplesPerWeek, "file_B/sample")
	b.ReportMetric(float64(used)/samplesPerWeek, "used_B/sample")
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		b.ReportMetric(float64(st.Blocks*512), "disk_B")
	}
	b.Logf("7 days = %d samples: file %d B, used %d B, %d leaves (%.0f%% full), %d branches; built in %s",
		samplesPerWeek, fi.Size(), used, leaves, 100*fill, branches, week.build.Round(time.Millisecond))
}

func benchScan(b *testing.B, from, until time.Time, want int) {
	db := weekDB(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		var sum float32
		err := db.ScanSamples("job-a", from, until, func(s Sample) bool {
			n++
			sum += s.CPUPercent
			return true
		})
		if err != nil || n != want {
			b.Fatalf("scan: %d samples, %v; want %d", n, err, want)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*want), "ns/sample")
}

// BenchmarkScan7Days decodes the whole week: the worst case of a history
// query.
func BenchmarkScan7Days(b *testing.B) {
	benchScan(b, time.Time{}, time.Time{}, samplesPerWeek)
}

// BenchmarkScan24h decodes the last day of the week.
func BenchmarkScan24h(b *testing.B) {
	benchScan(b, at(samplesPerWeek-samplesPerDay), time.Time{}, samplesPerDay)
}

// BenchmarkScanDescLatest100 is "the latest N": a seek to the end and 100
// steps back, independent of how much history there is.
func BenchmarkScanDescLatest100(b *testing.B) {
	db := weekDB(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := 0
		err := db.ScanSamplesDesc("job-a", time.Time{}, time.Time{}, func(Sample) bool { n++; return n < 100 })
		if err != nil || n != 100 {
			b.Fatalf("scan: %d samples, %v", n, err)
		}
	}
}

// BenchmarkSamplesOpen7Days is what a week of samples adds to agent start-up:
// with NoFreelistSync, Open rebuilds the freelist by walking every page.
func BenchmarkSamplesOpen7Days(b *testing.B) {
	db := weekDB(b)
	path := filepath.Join(b.TempDir(), "copy.db")
	if err := db.bolt.View(func(tx *bolt.Tx) error { return tx.CopyFile(path, 0o600) }); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFlushIntervalCurve is the SD-card cost of sampling every 5 s as a
// function of the flush interval, measured the way the sampler writes: two
// days of history already stored (48 h retention, so retention has work;
// pages freed by it to reuse), then, per iteration, six hours of flushes,
// each one durable commit of the interval's samples, retention riding along
// in the first flush of every hour (AppendSamplesPruning). disk_MB/day is
// write_bytes (pages dirtied, what reaches the card) scaled to a day,
// wchar_MB/day the bytes passed to pwrite, disk_B/flush and wchar_B/flush
// the same per flush. -benchtime 1x is enough.
func BenchmarkFlushIntervalCurve(b *testing.B) {
	for _, every := range []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute,
		10 * time.Minute, 15 * time.Minute, 30 * time.Minute, 45 * time.Minute, time.Hour} {
		b.Run(every.String(), func(b *testing.B) { flushCurvePoint(b, every) })
	}
}

func flushCurvePoint(b *testing.B, every time.Duration) {
	const (
		history   = 2 * samplesPerDay
		span      = 6 * time.Hour
		retention = 48 * time.Hour
	)
	db := openTest(b)
	db.bolt.NoSync = true
	// Six hours more than retention keeps, pruned before measuring: a
	// device in its steady state reuses the pages retention frees instead
	// of growing the file (which costs the filesystem block allocations).
	extra := int(span / sampleStep)
	appendBatches(b, db, "job-a", 0, (history+extra)/12, 12)
	if _, err := db.PruneSamples("job-a", at(extra)); err != nil {
		b.Fatal(err)
	}
	db.bolt.NoSync = false
	if err := db.bolt.Sync(); err != nil {
		b.Fatal(err)
	}
	per := int(every / sampleStep)
	flushes := int(span / every)
	next := history + extra
	batch := make([]Sample, per)
	lastPrune := time.Time{}
	dev0, devOK := iostat.DeviceWritten(b)
	io := startIO()
	b.ResetTimer()
	for range b.N {
		for range flushes {
			for j := range batch {
				batch[j] = realisticSample(next)
				next++
			}
			now := batch[per-1].Time
			var err error
			if now.Sub(lastPrune) >= time.Hour {
				_, err = db.AppendSamplesPruning("job-a", batch, now.Add(-retention))
				lastPrune = now
			} else {
				err = db.AppendSamples("job-a", batch)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	d, dok := procIO("write_bytes")
	w, wok := procIO("wchar")
	if !dok || !wok {
		b.Skip("no /proc/self/io")
	}
	scale := float64(24*time.Hour) / float64(span) / float64(b.N)
	n := float64(flushes * b.N)
	b.ReportMetric(float64(d-io.disk0)*scale/1e6, "disk_MB/day")
	b.ReportMetric(float64(w-io.wchar0)*scale/1e6, "wchar_MB/day")
	b.ReportMetric(float64(d-io.disk0)/n, "disk_B/flush")
	b.ReportMetric(float64(w-io.wchar0)/n, "wchar_B/flush")
	if dev1, ok := iostat.DeviceWritten(b); ok && devOK {
		b.ReportMetric(float64(dev1-dev0)*scale/1e6, "dev_MB/day")
		b.ReportMetric(float64(dev1-dev0)/n, "dev_B/flush")
	}
}
