package identity

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/countersign/countersign"
)

// HashSlots bounds the argon2id computations that run at once and decides
// who goes next when they are all taken: every waiter of a known browser
// (one that has signed in as that approver before) before any other, each
// group in the order it came. A wait may be bounded, so that a flood of
// password guesses makes an attempt fail fast instead of queueing it
// behind minutes of other people's checks.
type HashSlots struct {
	mu      sync.Mutex
	free    int
	known   []*slotWaiter
	unknown []*slotWaiter
}

type slotWaiter struct {
	ready   chan struct{} // closed when the slot is handed over
	granted bool
}

// NewHashSlots returns n slots.
func NewHashSlots(n int) *HashSlots { return &HashSlots{free: n} }

// passwordSlots are the process's slots. There are two, one per core of a
// small server; each computation holds argonMemory (64 MiB), so sign-ins
// from many addresses at once wait here instead of adding up to more
// memory than the server has. They are the process's because the bound is
// the process's memory, whoever hashes.
var passwordSlots = NewHashSlots(2)

// ErrHashBusy is the error of a check that could not start within its
// wait: every slot stayed taken by other checks.
var ErrHashBusy = &countersign.Error{Code: countersign.ELIMIT, RetryAfter: 2 * time.Second,
	Message: "The server is busy checking other sign-ins. Try again in 2 seconds."}

// Acquire takes a slot. It waits at most wait (0: as long as ctx lasts),
// behind every known waiter when known is false. Errors: ErrHashBusy when
// the wait ends first, ctx's error when ctx does.
func (h *HashSlots) Acquire(ctx context.Context, known bool, wait time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	if h.free > 0 && len(h.known) == 0 && len(h.unknown) == 0 {
		h.free--
		h.mu.Unlock()
		return nil
	}
	w := &slotWaiter{ready: make(chan struct{})}
	if known {
		h.known = append(h.known, w)
	} else {
		h.unknown = append(h.unknown, w)
	}
	h.mu.Unlock()

	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	var err error
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-timeout:
		err = ErrHashBusy
	}
	h.mu.Lock()
	if w.granted {
		// Handed over while giving up: pass it on.
		h.mu.Unlock()
		h.Release()
		return err
	}
	h.known = slices.DeleteFunc(h.known, func(x *slotWaiter) bool { return x == w })
	h.unknown = slices.DeleteFunc(h.unknown, func(x *slotWaiter) bool { return x == w })
	h.mu.Unlock()
	return err
}

// Release gives a slot back, straight to the first waiter if there is one.
func (h *HashSlots) Release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	var w *slotWaiter
	switch {
	case len(h.known) > 0:
		w, h.known = h.known[0], h.known[1:]
	case len(h.unknown) > 0:
		w, h.unknown = h.unknown[0], h.unknown[1:]
	default:
		h.free++
		return
	}
	w.granted = true
	close(w.ready)
}

// Waiting returns how many known and unknown acquisitions wait.
func (h *HashSlots) Waiting() (known, unknown int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.known), len(h.unknown)
}
