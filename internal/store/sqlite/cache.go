package sqlite

import (
	"sync"
	"time"

	"github.com/countersign/countersign"
)

// The credentials and channels every API call reads are kept in memory
// between changes. What keeps them right is the change counter: every
// committed change to accounts, approvers, memberships, keys, tokens or
// channels moves it, in whichever process made the change, and a cached
// entry serves only while the counter is where it was when the entry was
// read from the database. The counter moves after the commit and before
// the change is reported done, so once `key revoke` has returned, no call
// of any server on the file is let in with the key.
//
// cacheTTL bounds what a change the counter cannot see costs: one made by
// another program on the file, or by a process that died between its
// commit and the move of the counter.
const cacheTTL = 2 * time.Second

// cacheMax bounds each cache. Only what the database holds is cached, never
// a miss, so a caller cannot fill it with made-up credentials; when full it
// starts again empty.
const cacheMax = 4096

// cache holds entries of one kind, keyed by a credential hash or an account.
type cache[V any] struct {
	mu sync.Mutex
	m  map[string]cached[V]
}

type cached[V any] struct {
	v       V
	version uint64
	at      time.Time
}

// get returns the entry for k if it was read at version and is fresh.
func (c *cache[V]) get(k string, version uint64, now time.Time) (V, bool) {
	c.mu.Lock()
	e, ok := c.m[k]
	c.mu.Unlock()
	if !ok || e.version != version || now.Sub(e.at) >= cacheTTL || now.Before(e.at) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// put keeps v for k, as read at version (read before the database was).
func (c *cache[V]) put(k string, v V, version uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= cacheMax {
		c.m = make(map[string]cached[V])
	}
	c.m[k] = cached[V]{v: v, version: version, at: now}
}

// tokenEntry is an approver token with its approver.
type tokenEntry struct {
	t countersign.ApproverToken
	a countersign.Approver
}

// caches are the DB's caches.
type caches struct {
	keys     cache[countersign.AgentKey]
	tokens   cache[tokenEntry]
	channels cache[[]countersign.Channel]
	access   cache[accessEntry]
}

// cacheVersion returns the change counter, and false when this process
// cannot see other processes' changes: then nothing is cached.
func (db *DB) cacheVersion() (uint64, bool) {
	if db.changes == nil {
		return 0, false
	}
	return db.changes.load(), true
}

// copyChannels returns copies of the channels, sharing nothing with cs.
func copyChannels(cs []countersign.Channel) []*countersign.Channel {
	out := make([]*countersign.Channel, len(cs))
	for i := range cs {
		c := cs[i]
		c.Config = append([]byte(nil), c.Config...)
		c.Secret = append([]byte(nil), c.Secret...)
		out[i] = &c
	}
	return out
}
