package sqlite

import (
	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/sqlite/engine"
)

// The credentials and channels every API call reads are kept in memory
// between changes (see engine.Cache): every change to accounts, approvers,
// memberships, keys, tokens, grants or channels goes through
// UpdateCached, which moves the change counter that the cached entries
// are read at.

// tokenEntry is an approver token with its approver.
type tokenEntry struct {
	t countersign.ApproverToken
	a countersign.Approver
}

// caches are the DB's caches.
type caches struct {
	keys     engine.Cache[countersign.AgentKey]
	tokens   engine.Cache[tokenEntry]
	channels engine.Cache[[]countersign.Channel]
	access   engine.Cache[accessEntry]
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
