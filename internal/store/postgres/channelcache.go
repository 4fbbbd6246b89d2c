package postgres

import (
	"bytes"
	"sync"

	"github.com/countersign/countersign"
)

// channelMark ends the payload of a change of notification channels
// ("  <origin> +channels"): the replicas that hear it forget the channels they keep.
const channelMark = "+channels"

// channelCache keeps the channels of each account, which every new request
// and every decision reads (to announce and follow them up), while the
// change feed listens: only then does this process hear of the changes
// other processes make (each sends channelMark when it commits), within
// the milliseconds a notification takes. Without the feed (a command-line
// process) nothing is kept. A change this process makes empties it after
// its commit.
type channelCache struct {
	mu sync.Mutex
	on bool
	// gen moves on every emptying, so that a list read from the database
	// before an emptying is never kept after it.
	gen       uint64
	byAccount map[string][]*countersign.Channel
}

// get returns the kept channels of the account, copies the caller may
// change, or, when none are kept, the generation to pass to put.
func (c *channelCache) get(accountID string) (list []*countersign.Channel, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kept, ok := c.byAccount[accountID]
	if !ok || !c.on {
		return nil, c.gen, false
	}
	return copyChannels(kept), c.gen, true
}

// put keeps the channels of the account read at generation gen, unless
// the cache was emptied since.
func (c *channelCache) put(accountID string, list []*countersign.Channel, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on || gen != c.gen {
		return
	}
	if c.byAccount == nil {
		c.byAccount = make(map[string][]*countersign.Channel)
	}
	c.byAccount[accountID] = copyChannels(list)
}

// clear forgets every kept list.
func (c *channelCache) clear() {
	c.mu.Lock()
	c.gen++
	c.byAccount = nil
	c.mu.Unlock()
}

// listening turns keeping on while the feed listens, and off (emptied)
// when it stops.
func (c *channelCache) listening(on bool) {
	c.mu.Lock()
	c.gen++
	c.byAccount = nil
	c.on = on
	c.mu.Unlock()
}

// copyChannels copies the channels with their config and sealed secret,
// so that no caller shares bytes with the cache.
func copyChannels(list []*countersign.Channel) []*countersign.Channel {
	out := make([]*countersign.Channel, len(list))
	for i, ch := range list {
		c := *ch
		c.Config, c.Secret = bytes.Clone(ch.Config), bytes.Clone(ch.Secret)
		out[i] = &c
	}
	return out
}
