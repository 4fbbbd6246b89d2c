package engine_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/store/sqlite/engine"
	"github.com/countersign/countersign/internal/testutil"
)

// blobTable makes the table the tests below fill, and returns a change
// that adds one row of size bytes to it.
func blobTable(t *testing.T, db *engine.DB, size int) func() error {
	t.Helper()
	if err := db.UpdateCached(t.Context(), func(ctx context.Context, tx engine.Querier) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE t (n INTEGER PRIMARY KEY, b BLOB)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return func() error {
		return db.UpdateUncached(context.Background(), func(ctx context.Context, tx engine.Querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (b) VALUES (randomblob(?))`, size)
			return err
		})
	}
}

// waitFor waits until cond holds, at most d, and fails the test with
// what otherwise.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !testutil.Wait(cond, d) {
		t.Fatalf("after %v: %s", d, what)
	}
}

// TestLogBound: a log that a burst of changes grew past its bound is
// copied into the file and truncated, instead of keeping its size for
// good; the writer checkpoints itself before the bound too.
func TestLogBound(t *testing.T) {
	const maxLog = 256 << 10
	db := engine.OpenTest(t, filepath.Join(t.TempDir(), "countersign.db"), engine.Config{MaxLog: maxLog})
	add := blobTable(t, db, 16<<10)
	// One change of 1 MiB: the log holds it whole until a checkpoint.
	if err := db.UpdateUncached(t.Context(), func(ctx context.Context, tx engine.Querier) error {
		_, err := tx.ExecContext(ctx, `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM k WHERE i < 64)
			INSERT INTO t (b) SELECT randomblob(16384) FROM k`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); st.LogBytes <= maxLog {
		t.Fatalf("the log holds %d bytes after a change of 1 MiB, want more than %d: the test shows nothing", st.LogBytes, maxLog)
	}
	waitFor(t, 10*time.Second, "the log is not back under its bound", func() bool { return db.Stats().LogBytes <= maxLog })
	if st := db.Stats(); st.MaxLog != maxLog {
		t.Errorf("stats %+v: want the bound %d", st, maxLog)
	}
	for range 8 {
		if err := add(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFullDisk: on a disk that fills up, writes fail with the cause
// counted and one log line for the episode, WriteError says why; once
// space is freed, writes succeed again within seconds, WriteError is
// empty again by itself, the episode's end is logged once, and the log is
// under its bound.
func TestFullDisk(t *testing.T) {
	dir := testutil.Tmpfs(t, 8<<20)
	const maxLog = 1 << 20
	logs := &testutil.LogBuffer{}
	db := engine.OpenTest(t, filepath.Join(dir, "countersign.db"), engine.Config{MaxLog: maxLog,
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	add := blobTable(t, db, 16<<10)
	for range 16 {
		if err := add(); err != nil {
			t.Fatal(err)
		}
	}
	filler := testutil.FillDisk(t, dir)

	// Writes fail, for space, and keep failing while the disk is full.
	failed := 0
	for i := 0; i < 200 && failed < 20; i++ {
		if err := add(); err != nil {
			failed++
		}
	}
	if failed < 20 {
		t.Fatalf("%d of 200 writes failed on a full disk", failed)
	}
	if got := db.WriteError(); got != "the store cannot write: the disk is full" {
		t.Errorf("WriteError on a full disk = %q", got)
	}
	if n := db.Stats().WriteFailures[engine.CauseDiskFull]; n < int64(failed) {
		t.Errorf("%d writes counted as failed for a full disk, want at least %d: %v", n, failed, db.Stats().WriteFailures)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "writes still fail after space was freed", func() bool { return add() == nil })
	// Changes that write nothing commit meanwhile, as a server's sweeps
	// do: they neither end the episode nor hold off its end.
	nothing := func() error {
		return db.UpdateUncached(t.Context(), func(ctx context.Context, tx engine.Querier) error { return nil })
	}
	waitFor(t, 10*time.Second, "WriteError still says "+db.WriteError(), func() bool { return nothing() == nil && db.WriteError() == "" })
	waitFor(t, 10*time.Second, "the log is over its bound", func() bool { return db.Stats().LogBytes <= maxLog })

	// One line when an episode starts, one when it ends: not one per
	// failed write. The disk may have been freed and filled again in
	// between (a truncated log gives space back), which is an episode
	// more, never one per write.
	out := logs.String()
	starts, ends := strings.Count(out, "the store cannot write"), strings.Count(out, "the store writes again")
	if starts == 0 || starts != ends || starts > failed/4 {
		t.Errorf("%d writes failed, %d episodes logged as started and %d as ended:\n%s", failed, starts, ends, out)
	}
}
