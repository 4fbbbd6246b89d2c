package engine

import (
	"sync"
	"time"
)

// What the store reads on every API call (credentials, channels) is kept in
// memory between changes. What keeps it right is the change counter: every
// committed change made with UpdateCached moves it, in whichever process
// made the change, and a cached entry serves only while the counter is
// where it was when the entry was read from the database. The counter
// moves after the commit and before the change is reported done, so once
// `key revoke` has returned, no call of any server on the file is let in
// with the key.

// CacheTTL bounds what a change the counter cannot see costs: one made by
// another program on the file, or by a process that died between its
// commit and the move of the counter.
const CacheTTL = 2 * time.Second

// cacheMax bounds each cache. Only what the database holds is cached, never
// a miss, so a caller cannot fill it with made-up credentials; when full it
// starts again empty.
const cacheMax = 4096

// Cache holds entries of one kind, keyed by a credential hash or an
// account, each with the version of the change counter it was read at
// (CacheVersion). The zero Cache is empty and ready.
type Cache[V any] struct {
	mu sync.Mutex
	m  map[string]cached[V]
}

type cached[V any] struct {
	v       V
	version uint64
	at      time.Time
}

// Get returns the entry for k if it was read at version and is fresh: read
// less than CacheTTL before now.
func (c *Cache[V]) Get(k string, version uint64, now time.Time) (V, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || e.version != version || now.Sub(e.at) >= CacheTTL || now.Before(e.at) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Put keeps v for k, as read at version, which CacheVersion returned before
// the database was read. The caller hands over v: it must share nothing
// with what it hands out.
func (c *Cache[V]) Put(k string, v V, version uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= cacheMax {
		c.m = make(map[string]cached[V])
	}
	c.m[k] = cached[V]{v: v, version: version, at: now}
}

// CacheVersion returns the change counter, to be read before the database
// is, and false when this process cannot see other processes' changes:
// then nothing may be cached.
func (db *DB) CacheVersion() (uint64, bool) {
	if db.changes == nil {
		return 0, false
	}
	return db.changes.load(), true
}
