package webguard

import (
	"sync"
	"time"
)

// Bursts decides which refusals to record: the first of a key (a principal
// and a reason), then nothing for that key until Window has passed, when
// the next one is recorded with the count of those left out. A flood of
// bad requests thus writes a record a Window, not one a request, to a
// store that lives on an SD card.
//
// Keys alone do not bound the records when a caller can make keys up (one
// per source address, say), so Max also caps the records of all keys
// together in each Window: a refusal over it is left out and counted to its
// own key, whose next record carries it.
type Bursts struct {
	// Window is how long a key stays quiet after a record; 0:
	// DefaultWindow, so that the zero Bursts is ready.
	Window time.Duration
	// Max caps the records of all keys together per Window; 0:
	// DefaultMaxRecords; below 0: no cap beyond one per key.
	Max int

	mu    sync.Mutex
	keys  map[string]*burst
	start time.Time // of the Window that Max counts in
	made  int       // records in it
}

// DefaultWindow is Window when unset.
const DefaultWindow = time.Minute

// DefaultMaxRecords is Max when unset: a record a second on average at
// most, with a Window of a minute.
const DefaultMaxRecords = 60

// maxSources bounds the sources remembered per key; past it, Verdict's
// Sources says "at least".
const maxSources = 256

type burst struct {
	last       time.Time // when one was last recorded
	suppressed int
	sources    map[string]struct{} // of the suppressed ones
}

// Verdict is what Check decided about one refusal.
type Verdict struct {
	// Record: write this refusal down.
	Record bool
	// LeftOut counts the refusals of the key not recorded since its last
	// record (only when Record).
	LeftOut int
	// Sources counts the distinct sources among LeftOut (capped at 256;
	// SourcesCapped says there may have been more).
	Sources       int
	SourcesCapped bool
}

// First reports whether the refusal of key at now is to be recorded, and
// how many refusals of key were left out since the last one recorded.
func (b *Bursts) First(key string, now time.Time) (record bool, leftOut int) {
	v := b.Check(key, "", now)
	return v.Record, v.LeftOut
}

// Check is First that also counts the distinct sources (remote addresses,
// say; "" counts as none) of the refusals left out.
func (b *Bursts) Check(key, source string, now time.Time) Verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.keys == nil {
		b.keys = map[string]*burst{}
	}
	e := b.keys[key]
	if e == nil {
		if len(b.keys) >= maxKeys {
			b.prune(now)
			if len(b.keys) >= maxKeys {
				// Many keys at once is a flood of its own: one record a
				// window for all of them.
				key = "*"
				e = b.keys[key]
			}
		}
		if e == nil {
			// Never recorded: due at once, if the total cap allows.
			e = &burst{}
			b.keys[key] = e
		}
	}
	if !e.last.IsZero() && now.Sub(e.last) < b.window() || !b.allow(now) {
		e.suppressed++
		if source != "" {
			if e.sources == nil {
				e.sources = map[string]struct{}{}
			}
			if len(e.sources) <= maxSources {
				e.sources[source] = struct{}{}
			}
		}
		return Verdict{}
	}
	v := Verdict{Record: true, LeftOut: e.suppressed, Sources: min(len(e.sources), maxSources), SourcesCapped: len(e.sources) > maxSources}
	e.last, e.suppressed, e.sources = now, 0, nil
	return v
}

// allow takes one record from the total cap of the current window.
func (b *Bursts) allow(now time.Time) bool {
	limit := b.Max
	if limit == 0 {
		limit = DefaultMaxRecords
	}
	if limit < 0 {
		return true
	}
	if b.start.IsZero() || now.Sub(b.start) >= b.window() || now.Before(b.start) {
		b.start, b.made = now, 0
	}
	if b.made >= limit {
		return false
	}
	b.made++
	return true
}

// prune drops keys whose window has passed with nothing left out.
func (b *Bursts) prune(now time.Time) {
	for k, e := range b.keys {
		if now.Sub(e.last) >= b.window() && e.suppressed == 0 {
			delete(b.keys, k)
		}
	}
}

func (b *Bursts) window() time.Duration {
	if b.Window <= 0 {
		return DefaultWindow
	}
	return b.Window
}
