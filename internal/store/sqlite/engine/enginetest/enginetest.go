// Package enginetest helps tests line up changes for the engine's writer,
// so that they commit as one group in a known order.
package enginetest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/store/sqlite/engine"
)

// HoldWriter starts a change that keeps the writer of db busy until the
// returned function is called, and waits until the writer has started it:
// the changes asked for meanwhile queue, and commit as one group after it.
func HoldWriter(t testing.TB, db *engine.DB) (release func()) {
	t.Helper()
	started, hold, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.UpdateCached(context.Background(), func(ctx context.Context, tx engine.Querier) error {
			close(started)
			<-hold
			return nil
		})
	}()
	<-started
	return func() {
		close(hold)
		if err := <-done; err != nil {
			t.Errorf("holding change: %v", err)
		}
	}
}

// WaitQueued waits until n changes wait for the writer of db.
func WaitQueued(t testing.TB, db *engine.DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for db.Stats().Queued < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d changes queued, want %d", db.Stats().Queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// RawDB opens the database file at path beside the engine, as another
// program on the file would: none of the engine's connections, caches or
// writer. It is closed when the test ends.
func RawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatalf("open raw: %v", err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}
