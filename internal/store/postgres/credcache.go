package postgres

import (
	"bytes"
	"sync"
	"time"

	"github.com/countersign/countersign"
)

// credentialMark ends the payload ("  - +credentials") that the database
// sends, from the triggers of migrations/0024, for every statement that
// changes agent keys, approver tokens, approvers or memberships, whoever
// runs it: a replica, a command-line process or a hand-written statement.
const credentialMark = "+credentials"

// credentialTTL bounds how long a credential looked up is kept, even when
// no change is heard of.
const credentialTTL = 5 * time.Second

// credCache keeps the agent keys and approver tokens looked up by the hash
// of their secret, which every call of an agent or an approver reads, while
// the change feed listens: only then does this process hear of a change
// made elsewhere (credentialMark), within the milliseconds a notification
// takes, as it hears of any other committed change. Without the feed (a
// command-line process) nothing is kept. Every write transaction of this
// process empties it after its commit (see update), so that a revocation
// made here holds for the next call here at once. Lookups that found
// nothing are never kept.
type credCache struct {
	mu sync.Mutex
	on bool
	// gen moves on every emptying, so that a credential read from the
	// database before an emptying is never kept after it.
	gen    uint64
	keys   map[string]keptKey
	tokens map[string]keptToken
	// now is the clock of the TTL; time.Now unless a test sets it.
	now func() time.Time
}

type keptKey struct {
	k  countersign.AgentKey
	at time.Time
}

type keptToken struct {
	t  countersign.ApproverToken
	a  countersign.Approver
	at time.Time
}

func (c *credCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// agentKey returns a copy of the kept key of the hash or, when none is
// kept, the generation to pass to putAgentKey.
func (c *credCache) agentKey(hash string) (k *countersign.AgentKey, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept, ok := c.keys[hash]
	if !ok || !c.on || c.clock().Sub(kept.at) >= credentialTTL {
		return nil, c.gen, false
	}
	return copyKey(&kept.k), c.gen, true
}

// putAgentKey keeps k, read at generation gen, unless the cache was
// emptied since.
func (c *credCache) putAgentKey(hash string, k *countersign.AgentKey, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on || gen != c.gen {
		return
	}
	if c.keys == nil {
		c.keys = make(map[string]keptKey)
	}
	c.keys[hash] = keptKey{k: *copyKey(k), at: c.clock()}
}

// approverToken returns copies of the kept token of the hash and its
// approver or, when none is kept, the generation to pass to
// putApproverToken.
func (c *credCache) approverToken(hash string) (t *countersign.ApproverToken, a *countersign.Approver, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept, ok := c.tokens[hash]
	if !ok || !c.on || c.clock().Sub(kept.at) >= credentialTTL {
		return nil, nil, c.gen, false
	}
	tc, ac := kept.t, kept.a
	return &tc, &ac, c.gen, true
}

// putApproverToken keeps t and a, read at generation gen, unless the
// cache was emptied since.
func (c *credCache) putApproverToken(hash string, t *countersign.ApproverToken, a *countersign.Approver, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on || gen != c.gen {
		return
	}
	if c.tokens == nil {
		c.tokens = make(map[string]keptToken)
	}
	c.tokens[hash] = keptToken{t: *t, a: *a, at: c.clock()}
}

// clear forgets every kept credential.
func (c *credCache) clear() {
	c.mu.Lock()
	c.gen++
	c.keys, c.tokens = nil, nil
	c.mu.Unlock()
}

// listening turns keeping on while the feed listens, and off (emptied)
// when it stops.
func (c *credCache) listening(on bool) {
	c.mu.Lock()
	c.gen++
	c.keys, c.tokens = nil, nil
	c.on = on
	c.mu.Unlock()
}

// copyKey copies k with its sealed secret, so that no caller shares bytes
// with the cache.
func copyKey(k *countersign.AgentKey) *countersign.AgentKey {
	c := *k
	c.SeedSecret = bytes.Clone(k.SeedSecret)
	return &c
}
