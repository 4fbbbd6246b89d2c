package engine_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/store/sqlite/engine"
	"github.com/countersign/countersign/internal/store/sqlite/engine/enginetest"
	"github.com/countersign/countersign/internal/testutil/wait"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// open opens an engine on a new file, closed when the test ends.
func open(t *testing.T) *engine.DB {
	return engine.OpenTest(t, filepath.Join(t.TempDir(), "countersign.db"), engine.Config{})
}

// change runs query as a change of its own, through the writer.
func change(t *testing.T, db *engine.DB, query string, args ...any) {
	t.Helper()
	if err := db.UpdateCached(t.Context(), func(ctx context.Context, tx engine.Querier) error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	}); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// openWithTable opens an engine with a table t (n INTEGER PRIMARY KEY)
// for changes to write to.
func openWithTable(t *testing.T) *engine.DB {
	t.Helper()
	db := open(t)
	change(t, db, `CREATE TABLE t (n INTEGER PRIMARY KEY)`)
	return db
}

// count returns the rows of table, as committed.
func count(t *testing.T, db *engine.DB, table string) int {
	t.Helper()
	var n int
	if err := db.Read().QueryRowContext(t.Context(), `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// sqliteCode returns the extended result code of an SQLite error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// Changes queued together commit in one transaction, and each caller hears
// only its own outcome: a change that fails or panics leaves nothing, the
// others are all kept.
func TestGroupCommit(t *testing.T) {
	db, ctx := openWithTable(t), t.Context()

	release := enginetest.HoldWriter(t, db)
	groups := db.Stats().Transactions
	const n = 30
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = db.UpdateCached(ctx, func(ctx context.Context, tx engine.Querier) error {
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
	enginetest.WaitQueued(t, db, n)
	release()
	wg.Wait()
	// The group ran once without savepoints, was rolled back when change
	// 1 failed, and ran again with one savepoint per change.
	if got := db.Stats().Transactions - groups; got != 2 {
		t.Errorf("%d transactions for %d queued changes, one failing, want 2", got, n)
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
			if sqliteCode(err) != sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
				t.Errorf("change %d: error %v, want its UNIQUE violation", i, err)
			}
		}
	}
	rows, err := db.Read().QueryContext(ctx, `SELECT n FROM t ORDER BY n`)
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
	db := open(t)
	release := enginetest.HoldWriter(t, db)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- db.UpdateCached(ctx, func(ctx context.Context, tx engine.Querier) error {
			ran <- struct{}{}
			return nil
		})
	}()
	enginetest.WaitQueued(t, db, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled queued change: %v, want context.Canceled", err)
	}
	release()
	// One more change through the writer: the abandoned one was passed.
	if err := db.UpdateCached(t.Context(), func(ctx context.Context, tx engine.Querier) error { return nil }); err != nil {
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
	err := db.UpdateCached(ctx, func(ctx context.Context, tx engine.Querier) error {
		cancel()
		_, err := tx.ExecContext(ctx, `CREATE TABLE after_cancel (n INTEGER)`)
		return err
	})
	if err != nil {
		t.Fatalf("change cancelled while running: %v", err)
	}
	if _, err := db.Read().ExecContext(t.Context(), `SELECT * FROM after_cancel`); err != nil {
		t.Errorf("the change's table is missing: %v", err)
	}
}

// After Close a change fails at once, queued or not.
func TestGroupCommitClose(t *testing.T) {
	db, err := engine.Open(t.Context(), filepath.Join(t.TempDir(), "countersign.db"), engine.Config{})
	if err != nil {
		t.Fatal(err)
	}
	release := enginetest.HoldWriter(t, db)
	errc := make(chan error, 1)
	go func() {
		errc <- db.UpdateCached(t.Context(), func(ctx context.Context, tx engine.Querier) error { return nil })
	}()
	enginetest.WaitQueued(t, db, 1)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	release()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	// The queued change either ran in the group being committed when
	// Close came, or fails: it does not hang.
	if err := <-errc; err != nil && !errors.Is(err, engine.ErrClosed) {
		t.Errorf("queued change at Close: %v", err)
	}
	if err := db.UpdateCached(t.Context(), func(ctx context.Context, tx engine.Querier) error { return nil }); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("change after Close: %v, want %v", err, engine.ErrClosed)
	}
}

// A commit that fails answers every change of the group with the failure
// and keeps none of them; a change that failed on its own keeps its own
// error. A deferred foreign key makes COMMIT itself fail.
func TestGroupCommitFailure(t *testing.T) {
	db := open(t)
	ctx := t.Context()
	change(t, db, `
		CREATE TABLE parent (id INTEGER PRIMARY KEY);
		CREATE TABLE child (n INTEGER, parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`)
	insert := func(parent int) func(ctx context.Context, tx engine.Querier) error {
		return func(ctx context.Context, tx engine.Querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO child (n, parent) VALUES (1, ?)`, parent)
			return err
		}
	}
	change(t, db, `INSERT INTO parent (id) VALUES (1)`)
	count := func() int {
		var n int
		if err := db.Read().QueryRowContext(ctx, `SELECT COUNT(*) FROM child`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Alone.
	if err := db.UpdateCached(ctx, insert(99)); err == nil || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("a change whose commit fails: %v, want the commit's error", err)
	}

	// In a group: a change that fails itself first, a good change, the
	// bad one, and one that fails itself after them. The first refusal
	// saw only what was committed before: it keeps its own error. The
	// second may have failed because of the changes before it, which the
	// failed commit undid: it gets the commit's error.
	release := enginetest.HoldWriter(t, db)
	own, later := errors.New("refused"), errors.New("refused after the others")
	fns := []func(ctx context.Context, tx engine.Querier) error{
		func(ctx context.Context, tx engine.Querier) error { return own },
		insert(1), insert(99),
		func(ctx context.Context, tx engine.Querier) error { return later },
	}
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = db.UpdateCached(ctx, fn) })
		enginetest.WaitQueued(t, db, i+1) // in this order
	}
	release()
	wg.Wait()
	if errs[0] != own {
		t.Errorf("a change that failed itself first: %v, want its own error", errs[0])
	}
	for i := 1; i < len(errs); i++ {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), "commit") {
			t.Errorf("change %d of a group whose commit failed: %v, want the commit's error", i, errs[i])
		}
	}
	if n := count(); n != 0 {
		t.Errorf("%d rows kept after failed commits, want 0", n)
	}
	// The writer goes on.
	if err := db.UpdateCached(ctx, insert(1)); err != nil || count() != 1 {
		t.Fatalf("after the failures: %v, %d rows", err, count())
	}
}

