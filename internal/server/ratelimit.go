package server

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// rateLimiter keeps one token bucket per client address and forgets the
// addresses that stayed quiet.
type rateLimiter struct {
	perMinute int
	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newRateLimiter(perMinute int) *rateLimiter {
	return &rateLimiter{perMinute: perMinute, buckets: make(map[string]*bucket)}
}

// allow takes a token for addr and, when there is none, says how long until
// there is.
func (l *rateLimiter) allow(addr string, now time.Time) (bool, time.Duration) {
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
	b := l.buckets[addr]
	if b == nil {
		// A burst of a sixth of the minute's allowance lets a client
		// start quickly without lifting the average.
		b = &bucket{lim: rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), max(l.perMinute/6, 1))}
		l.buckets[addr] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// blocked reports, without taking a token, whether addr has none left, and
// how long until it has.
func (l *rateLimiter) blocked(addr string, now time.Time) (bool, time.Duration) {
	if l.perMinute <= 0 {
		return false, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[addr]
	if b == nil {
		return false, 0
	}
	if t := b.lim.TokensAt(now); t < 1 {
		return true, time.Duration((1 - t) / float64(b.lim.Limit()) * float64(time.Second))
	}
	return false, 0
}
