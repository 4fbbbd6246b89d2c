package server

import (
	"slices"
	"time"
)

// window is a limit: at most n in any span of per.
type window struct {
	n   int
	per time.Duration
}

// slidingLog keeps the times of the attempts of each key within its
// longest window, so that "n in any span" holds exactly, unlike a token
// bucket, whose burst and refill admit more. A key holds at most the
// largest n of times, as no more are ever admitted, and the log holds at
// most maxKeys keys.
//
// A full log never makes room by forgetting a key that still counts:
// whoever can make new keys (fresh addresses of a large IPv6 range, made-up
// usernames) could otherwise erase the count of the key under attack. It
// forgets only keys whose every time has left the longest window, which
// changes no answer, and otherwise refuses new keys until some have.
// Refusing fails closed: a flood of new keys can keep new clients out for
// up to the longest window, never let a guesser in.
//
// It is not safe for concurrent use; the caller locks.
type slidingLog struct {
	windows []window // the longest last
	maxKeys int
	keys    map[string][]time.Time // ascending
	swept   time.Time
}

func newSlidingLog(maxKeys int, windows ...window) *slidingLog {
	slices.SortFunc(windows, func(a, b window) int { return int(a.per - b.per) })
	return &slidingLog{windows: windows, maxKeys: maxKeys, keys: make(map[string][]time.Time)}
}

// sweepEvery is how often a log looks for keys to forget: often enough to
// return memory, rarely enough that a full log costs little.
const sweepEvery = time.Minute

func (l *slidingLog) longest() time.Duration { return l.windows[len(l.windows)-1].per }

// check says whether one more attempt of key at now stays within every
// window; if not, how long until it would. full says the log has no room
// for a new key.
func (l *slidingLog) check(key string, now time.Time) (wait time.Duration, full bool) {
	times := l.live(key, now)
	if times == nil && len(l.keys) >= l.maxKeys {
		if now.Sub(l.swept) >= sweepEvery {
			l.sweep(now)
		}
		if len(l.keys) >= l.maxKeys {
			return 0, true
		}
	}
	for _, w := range l.windows {
		// Times within (now-per, now]: an attempt at t counts until t+per.
		i, _ := slices.BinarySearchFunc(times, now.Add(-w.per), func(t, edge time.Time) int {
			if t.After(edge) {
				return 1
			}
			return -1
		})
		if len(times)-i >= w.n {
			// The oldest of the last n must leave the window first.
			wait = max(wait, times[len(times)-w.n].Add(w.per).Sub(now))
		}
	}
	return wait, false
}

// add records an attempt of key at now; check said it may.
func (l *slidingLog) add(key string, now time.Time) {
	times := l.live(key, now)
	i, _ := slices.BinarySearchFunc(times, now, func(t, at time.Time) int {
		if t.After(at) {
			return 1
		}
		return -1
	})
	l.keys[key] = slices.Insert(times, i, now)
	if now.Sub(l.swept) >= sweepEvery {
		l.sweep(now)
	}
}

// remove takes back one attempt of key made at at: it turned out not to
// count (a sign-in that succeeded, a check that never ran).
func (l *slidingLog) remove(key string, at time.Time) {
	times := l.keys[key]
	if i := slices.IndexFunc(times, at.Equal); i >= 0 {
		times = slices.Delete(times, i, i+1)
	}
	if len(times) == 0 {
		delete(l.keys, key)
	} else {
		l.keys[key] = times
	}
}

// live returns key's times within the longest window and forgets the
// older ones.
func (l *slidingLog) live(key string, now time.Time) []time.Time {
	times, ok := l.keys[key]
	if !ok {
		return nil
	}
	edge := now.Add(-l.longest())
	i := 0
	for i < len(times) && !times[i].After(edge) {
		i++
	}
	if i == len(times) {
		delete(l.keys, key)
		return nil
	}
	if i > 0 {
		times = slices.Delete(times, 0, i)
		l.keys[key] = times
	}
	return times
}

// sweep forgets the keys that no longer count.
func (l *slidingLog) sweep(now time.Time) {
	edge := now.Add(-l.longest())
	for k, times := range l.keys {
		if !times[len(times)-1].After(edge) {
			delete(l.keys, k)
		}
	}
	l.swept = now
}
