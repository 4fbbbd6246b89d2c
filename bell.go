package countersign

import "sync"

// OutboxWatcher is implemented by a store that tells at once when items
// were added to its outbox: after every commit of this process that added
// some and, for a store several replicas share (PostgreSQL), of any
// replica while its change feed (ChangeFeed.Listen) runs here. The
// notification worker waits on it beside its poll, so that a new request
// is announced within milliseconds of its commit; a wake-up it misses
// (another process on a SQLite file, a feed interrupted) is found by the
// next poll, since the outbox itself is the record of what is due.
type OutboxWatcher interface {
	// WatchOutbox returns a channel that receives after commits that
	// added outbox items (several commits close together may make one
	// receive), and a function that ends the watch.
	WatchOutbox() (added <-chan struct{}, stop func())
}

// Bell tells its watchers that something happened, without ever blocking
// the one who rings: each watcher's channel holds one ring, and rings that
// come while it is full are one. The zero Bell is ready to use.
type Bell struct {
	mu       sync.Mutex
	watchers map[chan struct{}]struct{}
}

// Watch returns a channel that receives after each Ring (coalesced), and a
// function that ends the watch.
func (b *Bell) Watch() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	b.mu.Lock()
	if b.watchers == nil {
		b.watchers = make(map[chan struct{}]struct{})
	}
	b.watchers[c] = struct{}{}
	b.mu.Unlock()
	return c, func() {
		b.mu.Lock()
		delete(b.watchers, c)
		b.mu.Unlock()
	}
}

// Ring tells every watcher.
func (b *Bell) Ring() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.watchers {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
