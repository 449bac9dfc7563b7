package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raspi-mcp/raspi-mcp/hw/procs"
)

// Window bounds: a pair's two readings are at least cpuMinWindow apart, so
// cpu_percent is use over a real window as top shows it; a closing reading
// older than cpuMaxAge is too stale to be the next pair's baseline.
const (
	cpuMinWindow = 500 * time.Millisecond
	cpuMaxAge    = 10 * time.Second
	// cpuReadLimit bounds one flight's readings, so a reader that hangs
	// cannot hold every later caller with it.
	cpuReadLimit = 30 * time.Second
)

// cpuSampler shares process readings among every caller of the process
// tools. Reading CPU use needs two readings a window apart; were each
// caller to take its own pair under one lock, n callers would queue for n
// windows, and any read-only client could stall everyone else's calls.
//
// Instead one flight at a time takes a pair: a caller that arrives while a
// flight is open joins it and gets the same pair, and a caller that comes
// within one window of the last pair's closing reading reuses that pair. Otherwise it
// starts a flight whose baseline is the last closing reading when that is
// younger than maxAge (so the flight reads once and need not wait: the
// baseline is already a window old), or a fresh reading followed by one
// window's wait. So no caller waits more than one window plus two
// readings, however many callers there are, and the window never restarts
// for a newcomer.
type cpuSampler struct {
	read   func(context.Context) (procs.Snapshot, error) // one reading of the process table
	now    func() time.Time
	after  func(time.Duration) <-chan time.Time
	window time.Duration // least time between a pair's readings, and how long a pair is reused
	maxAge time.Duration // a closing reading older than this is not a baseline

	mu     sync.Mutex
	last   *cpuPair   // the newest complete pair; nil before the first
	flight *cpuFlight // the pair being taken; nil when none is
}

// cpuPair is one shared result. Every caller of the same flight gets the
// same pair, so nobody may modify it.
type cpuPair struct {
	snap   procs.Snapshot  // the closing reading
	cpu    map[int]float64 // per-PID CPU % between the baseline and snap
	window time.Duration   // between the two readings, by the kernel's uptime
	at     time.Time       // when snap was taken, by the sampler's clock
}

// cpuFlight is a pair being taken; done is closed when pair or err is set.
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

// sample returns the current shared pair, joining or starting a flight when
// the last pair is older than one window. Only the caller's own wait ends
// with ctx: the flight goes on for the others.
func (s *cpuSampler) sample(ctx context.Context) (*cpuPair, error) {
	s.mu.Lock()
	f := s.flight
	if f == nil {
		if p := s.last; p != nil && s.now().Sub(p.at) < s.window {
			s.mu.Unlock()
			return p, nil
		}
		f = &cpuFlight{done: make(chan struct{})}
		s.flight = f
		go s.fly(f, s.last)
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
// leaves the last pair as it was, so the next caller tries afresh.
func (s *cpuSampler) fly(f *cpuFlight, last *cpuPair) {
	ctx, cancel := context.WithTimeout(context.Background(), cpuReadLimit)
	defer cancel()
	pair, err := s.measure(ctx, last)
	s.mu.Lock()
	f.pair, f.err = pair, err
	if err == nil {
		s.last = pair
	}
	s.flight = nil
	s.mu.Unlock()
	close(f.done)
}

// measure takes a closing reading at least one window after its baseline.
func (s *cpuSampler) measure(ctx context.Context, last *cpuPair) (*cpuPair, error) {
	var base procs.Snapshot
	var at time.Time
	if last != nil && s.now().Sub(last.at) <= s.maxAge {
		base, at = last.snap, last.at
	} else {
		var err error
		if base, err = s.read(ctx); err != nil {
			return nil, err
		}
		at = s.now()
	}
	if wait := s.window - s.now().Sub(at); wait > 0 {
		select {
		case <-s.after(wait):
		case <-ctx.Done():
			return nil, fmt.Errorf("agent: process reading: %w", ctx.Err())
		}
	}
	cur, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	return &cpuPair{snap: cur, cpu: procs.CPUPercent(base, cur, procs.LiveOptions()),
		window: time.Duration((cur.Uptime - base.Uptime) * float64(time.Second)), at: s.now()}, nil
}
