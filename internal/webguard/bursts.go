package webguard

import (
	"sync"
	"time"
)

// Bursts decides which refusals to record: the first of a key (a remote
// and a reason), then nothing for that key until Window has passed, when
// the next one is recorded with the count of those left out. A flood of
// bad requests thus writes a record a Window, not one a request, to a
// store that lives on an SD card.
type Bursts struct {
	Window time.Duration
	mu     sync.Mutex
	keys   map[string]*burst
}

type burst struct {
	last       time.Time // when one was last recorded
	suppressed int
}

// First reports whether the refusal of key at now is to be recorded, and
// how many refusals of key were left out since the last one recorded.
func (b *Bursts) First(key string, now time.Time) (record bool, leftOut int) {
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
				if e = b.keys[key]; e != nil {
					return b.again(e, now)
				}
			}
		}
		b.keys[key] = &burst{last: now}
		return true, 0
	}
	return b.again(e, now)
}

func (b *Bursts) again(e *burst, now time.Time) (bool, int) {
	if now.Sub(e.last) < b.Window {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	return true, n
}

// prune drops keys whose window has passed with nothing left out.
func (b *Bursts) prune(now time.Time) {
	for k, e := range b.keys {
		if now.Sub(e.last) >= b.Window && e.suppressed == 0 {
			delete(b.keys, k)
		}
	}
}
