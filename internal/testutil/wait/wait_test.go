package wait

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	var n atomic.Int32
	if !For(func() bool { return n.Add(1) == 5 }, Within) {
		t.Fatal("a condition that comes true was not seen")
	}
	if got := n.Load(); got != 5 {
		t.Errorf("checked %d times, want 5 (stop at the first true)", got)
	}
	var checks atomic.Int32
	if For(func() bool { checks.Add(1); return false }, 30*time.Millisecond) {
		t.Fatal("a condition that never holds was seen to hold")
	}
	if checks.Load() < 2 {
		t.Errorf("checked %d times before giving up, want it checked again until the deadline", checks.Load())
	}
}

// TestReceive: Receive returns what is sent, and the zero value of a
// closed channel, without waiting for its bound.
func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	go func() { ch <- 7 }()
	if got := Receive(t, ch, "the send"); got != 7 {
		t.Errorf("Receive = %d, want 7", got)
	}
	done := make(chan struct{})
	close(done)
	Receive(t, done, "the close")
}
