package wait

import (
	"fmt"
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

// fatalTB records Fatalf instead of ending the test.
type fatalTB struct {
	testing.TB
	fatal string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.fatal = fmt.Sprintf(format, args...) }

// TestReceiveOrTimeout: when nothing comes, onTimeout runs before the
// test fails, in the words of what; when something comes, it does not.
func TestReceiveOrTimeout(t *testing.T) {
	var ran []string
	tb := &fatalTB{TB: t}
	got := receive(tb, make(chan int), "the send", func() { ran = append(ran, "onTimeout:"+tb.fatal) }, time.Millisecond)
	if got != 0 || tb.fatal != "the send did not happen within 1ms" || len(ran) != 1 || ran[0] != "onTimeout:" {
		t.Errorf("got %d, failed %q, ran %q; want 0, failed after onTimeout ran", got, tb.fatal, ran)
	}
	ch := make(chan int, 1)
	ch <- 7
	if got := ReceiveOr(t, ch, "the send", func() { t.Error("onTimeout ran although a value came") }); got != 7 {
		t.Errorf("ReceiveOr = %d, want 7", got)
	}
}