// A change is started only at its turn in the group: its caller can still
// give up while the changes before it run.
func TestGroupCommitCancelInGroup(t *testing.T) {
	db := open(t)
	release := enginetest.HoldWriter(t, db)
	first, hold := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- db.UpdateCached(context.Background(), func(ctx context.Context, tx engine.Querier) error {
			close(first)
			<-hold
			return nil
		})
	}()
	enginetest.WaitQueued(t, db, 1)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{}, 1)
	secondDone := make(chan error, 1)
	go func() {
		secondDone <- db.UpdateCached(ctx, func(ctx context.Context, tx engine.Querier) error {
			ran <- struct{}{}
			return nil
		})
	}()
	enginetest.WaitQueued(t, db, 2)
	release() // the writer takes both as one group and starts the first
	<-first
	cancel()
	// On timeout, release the first change, so that the writer ends.
	err := wait.ReceiveOr(t, secondDone, "the second change's caller giving up while the first ran", func() { close(hold) })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("second change, cancelled while the first ran: %v, want context.Canceled", err)
	}
	close(hold)
	if err := <-firstDone; err != nil {
		t.Errorf("first change: %v", err)
	}
	select {
	case <-ran:
		t.Error("the writer ran a change whose caller had given up")
	default:
	}
}

// A group in which no change fails commits in one transaction.
func TestGroupCommitClean(t *testing.T) {
	db, ctx := openWithTable(t), t.Context()
	release := enginetest.HoldWriter(t, db)
	groups := db.Stats().Transactions
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = db.UpdateCached(ctx, func(ctx context.Context, tx engine.Querier) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (?)`, i)
				return err
			})
		})
	}
	enginetest.WaitQueued(t, db, n)
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("change %d: %v", i, err)
		}
	}
	if got := db.Stats().Transactions - groups; got != 1 {
		t.Errorf("%d transactions for %d queued changes, want 1", got, n)
	}
	var count int
	if err := db.Read().QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&count); err != nil || count != n {
		t.Errorf("%d rows (%v), want %d", count, err, n)
	}
}

// When the second run of a group fails before it reaches a change the
// first run started, that change's caller still hears: here another
// connection takes the write lock between the runs, as another process on
// the file may, and holds it past the busy timeout (here a short one).
func TestGroupRerunFailureAnswersAll(t *testing.T) {
	const busy = 200 * time.Millisecond
	path := filepath.Join(t.TempDir(), "countersign.db")
	db := engine.OpenTest(t, path, engine.Config{BusyTimeout: busy})
	change(t, db, `CREATE TABLE t (n INTEGER PRIMARY KEY)`)
	ctx := t.Context()
	other := enginetest.RawDB(t, path)
	oc, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()

	release := enginetest.HoldWriter(t, db)
	errs := make(chan error, 2)
	go func() {
		errs <- db.UpdateUncached(ctx, func(ctx context.Context, tx engine.Querier) error { return nil })
	}()
	enginetest.WaitQueued(t, db, 1)
	runs := 0
	go func() {
		errs <- db.UpdateUncached(ctx, func(ctx context.Context, tx engine.Querier) error {
			runs++
			if runs == 1 {
				// A row changed, so the group is run again; then the
				// group's transaction ends and another writer takes
				// the lock until after the busy timeout.
				tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (1)`)
				tx.ExecContext(ctx, `ROLLBACK`)
				if _, err := oc.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
					t.Errorf("the other writer's BEGIN: %v", err)
				}
				time.AfterFunc(busy+2*time.Second, func() { oc.ExecContext(context.Background(), `ROLLBACK`) })
			}
			return errors.New("refused")
		})
	}()
	enginetest.WaitQueued(t, db, 2)
	release()
	for i := range 2 {
		if err := wait.Receive(t, errs, fmt.Sprintf("the answer of caller %d of 2 (a change started in the first run)", i+1)); err == nil {
			t.Errorf("answer %d: success, but nothing of the group was kept", i)
		}
	}
}

