package agent

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/raspi-mcp/raspi-mcp/agent/store"
	"github.com/raspi-mcp/raspi-mcp/config"
	"github.com/raspi-mcp/raspi-mcp/hw/sysinfo"
)

// sagBoard is the simulated board with a switchable under-voltage.
type sagBoard struct {
	sysinfo.Source
	uv atomic.Bool
}

func (b *sagBoard) Health(ctx context.Context) (sysinfo.Health, error) {
	h, err := b.Source.Health(ctx)
	raw := uint32(0)
	if b.uv.Load() {
		raw = 0x50005 // under-voltage and throttled now and since boot
	}
	th := sysinfo.ThrottleFromRaw(raw)
	h.Throttle = &th
	return h, err
}

// TestUnderVoltageFlushes: with a flush interval far beyond the test, the
// samples stay buffered until a reading shows under-voltage, which writes
// them at once; a supply that stays low does not flush at every sample.
func TestUnderVoltageFlushes(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	board := &sagBoard{Source: sysinfo.NewSim(sysinfo.SimOptions{})}
	cfg := r.cfg.Metrics
	cfg.FlushInterval = config.Duration(time.Hour)
	s := newSampler(r.db, board, cfg, r.a.log)
	s.unit = 10 * time.Millisecond
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j, err := s.create(1, 1, "test", false)
	if err != nil {
		t.Fatal(err)
	}
	counts := func() (stored, buffered int) {
		jobs, err := s.Jobs()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range jobs {
			if x.ID == j.ID {
				return x.Samples - x.Buffered, x.Buffered
			}
		}
		t.Fatalf("job %s not listed", j.ID)
		return 0, 0
	}
	waitFor(t, "buffered samples", 60*time.Second, func() bool { _, b := counts(); return b >= 3 })
	if st, _ := counts(); st != 0 {
		t.Fatalf("%d samples stored before any flush was due", st)
	}
	board.uv.Store(true)
	var atSag int
	waitFor(t, "the under-voltage flush", 60*time.Second, func() bool { st, _ := counts(); atSag = st; return st >= 4 })
	// Still low: samples buffer again instead of each being flushed.
	waitFor(t, "buffering while still low", 60*time.Second, func() bool { _, b := counts(); return b >= 3 })
	if st, _ := counts(); st != atSag {
		t.Fatalf("stored count moved from %d to %d while the supply stayed low", atSag, st)
	}
	// Recovery and a new sag flush again.
	board.uv.Store(false)
	waitFor(t, "a reading without under-voltage", 60*time.Second, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return !s.underVolt
	})
	board.uv.Store(true)
	waitFor(t, "the second under-voltage flush", 60*time.Second, func() bool { st, _ := counts(); return st > atSag })
}

// TestScheduledRebootFlushesSamples: scheduling a reboot writes the
// buffered samples; a dry run, or a refused call, leaves them buffered.
func TestScheduledRebootFlushesSamples(t *testing.T) {
	r := newRig(t, func(c *config.Config) { c.Metrics.DefaultJob = false })
	smp := store.Sample{Time: time.Now().UTC().Truncate(time.Millisecond), CPUPercent: 5}
	r.a.sampler.mu.Lock()
	r.a.sampler.buf["job-p"] = []store.Sample{smp}
	r.a.sampler.mu.Unlock()
	stored := func() int {
		st, err := r.db.SampleStats("job-p")
		if err != nil {
			t.Fatal(err)
		}
		return st.Count
	}
	at := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	res, _ := r.as(operator, "system_reboot", map[string]any{"at": at, "dry_run": true, "reason": "kernel update"})
	if _, e := decodeResult[SystemPowerOut](t, res); e != nil {
		t.Fatalf("dry run: %+v", e)
	}
	reader := Principal{Name: "bob", UID: 1001, Role: RoleRead}
	res, _ = r.as(reader, "system_reboot", map[string]any{"at": at, "confirm": true, "reason": "x"})
	if _, e := decodeResult[SystemPowerOut](t, res); e == nil || e.Code != CodePermissionDenied {
		t.Fatalf("read role reboots: %+v", e)
	}
	if n := stored(); n != 0 {
		t.Fatalf("%d samples stored by a dry run or a refused call", n)
	}
	res, _ = r.as(operator, "system_reboot", map[string]any{"at": at, "confirm": true, "reason": "kernel update"})
	if _, e := decodeResult[SystemPowerOut](t, res); e != nil {
		t.Fatalf("reboot: %+v", e)
	}
	if n := stored(); n != 1 {
		t.Fatalf("%d samples stored after scheduling the reboot, want 1", n)
	}
}

// TestFlushWritesSamplesWhenRetentionFails: a damaged old block makes
// retention fail, yet the flush still stores the new samples and reports
// the retention error.
func TestFlushWritesSamplesWhenRetentionFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-72 * time.Hour).UTC().Truncate(time.Millisecond)
	if err := db.AppendSamples("job-r", []store.Sample{{Time: old, CPUPercent: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage the old block behind the store's back: a valid format and
	// count, a header that does not decode.
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("samples")).Bucket([]byte("job-r"))
		k, _ := b.Cursor().First()
		return b.Bucket(k).Put([]byte{0}, []byte{3, 1, 0xff})
	})
	if cerr := bdb.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	db, err = store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PutJob(store.Job{ID: "job-r", IntervalSeconds: 5, RetentionHours: 48, Status: "running", CreatedAt: old}); err != nil {
		t.Fatal(err)
	}
	s := newSampler(db, sysinfo.NewSim(sysinfo.SimOptions{}), config.Metrics{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	fresh := store.Sample{Time: time.Now().UTC().Truncate(time.Millisecond), CPUPercent: 7}
	s.buf["job-r"] = []store.Sample{fresh}
	if err := s.flush(); err == nil {
		t.Fatal("flush over a damaged block reported no retention error")
	}
	var got []store.Sample
	if err := db.ScanSamples("job-r", fresh.Time, time.Time{}, func(x store.Sample) bool { got = append(got, x); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got[0].Time.Equal(fresh.Time) || got[0].CPUPercent != 7 {
		t.Fatalf("new samples after the flush: %+v", got)
	}
	if len(s.buf["job-r"]) != 0 {
		t.Fatalf("%d samples still buffered", len(s.buf["job-r"]))
	}
}
