package engine

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// cachedQueries reports how many prepared statements the one connection
// of the write pool holds.
func cachedQueries(t *testing.T, db *sql.DB) int {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n := -1
	if err := conn.Raw(func(dc any) error {
		n = len(dc.(*cachingConn).stmts)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// stmtBusy reports whether the write connection has a cached statement
// for query that is in use.
func stmtBusy(t *testing.T, db *sql.DB, query string) bool {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	busy := false
	if err := conn.Raw(func(dc any) error {
		if s, ok := dc.(*cachingConn).stmts[query]; ok {
			busy = s.busy.Load()
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return busy
}

func TestStatementCache(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "countersign.db"), Config{})
	ctx := t.Context()
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE t (n INTEGER); CREATE TABLE u (n INTEGER)`); err != nil {
		t.Fatal(err)
	}
	before := cachedQueries(t, db.write)

	// The same query many times with other arguments: one statement,
	// each run with its own arguments.
	const insert = `INSERT INTO t (n) VALUES (?)`
	for i := range 10 {
		if _, err := db.write.ExecContext(ctx, insert, i); err != nil {
			t.Fatal(err)
		}
	}
	if got := cachedQueries(t, db.write); got != before+1 {
		t.Fatalf("cached statements = %d after one query run 10 times, want %d", got, before+1)
	}

	// The same query nested in its own open result set, inside a
	// transaction on the one write connection: the inner run cannot use
	// the busy statement and must not disturb the outer one.
	const sel = `SELECT n FROM t WHERE n >= ? ORDER BY n`
	err := db.UpdateCached(ctx, func(ctx context.Context, tx Querier) error {
		rows, err := tx.QueryContext(ctx, sel, 0)
		if err != nil {
			return err
		}
		defer rows.Close()
		var outer []int
		for rows.Next() {
			var n int
			if err := rows.Scan(&n); err != nil {
				return err
			}
			outer = append(outer, n)
			var inner int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (`+sel+`)`, n).Scan(&inner); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, sel, n).Scan(&inner); err != nil {
				return fmt.Errorf("nested run of the open query: %w", err)
			}
			if inner != n {
				return fmt.Errorf("nested run returned %d, want %d", inner, n)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if fmt.Sprint(outer) != "[0 1 2 3 4 5 6 7 8 9]" {
			return fmt.Errorf("outer result set = %v", outer)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO u (n) VALUES (?)`, len(outer))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	// A result set closed early frees its statement for the next run.
	for range 3 {
		rows, err := db.write.QueryContext(ctx, sel, 5)
		if err != nil {
			t.Fatal(err)
		}
		if !rows.Next() {
			t.Fatal("no row")
		}
		rows.Close()
		if stmtBusy(t, db.write, sel) {
			t.Fatal("the statement of a closed result set is still busy")
		}
	}
	var n int
	if err := db.write.QueryRowContext(ctx, sel, 7).Scan(&n); err != nil || n != 7 {
		t.Fatalf("after early closes: %d, %v; want 7", n, err)
	}

	// A script is run, not cached: its second statement must run too.
	before = cachedQueries(t, db.write)
	if _, err := db.write.ExecContext(ctx, `INSERT INTO u (n) VALUES (100); INSERT INTO u (n) VALUES (101)`); err != nil {
		t.Fatal(err)
	}
	if err := db.write.QueryRowContext(ctx, `SELECT COUNT(*) FROM u WHERE n >= 100`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("script rows = %d, %v; want 2", n, err)
	}
	if got := cachedQueries(t, db.write); got != before+1 { // the COUNT only
		t.Fatalf("cached statements = %d, want %d: a script was cached", got, before+1)
	}

	// The cache is bounded; queries past the bound still run.
	for i := range maxCachedStmts + 10 {
		var got int
		if err := db.write.QueryRowContext(ctx, fmt.Sprintf(`SELECT %d`, i)).Scan(&got); err != nil || got != i {
			t.Fatalf("SELECT %d = %d, %v", i, got, err)
		}
	}
	if got := cachedQueries(t, db.write); got != maxCachedStmts {
		t.Fatalf("cached statements = %d, want the bound %d", got, maxCachedStmts)
	}
}

// A cached statement interrupted while it runs, by its context's end,
// stays usable.
func TestStatementCacheCancelled(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "countersign.db"), Config{})
	const q = `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < ?) SELECT COUNT(*) FROM c`
	var n int
	// The write pool has one connection: every run below uses the one
	// statement it caches now.
	if err := db.write.QueryRowContext(t.Context(), q, 10).Scan(&n); err != nil || n != 10 {
		t.Fatalf("first run: %d, %v", n, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := db.write.QueryRowContext(ctx, q, 1e12).Scan(&n); err == nil {
		t.Fatal("a run past its context's end succeeded")
	}
	if time.Since(start) > 30*time.Second {
		t.Fatal("the run was not interrupted")
	}
	// database/sql may have replaced the connection; if not, its
	// statement must be free.
	if stmtBusy(t, db.write, q) {
		t.Fatal("the interrupted statement is still busy")
	}
	for range 3 {
		if err := db.write.QueryRowContext(t.Context(), q, 20).Scan(&n); err != nil || n != 20 {
			t.Fatalf("after an interrupted run: %d, %v; want 20", n, err)
		}
	}
}
