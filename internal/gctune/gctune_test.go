package gctune

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

func TestPercentFor(t *testing.T) {
	for _, tt := range []struct {
		floor uint64
		h     heap
		want  int
	}{
		{64 << 20, heap{2 << 20, 0}, 3100},        // goal 64 MiB
		{64 << 20, heap{16 << 20, 0}, 300},        // goal 64 MiB
		{64 << 20, heap{15 << 20, 1 << 20}, 306},  // roots count: goal 64 MiB
		{64 << 20, heap{32 << 20, 0}, 100},        // GOGC=100 reaches the floor
		{64 << 20, heap{500 << 20, 1 << 20}, 100}, // a large heap is left alone
		{64 << 20, heap{1000, 0}, 10000},          // bounded
		{64 << 20, heap{0, 0}, 100},               // before the first collection
	} {
		if got := percentFor(tt.floor, tt.h); got != tt.want {
			t.Errorf("percentFor(%d, %+v) = %d, want %d", tt.floor, tt.h, got, tt.want)
		}
	}
}

// gcPercent returns the GOGC in force.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// After each collection the tuner sets GOGC for the live heap it finds:
// high while it is small, 100 once it is large, and the old one when
// stopped.
func TestFloor(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)

	const floor = 256 << 20 // far above this test's own heap
	stop := Floor(floor)
	waitPercent(t, "small heap", func(p int) bool { return p > 100 })

	// A live heap past half the floor: GOGC=100 reaches the floor.
	big := make([]byte, 160<<20)
	for i := range big {
		big[i] = 1
	}
	waitPercent(t, "large heap", func(p int) bool { return p == 100 })
	runtime.KeepAlive(big)
	big = nil

	waitPercent(t, "small heap again", func(p int) bool { return p > 100 })
	stop()
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC after stop = %d, want the 100 set before", p)
	}
	// Stopped, the tuner sets nothing any more.
	debug.SetGCPercent(150)
	for range 3 {
		runtime.GC()
	}
	finalizersRun(t)
	if p := gcPercent(); p != 150 {
		t.Errorf("GOGC after collections past stop = %d, want 150", p)
	}
}

// finalizersRun returns once the finalizers queued by the collections
// before it have run. A single goroutine runs finalizers, one batch after
// another: a finalizer of its own that runs, twice over, was queued after
// the batch that held any earlier one had finished.
func finalizersRun(t *testing.T) {
	t.Helper()
	for range 2 {
		done := make(chan struct{})
		runtime.SetFinalizer(&sentinel{}, func(*sentinel) { close(done) })
		testutil.Eventually(t, func() bool {
			select {
			case <-done:
				return true
			default:
				runtime.GC()
				return false
			}
		}, "a finalizer running")
	}
}

// waitPercent runs collections until the GOGC in force satisfies ok.
func waitPercent(t *testing.T, what string, ok func(int) bool) {
	t.Helper()
	var p int
	// The tuner's finalizer runs after a cycle: each check runs one and
	// reads what the one before left.
	if !testutil.Wait(func() bool {
		p = gcPercent()
		runtime.GC()
		return ok(p)
	}, testutil.EventuallyWithin) {
		t.Fatalf("%s: GOGC %d", what, p)
	}
}

// GOGC in the environment wins over Default's floor; without it, Default
// sets the floor's GOGC at once.
func TestDefault(t *testing.T) {
	old := debug.SetGCPercent(150)
	defer debug.SetGCPercent(old)
	runtime.GC() // a live heap measured, far below the floor

	t.Setenv("GOGC", "150")
	stop := Default(256 << 20)
	if p := gcPercent(); p != 150 {
		t.Errorf("GOGC with GOGC=150 in the environment = %d, want 150", p)
	}
	stop()

	t.Setenv("GOGC", "")
	stop = Default(256 << 20)
	p := gcPercent()
	stop()
	if p == 150 {
		t.Errorf("GOGC with no GOGC in the environment = %d, want the floor's", p)
	}
	if p := gcPercent(); p != 150 {
		t.Errorf("GOGC after stop = %d, want the 150 set before", p)
	}
}
