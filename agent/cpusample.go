package agent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/procs"
)

// Window bounds: a pair's two readings are at least cpuMinWindow apart, so
// cpu_percent is use over a real window as top shows it; a kept reading
// older than cpuMaxAge is too stale to diff against.
const (
	cpuMinWindow = 500 * time.Millisecond
	cpuMaxAge    = 10 * time.Second
	// cpuReadLimit ends the context a flight's reader is given: the flight
	// is nobody's call, so no caller's context may end it.
	cpuReadLimit = 30 * time.Second
)

// cpuSampler shares process readings among every caller of the process
// tools. Reading CPU use needs two readings a window apart; were each
// caller to take its own pair under one lock, n callers would queue for n
// windows, and any read-only client could stall everyone else's calls.
//
// Instead one flight at a time takes a reading, and a caller that arrives
// while a flight is open joins it and gets the same pair. A flight diffs
// its fresh reading against a kept earlier one that is at least a window
// old, so after the first it reads once and does not wait; only when no
// kept reading is recent enough (the first call, or after maxAge of quiet)
// does it take a baseline and wait out one window. So no caller waits more
// than one window plus two readings however many there are, the window
// never restarts for a newcomer, and every caller sees a process table
// read after it asked, or being read when it asked: a process that was
// just signalled does not linger in a reused listing.
type cpuSampler struct {
	read   func(context.Context) (procs.Snapshot, error) // one reading of the process table
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
	window time.Duration // least time between a pair's two readings
	maxAge time.Duration // a kept reading older than this is not a baseline

	mu     sync.Mutex
	kept   []cpuReading // baselines for later flights, oldest first; only a flight changes it
	flight *cpuFlight   // the reading being taken; nil when none is
}

// cpuReading is one reading and when it was taken, by the sampler's clock.
type cpuReading struct {
	snap procs.Snapshot
	at   time.Time
}

// cpuPair is one shared result. Every caller of the same flight gets the
// same pair, so nobody may modify it.
type cpuPair struct {
	snap   procs.Snapshot  // the flight's reading
	cpu    map[int]float64 // per-PID CPU % between the baseline and snap
	window time.Duration   // between the two readings, by the kernel's uptime
}

// cpuFlight is a reading being taken; done is closed when pair or err is set.
type cpuFlight struct {
	done    chan struct{}
	pair    *cpuPair
	err     error
	callers int // callers that started or joined it
}

// newCPUSampler reads with read on the wall clock and top's window.
func newCPUSampler(read func(context.Context) (procs.Snapshot, error)) *cpuSampler {
	return &cpuSampler{read: read, now: time.Now, after: time.After, window: cpuMinWindow, maxAge: cpuMaxAge}
}

// sample returns a pair read after the call began, or while it was being
// read when the call came: it joins the open flight or starts one. Only
// the caller's own wait ends with ctx; the flight goes on for the others.
func (s *cpuSampler) sample(ctx context.Context) (*cpuPair, error) {
	s.mu.Lock()
	f := s.flight
	if f == nil {
		f = &cpuFlight{done: make(chan struct{})}
		s.flight = f
		go s.fly(f, s.kept)
	}
	f.callers++
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.pair, f.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fly takes one pair and hands it to the flight's callers. A failed flight
// keeps no reading, so the next caller tries afresh.
func (s *cpuSampler) fly(f *cpuFlight, kept []cpuReading) {
	ctx, cancel := context.WithTimeout(context.Background(), cpuReadLimit)
	defer cancel()
	pair, taken, err := s.measure(ctx, kept)
	s.mu.Lock()
	f.pair, f.err = pair, err
	if err == nil {
		s.kept = s.keep(kept, taken)
	}
	s.flight = nil
	s.mu.Unlock()
	close(f.done)
}

// measure reads once and diffs against the newest kept reading that is at
// least a window old. Lacking one, it waits until a younger kept reading,
// or else a fresh baseline, is a window old. It returns the readings it
// took, oldest first.
func (s *cpuSampler) measure(ctx context.Context, kept []cpuReading) (*cpuPair, []cpuReading, error) {
	now := s.now()
	var taken []cpuReading
	base := -1
	for i, r := range kept {
		if age := now.Sub(r.at); age <= s.maxAge && (base < 0 || age >= s.window) {
			base = i
		}
	}
	var b cpuReading
	if base >= 0 {
		b = kept[base]
	} else {
		snap, err := s.read(ctx)
		if err != nil {
			return nil, nil, err
		}
		b = cpuReading{snap, s.now()}
		taken = append(taken, b)
	}
	if wait := s.window - s.now().Sub(b.at); wait > 0 {
		select {
		case <-s.after(wait):
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("agent: process reading: %w", ctx.Err())
		}
	}
	cur, err := s.read(ctx)
	if err != nil {
		return nil, nil, err
	}
	taken = append(taken, cpuReading{cur, s.now()})
	return &cpuPair{snap: cur, cpu: procs.CPUPercent(b.snap, cur, procs.LiveOptions()),
		window: time.Duration((cur.Uptime - b.snap.Uptime) * float64(time.Second))}, taken, nil
}

// keep adds the new readings to kept and drops what no later flight will
// diff against: readings past maxAge, and those older than the newest one
// already a window old. A reading within a quarter window of the newest
// kept one is not kept, so a stream of calls holds at most a few tables,
// and a pair's window is at most one window plus the gap between two kept
// readings: a quarter window, or the time between calls when they are
// sparser.
func (s *cpuSampler) keep(kept, taken []cpuReading) []cpuReading {
	out := slices.Clone(kept)
	for _, r := range taken {
		if n := len(out); n == 0 || r.at.Sub(out[n-1].at) >= s.window/4 {
			out = append(out, r)
		}
	}
	now, from := s.now(), 0
	for i, r := range out {
		if age := now.Sub(r.at); age > s.maxAge || age >= s.window {
			from = i
			if age > s.maxAge {
				from = i + 1
			}
		}
	}
	return out[from:]
}

// baseline is the newest kept reading at least a window before up (a
// proc/uptime reading) and not past maxAge: a caller that reads one process
// itself diffs against it instead of reading the whole table twice. ok is
// false when no such reading is kept.
func (s *cpuSampler) baseline(up float64) (procs.Snapshot, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for i := len(s.kept) - 1; i >= 0; i-- {
		r := s.kept[i]
		if now.Sub(r.at) > s.maxAge {
			break // older ones are older still
		}
		if up-r.snap.Uptime >= s.window.Seconds() {
			return r.snap, true
		}
	}
	return procs.Snapshot{}, false
}