// A change that fails with SQLite's own error is not taken for a clean
// refusal, even when it changed no row: its group is run again, and the
// others' changes are kept once.
func TestGroupSQLiteErrorReruns(t *testing.T) {
	db, ctx := openWithTable(t), t.Context()
	release := enginetest.HoldWriter(t, db)
	groups := db.Stats().Transactions
	var wg sync.WaitGroup
	var okErr, badErr error
	wg.Go(func() {
		okErr = db.UpdateUncached(ctx, func(ctx context.Context, tx engine.Querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (1)`)
			return err
		})
	})
	enginetest.WaitQueued(t, db, 1)
	wg.Go(func() {
		badErr = db.UpdateUncached(ctx, func(ctx context.Context, tx engine.Querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO no_such_table (n) VALUES (1)`)
			return err
		})
	})
	enginetest.WaitQueued(t, db, 2)
	release()
	wg.Wait()
	if okErr != nil || sqliteCode(badErr) == 0 {
		t.Fatalf("outcomes %v, %v", okErr, badErr)
	}
	if n := db.Stats().Transactions - groups; n != 2 {
		t.Errorf("%d transactions, want 2: a SQLite error was taken for a clean refusal", n)
	}
	var count int
	if err := db.Read().QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&count); err != nil || count != 1 {
		t.Errorf("%d rows (%v), want 1", count, err)
	}
}

