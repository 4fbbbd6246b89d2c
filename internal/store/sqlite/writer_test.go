package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// holdWriter starts a change that keeps the writer busy until the returned
// function is called, and waits until the writer has started it.
func holdWriter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	started, hold, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.update(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
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

// waitQueued waits until n changes wait for the writer.
func waitQueued(t *testing.T, db *DB, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(db.writes) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d changes queued, want %d", len(db.writes), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Changes queued together commit in one transaction, and each caller hears
// only its own outcome: a change that fails or panics leaves nothing, the
// others are all kept.
func TestGroupCommit(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "countersign.db"))
	ctx := t.Context()
	if _, err := db.write.ExecContext(ctx, `CREATE TABLE t (n INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}

	release := holdWriter(t, db)
	groups := db.groups.Load()
	const n = 30
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
				// Two rows per change, so that a failed change must
				// undo a write of its own.
				if _, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (?), (?)`, 2*i, 2*i+1); err != nil {
					return err
				}
				switch i % 3 {
				case 1:
					return fmt.Errorf("change %d refused", i)
				case 2:
					if i == 2 {
						panic("change 2 panics")
					}
					// A statement that fails: the change ends with
					// its error, the rows it wrote are undone.
					_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (?)`, 2*i)
					return err
				}
				return nil
			})
		})
	}
	waitQueued(t, db, n)
	release()
	wg.Wait()
	if got := db.groups.Load() - groups; got != 1 {
		t.Errorf("%d transactions for %d queued changes, want 1", got, n)
	}

	var want []string
	for i, err := range errs {
		switch {
		case i%3 == 0:
			if err != nil {
				t.Errorf("change %d: %v", i, err)
			}
			want = append(want, fmt.Sprint(2*i), fmt.Sprint(2*i+1))
		case i == 2:
			if err == nil || !strings.Contains(err.Error(), "change 2 panics") {
				t.Errorf("change 2 panicked, got error %v", err)
			}
		case i%3 == 1:
			if err == nil || err.Error() != fmt.Sprintf("change %d refused", i) {
				t.Errorf("change %d: error %v, want its own", i, err)
			}
		default:
			if !isUnique(err) {
				t.Errorf("change %d: error %v, want its UNIQUE violation", i, err)
			}
		}
	}
	rows, err := db.read.QueryContext(ctx, `SELECT n FROM t ORDER BY n`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprint(v))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("rows kept: %v\nwant the successful changes' only: %v", got, want)
	}
}

// A caller that stops waiting before the writer starts its change gets its
// context's error and the change never runs; one whose change has started
// gets the change's real outcome.
func TestGroupCommitCancel(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "countersign.db"))
	release := holdWriter(t, db)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
			ran <- struct{}{}
			return nil
		})
	}()
	waitQueued(t, db, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled queued change: %v, want context.Canceled", err)
	}
	release()
	// One more change through the writer: the abandoned one was passed.
	if err := db.update(t.Context(), func(ctx context.Context, tx *sql.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
		t.Error("the writer ran a change its caller had abandoned")
	default:
	}

	// Cancelled while running: the change completes, its statements are
	// not interrupted, and the caller hears that it committed.
	ctx, cancel = context.WithCancel(t.Context())
	err := db.update(ctx, func(ctx context.Context, tx *sql.Tx) error {
		cancel()
		_, err := tx.ExecContext(ctx, `CREATE TABLE after_cancel (n INTEGER)`)
		return err
	})
	if err != nil {
		t.Fatalf("change cancelled while running: %v", err)
	}
	if _, err := db.read.ExecContext(t.Context(), `SELECT * FROM after_cancel`); err != nil {
		t.Errorf("the change's table is missing: %v", err)
	}
}

// After Close a change fails at once, queued or not.
func TestGroupCommitClose(t *testing.T) {
	db, err := Open(t.Context(), filepath.Join(t.TempDir(), "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, db)
	errc := make(chan error, 1)
	go func() {
		errc <- db.update(t.Context(), func(ctx context.Context, tx *sql.Tx) error { return nil })
	}()
	waitQueued(t, db, 1)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	// The queued change either ran in the group being committed when
	// Close came, or fails: it does not hang.
	if err := <-errc; err != nil && !errors.Is(err, errStoreClosed) {
		t.Errorf("queued change at Close: %v", err)
	}
	if err := db.update(t.Context(), func(ctx context.Context, tx *sql.Tx) error { return nil }); !errors.Is(err, errStoreClosed) {
		t.Errorf("change after Close: %v, want %v", err, errStoreClosed)
	}
}
