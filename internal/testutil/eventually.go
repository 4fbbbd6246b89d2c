package testutil

import (
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil/wait"
)

// EventuallyWithin is the longest Eventually waits: far more than anything
// a test waits for takes on a loaded machine, so that reaching it means
// the thing never happens.
const EventuallyWithin = wait.Within

// Eventually waits until cond holds and fails the test with what (saying
// what never happened) when it does not within EventuallyWithin. It
// checks at once, then every millisecond, backing off to 50 ms, so that a
// test waits about as long as the thing takes. It is for what a test
// cannot be told of: another process's state, a file, a port; where the
// code under test can say that it is done, wait on that instead.
func Eventually(t testing.TB, cond func() bool, what string) {
	t.Helper()
	wait.Eventually(t, cond, what)
}

// Wait is Eventually without a test: it reports whether cond held within
// d, for a helper that fails in its own words or waits for something
// that may not come. (Package wait holds the one implementation, for
// the tests that cannot import testutil.)
func Wait(cond func() bool, d time.Duration) bool {
	return wait.For(cond, d)
}

// Receive returns the next value sent on ch (the zero value once ch is
// closed) and fails the test with what when nothing comes within
// EventuallyWithin: the one bound of a wait for what the code under test
// sends or closes when it is done.
func Receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return wait.Receive(t, ch, what)
}

// ReceiveOr is Receive that, when nothing came, calls onTimeout (if not
// nil) before it fails the test: to log what can be known only then (a
// process's output so far) or to free what the wait would leave holding
// (kill a process, release a hold).
func ReceiveOr[T any](t testing.TB, ch <-chan T, what string, onTimeout func()) T {
	t.Helper()
	return wait.ReceiveOr(t, ch, what, onTimeout)
}