// A change that panics, or returns, with a result still open does not keep
// the write connection: the writer goes on.
func TestGroupOpenResults(t *testing.T) {
	db, ctx := openWithTable(t), t.Context()
	for name, fn := range map[string]func(ctx context.Context, tx engine.Querier) error{
		"panic with rows open": func(ctx context.Context, tx engine.Querier) error {
			rows, err := tx.QueryContext(ctx, `SELECT n FROM t UNION ALL SELECT 1 UNION ALL SELECT 2`)
			if err != nil {
				return err
			}
			rows.Next()
			panic("in the middle of the rows")
		},
		"return with rows open": func(ctx context.Context, tx engine.Querier) error {
			rows, err := tx.QueryContext(ctx, `SELECT 1 UNION ALL SELECT 2`)
			if err != nil {
				return err
			}
			rows.Next()
			return errors.New("left them open")
		},
		"panic before a row's Scan": func(ctx context.Context, tx engine.Querier) error {
			tx.QueryRowContext(ctx, `SELECT 1`)
			panic("before the scan")
		},
	} {
		if err := db.UpdateUncached(ctx, fn); err == nil {
			t.Errorf("%s: no error", name)
		}
		done := make(chan error, 1)
		go func() {
			done <- db.UpdateUncached(ctx, func(ctx context.Context, tx engine.Querier) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (NULL)`)
				return err
			})
		}()
		if err := wait.Receive(t, done, "a change taken by the writer after "+name); err != nil {
			t.Errorf("after %s: %v", name, err)
		}
	}
}

// listState is a TxState that keeps names, which Flush writes to the
// table log.
type listState struct {
	names []string // kept since the last Flush
	mark  int
}

func (s *listState) Flush(ctx context.Context, tx engine.Querier) error {
	for _, n := range s.names {
		if _, err := tx.ExecContext(ctx, `INSERT INTO log (name) VALUES (?)`, n); err != nil {
			return err
		}
	}
	s.names = s.names[:0]
	return nil
}
func (s *listState) Mark()   { s.mark = len(s.names) }
func (s *listState) Undo()   { s.names = s.names[:s.mark] }
func (s *listState) Forget() { s.names, s.mark = nil, 0 }

// keep returns a change that keeps name in the transaction's state, and
// then fails with fail, after writing a row of t when dirty.
func keep(name string, dirty bool, fail error) func(ctx context.Context, tx engine.Querier) error {
	return func(ctx context.Context, tx engine.Querier) error {
		s := engine.TxStateOf(ctx).(*listState)
		s.names = append(s.names, name)
		if dirty {
			if _, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (NULL)`); err != nil {
				return err
			}
		}
		return fail
	}
}

// What the changes of a group keep in the transaction's state is written
// for exactly the changes kept, in their order: a refusal that changed no
// row leaves its group alone and drops what it kept; a change that failed
// after writing runs the group again, and what the first run kept is not
// written twice.
func TestGroupTxState(t *testing.T) {
	db := engine.OpenTest(t, filepath.Join(t.TempDir(), "countersign.db"), engine.Config{
		NewTxState: func() engine.TxState { return &listState{} },
	})
	change(t, db, `CREATE TABLE t (n INTEGER PRIMARY KEY); CREATE TABLE log (seq INTEGER PRIMARY KEY, name TEXT)`)
	if !db.Stats().CountsRows {
		t.Fatal("the write connection does not count the rows it changes")
	}
	if engine.TxStateOf(t.Context()) != nil {
		t.Fatal("a state outside the writer")
	}
	refused := errors.New("refused")
	for _, tt := range []struct {
		name    string
		changes []func(ctx context.Context, tx engine.Querier) error
		cached  []bool
		want    string
		runs    int64
	}{
		{"a clean refusal", []func(ctx context.Context, tx engine.Querier) error{
			keep("a", false, nil), keep("b", false, refused), keep("c", false, nil), keep("d", false, nil),
		}, []bool{false, false, true, false}, "a,c,d", 1},
		{"a refusal after writing", []func(ctx context.Context, tx engine.Querier) error{
			keep("e", false, nil), keep("f", true, refused), keep("g", true, nil),
		}, []bool{false, false, true}, "a,c,d,e,g", 2},
	} {
		release := enginetest.HoldWriter(t, db)
		runs := db.Stats().Transactions
		errs := make([]error, len(tt.changes))
		var wg sync.WaitGroup
		for i, fn := range tt.changes {
			wg.Go(func() {
				if tt.cached[i] {
					errs[i] = db.UpdateCached(t.Context(), fn)
				} else {
					errs[i] = db.UpdateUncached(t.Context(), fn)
				}
			})
			enginetest.WaitQueued(t, db, i+1) // in this order
		}
		release()
		wg.Wait()
		for i, err := range errs {
			if want := error(nil); i == 1 {
				want = refused
				if err != want {
					t.Errorf("%s: change %d: %v, want %v", tt.name, i, err, want)
				}
			} else if err != nil {
				t.Errorf("%s: change %d: %v", tt.name, i, err)
			}
		}
		if got := db.Stats().Transactions - runs; got != tt.runs {
			t.Errorf("%s: %d transactions, want %d", tt.name, got, tt.runs)
		}
		rows, err := db.Read().QueryContext(t.Context(), `SELECT group_concat(name, ',') FROM (SELECT name FROM log ORDER BY seq)`)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		for rows.Next() {
			if err := rows.Scan(&got); err != nil {
				t.Fatal(err)
			}
		}
		rows.Close()
		if got != tt.want {
			t.Errorf("%s: the log holds %s, want %s", tt.name, got, tt.want)
		}
	}
	if n := count(t, db, "t"); n != 1 {
		t.Errorf("%d rows in t, want the one of g", n)
	}
}
