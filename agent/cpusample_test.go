package agent

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/procs"
)

// fakeProcs is a process table on a clock the test moves: the uptime is the
// clock's, and PID 7 uses exactly half a core (50 ticks a second at 100 Hz).
// Every wait the sampler asks for is recorded and lasts until release.
type fakeProcs struct {
	mu       sync.Mutex
	t        time.Time
	reads    int
	fail     error         // the next reading's error, once
	readGate chan struct{} // when set, readings wait until it is closed
	waits    []time.Duration
	until    time.Time // where the pending wait ends
	gate     chan time.Time
}

var fakeEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakeProcs() (*fakeProcs, *cpuSampler) {
	f := &fakeProcs{t: fakeEpoch, gate: make(chan time.Time)}
	s := newCPUSampler(f.read)
	s.now, s.after = f.now, f.after
	return f, s
}

func (f *fakeProcs) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeProcs) advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func (f *fakeProcs) after(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits = append(f.waits, d)
	f.until = f.t.Add(d)
	return f.gate
}

// release ends the pending wait: the clock moves to where it was to end.
func (f *fakeProcs) release() {
	f.mu.Lock()
	f.t = f.until
	close(f.gate)
	f.gate = make(chan time.Time)
	f.mu.Unlock()
}

func (f *fakeProcs) read(context.Context) (procs.Snapshot, error) {
	f.mu.Lock()
	gate := f.readGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if err := f.fail; err != nil {
		f.fail = nil
		return procs.Snapshot{}, err
	}
	up := 1000 + f.t.Sub(fakeEpoch).Seconds()
	return procs.Snapshot{Uptime: up, CPUs: 2, Procs: []procs.Proc{{PID: 7, StartTicks: 100, UTime: uint64(math.Round(up * 50))}}}, nil
}

func (f *fakeProcs) counts() (reads, waits int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads, len(f.waits)
}

// callers is how many callers started or joined the open flight.
func callers(s *cpuSampler) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flight == nil {
		return 0
	}
	return s.flight.callers
}

type sampled struct {
	pair *cpuPair
	err  error
}

// sampleAsync starts n callers and returns where their results arrive.
func sampleAsync(ctx context.Context, s *cpuSampler, n int) <-chan sampled {
	out := make(chan sampled, n)
	for range n {
		go func() {
			p, err := s.sample(ctx)
			out <- sampled{p, err}
		}()
	}
	return out
}

// checkPair wants a pair over one real window in which PID 7 used half a core.
func checkPair(t *testing.T, p *cpuPair, window time.Duration) {
	t.Helper()
	if (p.window-window).Abs() > time.Microsecond || math.Abs(p.cpu[7]-50) > 1e-6 {
		t.Fatalf("pair over %v with PID 7 at %v%%, want %v and 50%%", p.window, p.cpu[7], window)
	}
}

