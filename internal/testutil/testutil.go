// Package testutil holds the few helpers that the tests of several packages
// share: a clock that moves only when a test moves it, a log sink that
// concurrent handlers may write to, and the end of a test that needs
// something this machine lacks.
package testutil

import (
	"bytes"
	"os"
	"sync"
	"testing"
	"time"
)

// Clock is a countersign.Clock that moves only when a test moves it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock that reads at.
func NewClock(at time.Time) *Clock { return &Clock{now: at} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// LogBuffer is a log sink that goroutines may write to at once.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Missing ends a test that needs something outside Go which this machine
// lacks: it skips with msg, so that the tests pass on a bare machine, or,
// under COUNTERSIGN_TEST_STRICT=1 (.ci/run provides everything), fails.
func Missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("COUNTERSIGN_TEST_STRICT") == "1" {
		t.Fatal(msg + " (COUNTERSIGN_TEST_STRICT=1)")
	}
	t.Skip(msg + " (COUNTERSIGN_TEST_STRICT=1 makes this a failure)")
}
