package approval

import (
	"sync"
	"sync/atomic"

	"github.com/countersign/countersign"
)

// Hub is the doorbell of waiters: it maps a request id to those waiting on
// it and rings them after every committed change. It is never a source of
// truth: a woken waiter re-reads the store, unless the ring carried the
// request as that change committed it.
type Hub struct {
	mu      sync.Mutex
	waiters map[string]map[*Waiter]struct{}
	closed  chan struct{}
	once    sync.Once
	count   atomic.Int64
}

// Waiter is one subscription to a topic of the hub.
type Waiter struct {
	ch  chan struct{}
	req *countersign.Request // written before ch is closed
}

// C is closed at the next Notify of the topic.
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Request returns the request the ring carried, as the change that rang
// committed it, or nil. It may be called once C is closed.
func (w *Waiter) Request() *countersign.Request { return w.req }

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{waiters: make(map[string]map[*Waiter]struct{}), closed: make(chan struct{})}
}

// Subscribe returns a channel that is closed at the next Notify of id, and
// a function that must be called to stop waiting.
func (h *Hub) Subscribe(id string) (<-chan struct{}, func()) {
	w, stop := h.Watch(id)
	return w.ch, stop
}

// Watch is Subscribe with the request the ring carries.
func (h *Hub) Watch(id string) (*Waiter, func()) {
	w := &Waiter{ch: make(chan struct{})}
	h.mu.Lock()
	set := h.waiters[id]
	if set == nil {
		set = make(map[*Waiter]struct{})
		h.waiters[id] = set
	}
	set[w] = struct{}{}
	h.mu.Unlock()
	h.count.Add(1)

	var done sync.Once
	return w, func() {
		done.Do(func() {
			h.mu.Lock()
			if set, ok := h.waiters[id]; ok {
				if _, ok := set[w]; ok {
					delete(set, w)
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

// Watching returns how many wait on id now, not counting those rung and
// not yet subscribed again.
func (h *Hub) Watching(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.waiters[id])
}

// Notify wakes everyone waiting on id.
func (h *Hub) Notify(id string) { h.notify(id, nil) }

// NotifyRequest wakes everyone waiting on r's id and hands them r, which
// must be the request as a committed change left it.
func (h *Hub) NotifyRequest(r *countersign.Request) { h.notify(r.ID, r) }

func (h *Hub) notify(id string, r *countersign.Request) {
	h.mu.Lock()
	set := h.waiters[id]
	delete(h.waiters, id)
	h.mu.Unlock()
	for w := range set {
		w.req = r
		close(w.ch)
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
