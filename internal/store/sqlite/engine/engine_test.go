package engine

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/internal/testutil/wait"
)

// openTest opens an engine on the file at path, closed when the test ends.
func openTest(t *testing.T, path string, c Config) *DB {
	t.Helper()
	db, err := Open(t.Context(), path, c)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// TestWAL: every connection is in WAL mode with the engine's pragmas, and
// the read pool cannot write.
func TestWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "countersign.db")
	db := openTest(t, path, Config{})
	if _, err := db.write.ExecContext(t.Context(), `CREATE TABLE t (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	for name, pool := range map[string]*sql.DB{"write": db.write, "read": db.read, "checkpoint": db.ckpt} {
		var mode string
		var sync, fk, busy int
		row := pool.QueryRowContext(t.Context(), `SELECT
			(SELECT journal_mode FROM pragma_journal_mode), (SELECT synchronous FROM pragma_synchronous),
			(SELECT foreign_keys FROM pragma_foreign_keys), (SELECT timeout FROM pragma_busy_timeout)`)
		if err := row.Scan(&mode, &sync, &fk, &busy); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if mode != "wal" || sync != 1 || fk != 1 || busy != 5000 {
			t.Errorf("%s pool: journal_mode %s, synchronous %d, foreign_keys %d, busy_timeout %d; want wal, 1, 1, 5000", name, mode, sync, fk, busy)
		}
	}
	if _, err := db.read.ExecContext(t.Context(), `DELETE FROM t`); err == nil {
		t.Errorf("the read pool can write")
	}
}

// TestPathWithQuestionMark: a path is a path, whatever characters a URI
// would take for the start of its parameters.
func TestPathWithQuestionMark(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "what?#%20")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "countersign.db")
	openTest(t, path, Config{})
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the database is not where asked: %v", err)
	}
}

// Commits reach the database file itself, not only the log, without the
// writer doing the copy: the checkpointer does it soon after the commit.
func TestCheckpointer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "countersign.db")
	db := openTest(t, path, Config{})
	ctx := t.Context()
	var pages int
	if err := db.write.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages != writerCheckpointPages(DefaultMaxLog) {
		t.Fatalf("the writer checkpoints itself at %d pages, want %d", pages, writerCheckpointPages(DefaultMaxLog))
	}
	if err := db.UpdateCached(ctx, func(ctx context.Context, tx Querier) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE t (n INTEGER PRIMARY KEY)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := db.UpdateCached(ctx, func(ctx context.Context, tx Querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (?)`, i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}

	// A copy of the database file alone, without its log, holds every
	// row once the checkpointer has run after the last commit.
	var (
		i   int
		got int
		err error
	)
	if !wait.For(func() bool {
		// A copy taken while a checkpoint writes may be torn: then
		// the next one is looked at.
		i++
		got, err = rowsInFileAlone(t, path, filepath.Join(t.TempDir(), fmt.Sprintf("copy%d.db", i)))
		// The checkpointer counts a checkpoint after it ran: the file can
		// be whole a moment before the count moves.
		return err == nil && got == n && db.checkpoints.Load() > 0
	}, wait.Within) {
		t.Fatalf("the database file alone holds %d rows of %d (%v) after %d checkpoints", got, n, err, db.checkpoints.Load())
	}
}

// rowsInFileAlone copies the database file at path, without its log, to
// dst and counts the rows of table t there.
func rowsInFileAlone(t *testing.T, path, dst string) (int, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := sql.Open("sqlite", dst)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var n int
	err = c.QueryRow(`SELECT count(*) FROM t`).Scan(&n)
	return n, err
}
