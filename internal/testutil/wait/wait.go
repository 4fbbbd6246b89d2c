// Package wait is how a test waits for something it cannot be told of:
// a condition checked again and again until it holds or a bounded
// deadline passes. It imports nothing of the module, so that the tests
// inside any package (which cannot import testutil without a cycle) use
// the same wait as every other test; testutil.Eventually and
// testutil.Wait call it.
package wait

import (
	"testing"
	"time"
)

// Within is the longest Eventually waits: far more than anything a test
// waits for takes on a loaded machine, so that reaching it means the
// thing never happens.
const Within = 30 * time.Second

// Eventually waits until cond holds and fails the test with what (saying
// what never happened) when it does not within Within. It checks at
// once, then every millisecond, backing off to 50 ms, so that a test
// waits about as long as the thing takes. It is for what a test cannot
// be told of: another process's state, a file, a port; where the code
// under test can say that it is done, wait on that instead.
func Eventually(t testing.TB, cond func() bool, what string) {
	t.Helper()
	if !For(cond, Within) {
		t.Fatalf("%s did not happen within %s", what, Within)
	}
}

// For is Eventually without a test: it reports whether cond held within
// d, for a helper that fails in its own words or waits for something
// that may not come.
func For(cond func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	pause := time.Millisecond
	for {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		timer := time.NewTimer(min(pause, time.Until(deadline)))
		<-timer.C
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Receive returns the next value sent on ch (the zero value once ch is
// closed) and fails the test with what (saying what never came) when
// nothing comes within Within. It is for what the code under test sends
// or closes when it is done: the bound only guards against a hang.
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return ReceiveOr(t, ch, what, nil)
}

// ReceiveOr is Receive that, when nothing came, calls onTimeout (if not
// nil) before it fails the test: to log what can be known only then (a
// process's output so far) or to free what the wait would leave holding
// (kill a process, release a hold).
func ReceiveOr[T any](t testing.TB, ch <-chan T, what string, onTimeout func()) T {
	t.Helper()
	return receive(t, ch, what, onTimeout, Within)
}

func receive[T any](t testing.TB, ch <-chan T, what string, onTimeout func(), within time.Duration) T {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		if onTimeout != nil {
			onTimeout()
		}
		t.Fatalf("%s did not happen within %s", what, within)
		var zero T
		return zero
	}
}
