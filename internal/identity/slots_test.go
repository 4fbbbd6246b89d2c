package identity

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil/wait"
)

// waitWaiting waits until the slots count that many waiters.
func waitWaiting(t *testing.T, slots *HashSlots, known, unknown int) {
	t.Helper()
	var k, u int
	if !wait.For(func() bool {
		k, u = slots.Waiting()
		return k == known && u == unknown
	}, wait.Within) {
		t.Fatalf("waiting: %d known, %d unknown; want %d, %d", k, u, known, unknown)
	}
}

// A known browser's check takes the next free slot before every unknown
// one that queued earlier; each group keeps its order.
func TestHashSlotsKnownFirst(t *testing.T) {
	slots := NewHashSlots(1)
	if err := slots.Acquire(t.Context(), false, 0); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
	)
	take := func(name string, known bool) {
		wg.Go(func() {
			if err := slots.Acquire(t.Context(), known, 0); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			slots.Release()
		})
	}
	for i, name := range []string{"u1", "u2", "u3"} {
		take(name, false)
		waitWaiting(t, slots, 0, i+1)
	}
	take("k1", true)
	waitWaiting(t, slots, 1, 3)
	take("k2", true)
	waitWaiting(t, slots, 2, 3)
	slots.Release()
	wg.Wait()
	want := []string{"k1", "k2", "u1", "u2", "u3"}
	if len(order) != len(want) {
		t.Fatalf("order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order %v, want %v", order, want)
		}
	}
}

// A check that cannot start within its wait fails with ErrHashBusy, leaves
// the queue and takes no slot; the slots then serve the next one at once.
func TestHashSlotsBoundedWait(t *testing.T) {
	slots := NewHashSlots(2)
	holdSlots(t, slots, 2)
	// The context's end is a guard against a hang, not a timing assertion.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ok, err := CheckPasswordTurn(ctx, cheapPasswordHash, "right", PasswordTurn{Slots: slots, Wait: time.Millisecond})
	if ok || !errors.Is(err, ErrHashBusy) {
		t.Fatalf("check with every slot held = %v, %v; want false, ErrHashBusy", ok, err)
	}
	if k, u := slots.Waiting(); k != 0 || u != 0 {
		t.Errorf("%d known and %d unknown waiters left behind", k, u)
	}
	slots.Release()
	ok, err = CheckPasswordTurn(t.Context(), cheapPasswordHash, "right", PasswordTurn{Slots: slots, Wait: time.Millisecond})
	if !ok || err != nil {
		t.Fatalf("check with a free slot = %v, %v; want true", ok, err)
	}
	if err := slots.Acquire(t.Context(), false, 0); err != nil {
		t.Fatal(err)
	}
}
