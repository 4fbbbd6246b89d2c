package approval_test

import (
	"sync"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Several waits on one topic: stopping any of them, first, middle or
// last, leaves the others to be rung, and a ring reaches only its topic.
func TestHubTopics(t *testing.T) {
	h := approval.NewHub()
	var ws []*approval.Waiter
	for range 5 {
		ws = append(ws, h.Watch("a"))
	}
	other := h.Watch("b")
	if n := h.Watching("a"); n != 5 {
		t.Fatalf("Watching(a) = %d, want 5", n)
	}
	ws[0].Stop()
	ws[2].Stop()
	ws[4].Stop()
	ws[4].Stop() // a second Stop does nothing
	if n, all := h.Watching("a"), h.Waiters(); n != 2 || all != 3 {
		t.Fatalf("after three stops: Watching(a) = %d, Waiters = %d; want 2, 3", n, all)
	}
	r := &countersign.Request{ID: "a", Status: countersign.StatusApproved}
	h.NotifyRequest(r)
	for i, w := range ws {
		if rung := closed(w.C()); rung != (i == 1 || i == 3) {
			t.Errorf("waiter %d rung = %v", i, rung)
		}
	}
	if ws[1].Request() != r || ws[3].Request() != r {
		t.Error("the ring did not carry the request")
	}
	if closed(other.C()) || h.Watching("a") != 0 || h.Watching("b") != 1 {
		t.Error("a ring of a reached b, or left a listed")
	}
	for _, w := range ws {
		w.Stop()
	}
	h.Notify("b")
	if !closed(other.C()) || other.Request() != nil {
		t.Error("Notify(b) did not ring b without a request")
	}
	other.Stop()
	if n := h.Waiters(); n != 0 {
		t.Errorf("Waiters = %d after every Stop, want 0", n)
	}
}

// Many goroutines watching, stopping and ringing at once: every wait is
// rung or stopped, and the count returns to zero (run with -race).
func TestHubConcurrent(t *testing.T) {
	h := approval.NewHub()
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			topic := []string{"x", "y", "z"}[i%3]
			w := h.Watch(topic)
			if i%2 == 0 {
				w.Stop()
				return
			}
			h.Notify(topic)
			<-w.C()
			w.Stop()
		})
	}
	wg.Wait()
	h.NotifyAll()
	if n := h.Waiters(); n != 0 {
		t.Errorf("Waiters = %d, want 0", n)
	}
	for _, topic := range []string{"x", "y", "z"} {
		if n := h.Watching(topic); n != 0 {
			t.Errorf("Watching(%s) = %d, want 0", topic, n)
		}
	}
}