// Fifty callers, half of them coming while the window is already open,
// share one pair of readings and one wait: the window is neither queued per
// caller nor restarted for a late one. Later callers read once each and
// never wait, until the kept readings grow too old.
func TestCPUSamplerSharesOneWindow(t *testing.T) {
	f, s := newFakeProcs()
	ctx := context.Background()
	early := sampleAsync(ctx, s, 25)
	waitFor(t, "the first 25 callers in one flight", time.Minute, func() bool { _, w := f.counts(); return w == 1 && callers(s) == 25 })
	f.advance(400 * time.Millisecond)
	late := sampleAsync(ctx, s, 25)
	waitFor(t, "the late 25 callers to join", time.Minute, func() bool { return callers(s) == 50 })
	f.release()
	var first *cpuPair
	for range 25 {
		for _, ch := range []<-chan sampled{early, late} {
			r := <-ch
			if r.err != nil {
				t.Fatal(r.err)
			}
			if first == nil {
				first = r.pair
			}
			if r.pair != first {
				t.Fatalf("callers got different pairs: %p and %p", first, r.pair)
			}
		}
	}
	checkPair(t, first, cpuMinWindow)
	if reads, waits := f.counts(); reads != 2 || waits != 1 || f.waits[0] != cpuMinWindow {
		t.Fatalf("50 callers took %d readings and waited %v, want 2 readings and one wait of %v", reads, f.waits, cpuMinWindow)
	}

	// A caller after the flight gets a fresh reading, diffed against the
	// kept baseline that is a window old: one reading, no wait.
	next, err := s.sample(ctx)
	if err != nil || next == first {
		t.Fatalf("the next caller got %p, %v; want a new pair", next, err)
	}
	checkPair(t, next, cpuMinWindow)
	if reads, waits := f.counts(); reads != 3 || waits != 1 {
		t.Fatalf("the next pair took %d readings in all and %d waits, want 3 and 1", reads, waits)
	}
	// The baseline is the newest kept reading that is a window old.
	for _, step := range []struct{ advance, window time.Duration }{
		{200 * time.Millisecond, 700 * time.Millisecond}, // the first baseline; the one at 500 ms is 200 ms old
		{400 * time.Millisecond, 600 * time.Millisecond}, // the flight's closing reading at 500 ms
	} {
		f.advance(step.advance)
		p, err := s.sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		checkPair(t, p, step.window)
	}
	// A stream of calls 20 ms apart: never a wait, never less than a
	// window, and only a few tables kept. Once the readings kept before
	// the stream (400 ms apart) have aged out, kept readings are a quarter
	// window apart (rounded up to the 20 ms of the calls), so no window is
	// longer than 1.25 windows plus one gap.
	for i := range 200 {
		f.advance(20 * time.Millisecond)
		p, err := s.sample(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p.window < cpuMinWindow-time.Microsecond || i >= 50 && p.window > cpuMinWindow*5/4+20*time.Millisecond {
			t.Fatalf("call %d of the stream: window %v", i, p.window)
		}
		checkPair(t, p, p.window)
		if s.mu.Lock(); len(s.kept) > 7 {
			t.Fatalf("%d readings kept", len(s.kept))
		}
		s.mu.Unlock()
	}
	if reads, waits := f.counts(); reads != 205 || waits != 1 {
		t.Fatalf("%d readings and %d waits after the stream, want 205 and 1", reads, waits)
	}
	// Too long after, a fresh baseline and one window's wait again.
	f.advance(cpuMaxAge + time.Second)
	res := sampleAsync(ctx, s, 3)
	waitFor(t, "a fresh flight's wait", time.Minute, func() bool { _, w := f.counts(); return w == 2 && callers(s) == 3 })
	f.release()
	for range 3 {
		if r := <-res; r.err != nil {
			t.Fatal(r.err)
		} else {
			checkPair(t, r.pair, cpuMinWindow)
		}
	}
	if reads, _ := f.counts(); reads != 207 || f.waits[1] != cpuMinWindow {
		t.Fatalf("%d readings and waits %v, want 207 and a second wait of %v", reads, f.waits, cpuMinWindow)
	}
}

// A caller that gives up leaves the flight running for the others.
func TestCPUSamplerCallerLeaves(t *testing.T) {
	f, s := newFakeProcs()
	ctx, cancel := context.WithCancel(context.Background())
	leaving := sampleAsync(ctx, s, 1)
	waitFor(t, "the first flight", time.Minute, func() bool { return callers(s) == 1 })
	staying := sampleAsync(context.Background(), s, 1)
	waitFor(t, "a second caller to join", time.Minute, func() bool { return callers(s) == 2 })
	cancel()
	if r := <-leaving; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", r.err)
	}
	f.release()
	r := <-staying
	if r.err != nil {
		t.Fatal(r.err)
	}
	checkPair(t, r.pair, cpuMinWindow)
	if reads, waits := f.counts(); reads != 2 || waits != 1 {
		t.Fatalf("%d readings, %d waits", reads, waits)
	}
}

// A failed reading fails every caller of its flight alike and is not kept:
// the next caller reads afresh.
func TestCPUSamplerReadError(t *testing.T) {
	f, s := newFakeProcs()
	boom := errors.New("procs: proc/stat: input/output error")
	gate := make(chan struct{})
	f.fail, f.readGate = boom, gate
	res := sampleAsync(context.Background(), s, 5)
	waitFor(t, "5 callers in the failing flight", time.Minute, func() bool { return callers(s) == 5 })
	f.mu.Lock()
	f.readGate = nil
	f.mu.Unlock()
	close(gate)
	for range 5 {
		if r := <-res; !errors.Is(r.err, boom) || r.pair != nil {
			t.Fatalf("got %p, %v; want %v", r.pair, r.err, boom)
		}
	}
	if reads, waits := f.counts(); reads != 1 || waits != 0 {
		t.Fatalf("%d readings, %d waits for a failed baseline", reads, waits)
	}
	res = sampleAsync(context.Background(), s, 1)
	waitFor(t, "a fresh flight's wait", time.Minute, func() bool { _, w := f.counts(); return w == 1 })
	f.release()
	if r := <-res; r.err != nil {
		t.Fatal(r.err)
	} else {
		checkPair(t, r.pair, cpuMinWindow)
	}
	if reads, _ := f.counts(); reads != 3 {
		t.Fatalf("%d readings, want 1 failed and 2 for the next pair", reads)
	}
}
