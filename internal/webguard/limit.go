package webguard

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter is a token bucket per key (a bearer token's name): each may send
// burst requests at once and rate per second after.
type Limiter struct {
	rate  rate.Limit
	burst int
	mu    sync.Mutex
	keys  map[string]*rate.Limiter
}

// maxKeys bounds the buckets kept; past it, buckets that have refilled
// (whose callers are idle) are dropped, since a full bucket is what a new
// one would be.
const maxKeys = 4096

// NewLimiter allows perSecond requests per second and burst at once, per key.
func NewLimiter(perSecond float64, burst int) *Limiter {
	return &Limiter{rate: rate.Limit(perSecond), burst: burst, keys: map[string]*rate.Limiter{}}
}

// Allow takes one request of key at now; when refused, retryAfter is how
// long until one would be allowed (at least a second, as Retry-After counts
// whole seconds).
func (l *Limiter) Allow(key string, now time.Time) (ok bool, retryAfter time.Duration) {
	return l.AllowN(key, 1, now)
}

// AllowN takes n requests of key at now, all or none: a JSON-RPC batch
// counts each call in it. When refused, retryAfter is how long until n
// would be allowed, or 0 when n is over the burst and never will be.
func (l *Limiter) AllowN(key string, n int, now time.Time) (ok bool, retryAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.keys[key]
	if b == nil {
		if len(l.keys) >= maxKeys {
			l.prune(now)
		}
		b = rate.NewLimiter(l.rate, l.burst)
		l.keys[key] = b
	}
	if n > l.burst {
		return false, 0
	}
	r := b.ReserveN(now, n)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, time.Duration(math.Ceil(d.Seconds())) * time.Second
	}
	return true, 0
}

// Burst is how many requests a key may send at once.
func (l *Limiter) Burst() int { return l.burst }

func (l *Limiter) prune(now time.Time) {
	for k, b := range l.keys {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.keys, k)
		}
	}
}
