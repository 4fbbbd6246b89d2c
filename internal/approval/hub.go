package approval

import (
	"sync"
	"sync/atomic"
)

// Hub is the doorbell of waiters: it maps a request id to the channels of
// those waiting on it and rings them after every committed change. It is
// never a source of truth: a woken waiter re-reads the store.
type Hub struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}
	closed  chan struct{}
	once    sync.Once
	count   atomic.Int64
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{waiters: make(map[string]map[chan struct{}]struct{}), closed: make(chan struct{})}
}

// Subscribe returns a channel that is closed at the next Notify of id, and
// a function that must be called to stop waiting.
func (h *Hub) Subscribe(id string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	set := h.waiters[id]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		h.waiters[id] = set
	}
	set[ch] = struct{}{}
	h.mu.Unlock()
	h.count.Add(1)

	var done sync.Once
	return ch, func() {
		done.Do(func() {
			h.mu.Lock()
			if set, ok := h.waiters[id]; ok {
				if _, ok := set[ch]; ok {
					delete(set, ch)
					if len(set) == 0 {
						delete(h.waiters, id)
					}
				}
			}
			h.mu.Unlock()
			h.count.Add(-1)
		})
	}
}

// Notify wakes everyone waiting on id.
func (h *Hub) Notify(id string) {
	h.mu.Lock()
	set := h.waiters[id]
	delete(h.waiters, id)
	h.mu.Unlock()
	for ch := range set {
		close(ch)
	}
}

// Close wakes every waiter for good: used at shutdown so that long polls
// answer at once instead of holding the server open.
func (h *Hub) Close() {
	h.once.Do(func() { close(h.closed) })
}

// Closed is closed once the hub is closed.
func (h *Hub) Closed() <-chan struct{} { return h.closed }

// Waiters returns how many waits are in progress.
func (h *Hub) Waiters() int64 { return h.count.Load() }

// AccountTopic is the hub topic rung on every change of an account's
// requests; the inbox's live updates wait on it.
func AccountTopic(accountID string) string { return "account:" + accountID }
