package identity

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
)

// cheapPasswordHash is the hash of "right" in HashPassword's format with
// tiny parameters, so that checks against it are quick.
const cheapPasswordHash = "$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$" +
	"/rlPheEuIOPjYHKhaPJaJGV9XBSrUYzuHgudziGWdAc"

// countArgon replaces argonKey for the test with one that records how many
// computations run at once, each lasting hold.
func countArgon(t *testing.T, hold time.Duration) (most *atomic.Int32) {
	var now atomic.Int32
	most = new(atomic.Int32)
	prev := argonKey
	argonKey = func(password, salt []byte, time_, memory uint32, threads uint8, keyLen uint32) []byte {
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		// Not a wait: the computation holds its slot a while, so that
		// the checks overlap and the limit on how many run at once shows.
		time.Sleep(hold)
		now.Add(-1)
		return argon2.IDKey(password, salt, time_, memory, threads, keyLen)
	}
	t.Cleanup(func() { argonKey = prev })
	return most
}

func TestPasswordChecksTakeTurns(t *testing.T) {
	most := countArgon(t, 20*time.Millisecond)
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			password := []string{"right", "wrong"}[i%2]
			if got := CheckPassword(cheapPasswordHash, password); got != (password == "right") {
				t.Errorf("CheckPassword(%q) = %v", password, got)
			}
		})
	}
	wg.Go(func() { HashPassword("another password") })
	wg.Wait()
	if got := most.Load(); got != 2 {
		t.Errorf("%d argon2id computations ran at once, want at most and up to 2", got)
	}
}

func TestPasswordCheckGivesUpWithItsContext(t *testing.T) {
	// Take every slot, as sign-ins in progress would.
	holdSlots(t, passwordSlots, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	ok, err := CheckPasswordContext(ctx, cheapPasswordHash, "wrong")
	if ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("CheckPasswordContext with every slot taken = %v, %v; want false, %v", ok, err, context.DeadlineExceeded)
	}
}

// holdSlots takes n of slots until the test ends, as checks in progress
// would.
func holdSlots(t *testing.T, slots *HashSlots, n int) {
	t.Helper()
	for range n {
		if err := slots.Acquire(t.Context(), false, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(slots.Release)
	}
}

// TestPasswordHashCost: a release hashes with RFC 9106's second
// recommendation (64 MiB, 3 passes, here 2 lanes), and so does the dummy
// hash of unknown names; only a binary linked with argonCost "test" hashes
// cheaply, and its hashes check as any other.
func TestPasswordHashCost(t *testing.T) {
	if argonCost != "" {
		t.Fatalf("argonCost is %q, want \"\" in a build without -ldflags", argonCost)
	}
	const release = "$argon2id$v=19$m=65536,t=3,p=2$"
	if h := HashPassword("a release password"); !strings.HasPrefix(h, release) {
		t.Fatalf("HashPassword made %q, want it to start %q", h, release)
	}
	if h := dummyHash(); !strings.HasPrefix(h, release) {
		t.Fatalf("the dummy hash is %q, want it to start %q", h, release)
	}
	argonCost = "test"
	t.Cleanup(func() { argonCost = "" })
	h := HashPassword("a test password")
	if !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") || !CheckPassword(h, "a test password") || CheckPassword(h, "another one") {
		t.Fatalf("with argonCost \"test\": %q", h)
	}
}
