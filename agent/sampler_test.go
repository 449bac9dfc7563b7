package agent

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

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
	s := NewSampler(r.db, board, cfg, r.a.log)
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
	if res, sc := r.as(operator, "system_reboot", map[string]any{"at": at, "dry_run": true, "reason": "kernel update"}); res.IsError {
		t.Fatalf("dry run: %v", sc)
	}
	reader := Principal{Name: "bob", UID: 1001, Role: RoleRead}
	if res, sc := r.as(reader, "system_reboot", map[string]any{"at": at, "confirm": true, "reason": "x"}); errCode(res, sc) != CodePermissionDenied {
		t.Fatalf("read role reboots: %v", sc)
	}
	if n := stored(); n != 0 {
		t.Fatalf("%d samples stored by a dry run or a refused call", n)
	}
	if res, sc := r.as(operator, "system_reboot", map[string]any{"at": at, "confirm": true, "reason": "kernel update"}); res.IsError {
		t.Fatalf("reboot: %v", sc)
	}
	if n := stored(); n != 1 {
		t.Fatalf("%d samples stored after scheduling the reboot, want 1", n)
	}
}
