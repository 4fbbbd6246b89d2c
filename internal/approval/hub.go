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
//
// Thousands of long polls may wait at once, so a wait costs little: one
// Waiter, linked into the list of its topic.
type Hub struct {
	mu      sync.Mutex
	waiters map[string]*Waiter // the first waiter of each topic
	closed  chan struct{}
	once    sync.Once
	count   atomic.Int64
}

// Waiter is one subscription to a topic of the hub.
type Waiter struct {
	hub        *Hub
	topic      string
	ch         chan struct{}
	req        *countersign.Request // written before ch is closed
	prev, next *Waiter              // in the topic's list, under hub.mu
	listed     bool                 // in the list, under hub.mu
	stopped    bool                 // Stop was called, under hub.mu
}

// C is closed at the next Notify of the topic.
func (w *Waiter) C() <-chan struct{} { return w.ch }

// Request returns the request the ring carried, as the change that rang
// committed it, or nil. It may be called once C is closed.
func (w *Waiter) Request() *countersign.Request { return w.req }

// Stop ends the subscription. It must be called once the wait is over,
// rung or not; calling it again does nothing.
func (w *Waiter) Stop() {
	h := w.hub
	h.mu.Lock()
	if w.stopped {
		h.mu.Unlock()
		return
	}
	w.stopped = true
	if w.listed {
		h.unlink(w)
	}
	h.mu.Unlock()
	h.count.Add(-1)
}

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{waiters: make(map[string]*Waiter), closed: make(chan struct{})}
}

// Subscribe returns a channel that is closed at the next Notify of id, and
// a function that must be called to stop waiting.
func (h *Hub) Subscribe(id string) (<-chan struct{}, func()) {
	w := h.Watch(id)
	return w.ch, w.Stop
}

// Watch is Subscribe with the request the ring carries. The caller must
// call the Waiter's Stop.
func (h *Hub) Watch(id string) *Waiter {
	w := &Waiter{hub: h, topic: id, ch: make(chan struct{})}
	h.mu.Lock()
	if first := h.waiters[id]; first != nil {
		w.next, first.prev = first, w
	}
	h.waiters[id] = w
	w.listed = true
	h.mu.Unlock()
	h.count.Add(1)
	return w
}

// unlink takes w out of its topic's list. h.mu must be held.
func (h *Hub) unlink(w *Waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else if w.next != nil {
		h.waiters[w.topic] = w.next
	} else {
		delete(h.waiters, w.topic)
	}
	if w.next != nil {
		w.next.prev = w.prev
	}
	w.prev, w.next, w.listed = nil, nil, false
}

// Watching returns how many wait on id now, not counting those rung and
// not yet subscribed again.
func (h *Hub) Watching(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for w := h.waiters[id]; w != nil; w = w.next {
		n++
	}
	return n
}

// Notify wakes everyone waiting on id.
func (h *Hub) Notify(id string) { h.notify(id, nil) }

// NotifyRequest wakes everyone waiting on r's id and hands them r, which
// must be the request as a committed change left it.
func (h *Hub) NotifyRequest(r *countersign.Request) { h.notify(r.ID, r) }

func (h *Hub) notify(id string, r *countersign.Request) {
	h.mu.Lock()
	first := h.waiters[id]
	delete(h.waiters, id)
	for w := first; w != nil; w = w.next {
		w.listed = false
		w.req = r
	}
	h.mu.Unlock()
	ring(first)
}

// ring closes the channels of a list taken out of the hub. The links are
// read without the lock: a waiter no longer listed is not changed by
// Watch, Stop or unlink.
func ring(first *Waiter) {
	for w := first; w != nil; {
		next := w.next
		close(w.ch)
		w = next
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
