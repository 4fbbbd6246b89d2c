// Package ratelimit keeps a token bucket per key (a client address, an
// agent key) for the server's and the gateway's rates: one rule, one place.
package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Keyed keeps one token bucket per key and forgets the keys that stayed
// quiet for 10 minutes. A bucket refills at PerMinute a minute and holds a
// sixth of it (at least one), which lets a client start quickly without
// lifting the average. The zero rate (or a negative one) allows
// everything.
type Keyed struct {
	perMinute int
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// New returns a Keyed of perMinute calls a minute per key.
func New(perMinute int) *Keyed {
	return &Keyed{perMinute: perMinute, buckets: map[string]*bucket{}}
}

// PerMinute is the rate New was given.
func (l *Keyed) PerMinute() int { return l.perMinute }

// Allow takes a token for key and, when there is none, says how long until
// there is; a refused call takes nothing.
func (l *Keyed) Allow(key string, now time.Time) (bool, time.Duration) {
	if l.perMinute <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > time.Minute {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > 10*time.Minute {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), max(l.perMinute/6, 1))}
		l.buckets[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Blocked reports, without taking a token, whether key has none left, and
// how long until it has.
func (l *Keyed) Blocked(key string, now time.Time) (bool, time.Duration) {
	if l.perMinute <= 0 {
		return false, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return false, 0
	}
	if t := b.lim.TokensAt(now); t < 1 {
		return true, time.Duration((1 - t) / float64(b.lim.Limit()) * float64(time.Second))
	}
	return false, 0
}
