package approval

import (
	"context"

	"github.com/countersign/countersign"
)

// FollowReplicas feeds the hub from a store that several replicas share:
// a change that any replica commits rings the waiters of its request and
// of its account here, so that an agent long-polling this replica wakes on
// a decision made on another. When the feed was interrupted (a database
// restart), every waiter is woken to read the store again: a change made
// in the gap was announced to nobody. The hub stays a doorbell; a woken
// waiter reads the store, so a wake-up too many costs a read, never a
// wrong answer. It blocks until ctx is done.
func (s *Service) FollowReplicas(ctx context.Context, feed countersign.ChangeFeed) error {
	return feed.Listen(ctx, func(requestID, accountID string) {
		s.hub.Notify(requestID)
		if accountID != "" {
			s.hub.Notify(AccountTopic(accountID))
		}
	}, s.hub.NotifyAll)
}

// NotifyAll wakes every waiter, of every request and account.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	all := h.waiters
	h.waiters = make(map[string]*Waiter)
	for _, first := range all {
		for w := first; w != nil; w = w.next {
			w.listed = false
		}
	}
	h.mu.Unlock()
	for _, first := range all {
		ring(first)
	}
}
