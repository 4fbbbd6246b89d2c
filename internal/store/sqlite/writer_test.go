package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
)

// holdWriter starts a change that keeps the writer busy until the returned
// function is called, and waits until the writer has started it.
func holdWriter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	started, hold, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.updateCached(context.Background(), func(ctx context.Context, tx querier) error {
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

// openWithTable opens a new store with a table t (n INTEGER PRIMARY KEY)
// for changes to write to.
func openWithTable(t *testing.T) *DB {
	t.Helper()
	db := openTest(t, filepath.Join(t.TempDir(), "countersign.db"))
	if _, err := db.write.ExecContext(t.Context(), `CREATE TABLE t (n INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// Changes queued together commit in one transaction, and each caller hears
// only its own outcome: a change that fails or panics leaves nothing, the
// others are all kept.
func TestGroupCommit(t *testing.T) {
	db, ctx := openWithTable(t), t.Context()

	release := holdWriter(t, db)
	groups := db.groups.Load()
	const n = 30
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = db.updateCached(ctx, func(ctx context.Context, tx querier) error {
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
	// The group ran once without savepoints, was rolled back when change
	// 1 failed, and ran again with one savepoint per change.
	if got := db.groups.Load() - groups; got != 2 {
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
		errc <- db.updateCached(ctx, func(ctx context.Context, tx querier) error {
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
	if err := db.updateCached(t.Context(), func(ctx context.Context, tx querier) error { return nil }); err != nil {
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
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
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
		errc <- db.updateCached(t.Context(), func(ctx context.Context, tx querier) error { return nil })
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
	if err := db.updateCached(t.Context(), func(ctx context.Context, tx querier) error { return nil }); !errors.Is(err, errStoreClosed) {
		t.Errorf("change after Close: %v, want %v", err, errStoreClosed)
	}
}

// A commit that fails answers every change of the group with the failure
// and keeps none of them; a change that failed on its own keeps its own
// error. A deferred foreign key makes COMMIT itself fail.
func TestGroupCommitFailure(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "countersign.db"))
	ctx := t.Context()
	if _, err := db.write.ExecContext(ctx, `
		CREATE TABLE parent (id INTEGER PRIMARY KEY);
		CREATE TABLE child (n INTEGER, parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	insert := func(parent int) func(ctx context.Context, tx querier) error {
		return func(ctx context.Context, tx querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO child (n, parent) VALUES (1, ?)`, parent)
			return err
		}
	}
	if _, err := db.write.ExecContext(ctx, `INSERT INTO parent (id) VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		var n int
		if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM child`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Alone.
	if err := db.updateCached(ctx, insert(99)); err == nil || !strings.Contains(err.Error(), "commit") {
		t.Fatalf("a change whose commit fails: %v, want the commit's error", err)
	}

	// In a group: a change that fails itself first, a good change, the
	// bad one, and one that fails itself after them. The first refusal
	// saw only what was committed before: it keeps its own error. The
	// second may have failed because of the changes before it, which the
	// failed commit undid: it gets the commit's error.
	release := holdWriter(t, db)
	own, later := errors.New("refused"), errors.New("refused after the others")
	fns := []func(ctx context.Context, tx querier) error{
		func(ctx context.Context, tx querier) error { return own },
		insert(1), insert(99),
		func(ctx context.Context, tx querier) error { return later },
	}
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = db.updateCached(ctx, fn) })
		waitQueued(t, db, i+1) // in this order
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
	if err := db.updateCached(ctx, insert(1)); err != nil || count() != 1 {
		t.Fatalf("after the failures: %v, %d rows", err, count())
	}
}

// A change is started only at its turn in the group: its caller can still
// give up while the changes before it run.
func TestGroupCommitCancelInGroup(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "countersign.db"))
	release := holdWriter(t, db)
	first, hold := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- db.updateCached(context.Background(), func(ctx context.Context, tx querier) error {
			close(first)
			<-hold
			return nil
		})
	}()
	waitQueued(t, db, 1)
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{}, 1)
	secondDone := make(chan error, 1)
	go func() {
		secondDone <- db.updateCached(ctx, func(ctx context.Context, tx querier) error {
			ran <- struct{}{}
			return nil
		})
	}()
	waitQueued(t, db, 2)
	release() // the writer takes both as one group and starts the first
	<-first
	cancel()
	select {
	case err := <-secondDone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("second change, cancelled while the first ran: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		close(hold)
		t.Fatal("the second change's caller could not give up while the first ran")
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

// Commits reach the database file itself, not only the log, without the
// writer doing the copy: the checkpointer does it soon after the commit.
func TestCheckpointer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "countersign.db")
	db := openTest(t, path)
	ctx := t.Context()
	var pages int
	if err := db.write.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if pages != writerCheckpointPages {
		t.Fatalf("the writer checkpoints itself at %d pages, want %d", pages, writerCheckpointPages)
	}
	if err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE t (n INTEGER PRIMARY KEY)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (?)`, i)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}

	// A copy of the database file alone, without its log, holds every
	// row once the checkpointer has run after the last commit.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		// A copy taken while a checkpoint writes may be torn: then
		// the next one is looked at.
		got, err := rowsInFileAlone(t, path, filepath.Join(t.TempDir(), fmt.Sprintf("copy%d.db", i)))
		if err == nil && got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the database file alone holds %d rows of %d (%v) after %d checkpoints", got, n, err, db.checkpoints.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if db.checkpoints.Load() == 0 {
		t.Fatal("no checkpoint ran")
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

// A group in which no change fails commits in one transaction.
func TestGroupCommitClean(t *testing.T) {
	db, ctx := openWithTable(t), t.Context()
	release := holdWriter(t, db)
	groups := db.groups.Load()
	const n = 20
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = db.updateCached(ctx, func(ctx context.Context, tx querier) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (?)`, i)
				return err
			})
		})
	}
	waitQueued(t, db, n)
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("change %d: %v", i, err)
		}
	}
	if got := db.groups.Load() - groups; got != 1 {
		t.Errorf("%d transactions for %d queued changes, want 1", got, n)
	}
	var count int
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&count); err != nil || count != n {
		t.Errorf("%d rows (%v), want %d", count, err, n)
	}
}

// Changes grouped with some that fail, before and after them, leave one
// unbroken audit chain with exactly the entries of the changes kept, and a
// head that names the last of them.
func TestGroupAuditChain(t *testing.T) {
	f := newCacheFixture(t)
	db, ctx := f.db, t.Context()
	now := time.Now().UTC()
	newReq := func(i int) *countersign.Request {
		args := fmt.Sprintf(`{"i":%d}`, i)
		return &countersign.Request{
			AccountID: f.account.ID, KeyID: f.key.ID, KeyName: f.key.Name, Reference: testRef(i),
			Kind: countersign.KindGeneric, Action: "x", Arguments: json.RawMessage(args), ArgsHash: countersign.HashSecret(args),
			Preview: "x", PreviewHash: countersign.HashSecret("x"), Status: countersign.StatusPending,
			ExpiresAt: now.Add(time.Hour),
		}
	}
	created := make([]*countersign.Request, 6)
	for i := range created {
		r, _, err := db.CreateRequest(ctx, newReq(i), 0, now, countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"})
		if err != nil {
			t.Fatal(err)
		}
		created[i] = r
	}
	seq0, _, err := db.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}

	release := holdWriter(t, db)
	approve := func(id string) error {
		_, err := db.Transition(ctx, countersign.Transition{ID: id, From: []countersign.Status{countersign.StatusPending},
			To: countersign.StatusApproved, Now: now, DecidedBy: "alice"}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
		return err
	}
	type change struct {
		name string
		run  func() error
		kept bool // it appends one audit entry that is kept
	}
	changes := []change{
		{"approve 0", func() error { return approve(created[0].ID) }, true},
		{"approve 0 again", func() error { return approve(created[0].ID) }, false},
		{"approve 1", func() error { return approve(created[1].ID) }, true},
		{"create, then fail", func() error {
			return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
				r := newReq(100)
				if _, _, err := createRequest(ctx, tx, r, mustEncode(t, r), 0, now, countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"}); err != nil {
					return err
				}
				return errors.New("refused after its audit entry")
			})
		}, false},
		{"append an entry itself, as an import does", func() error {
			return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
				seq, hash, err := auditHead(ctx, tx)
				if err != nil {
					return err
				}
				e := countersign.AuditEntry{Seq: seq + 1, At: now.Truncate(time.Microsecond), AccountID: f.account.ID, Event: "imported",
					Actor: "system", Detail: "{}", PrevHash: hash}
				e.Hash = e.ComputeHash()
				if _, err := tx.ExecContext(ctx, `INSERT INTO audit_log (seq, at, account_id, request_id, event, actor, detail, prev_hash, hash)
					VALUES (?, ?, ?, '', ?, ?, ?, ?, ?)`, e.Seq, nanos(e.At), e.AccountID, e.Event, e.Actor, e.Detail, e.PrevHash, e.Hash); err != nil {
					return err
				}
				_, err = tx.ExecContext(ctx, `UPDATE audit_head SET seq = ?, hash = ? WHERE id = 1`, e.Seq, e.Hash)
				return err
			})
		}, true},
		{"create 7", func() error {
			_, _, err := db.CreateRequest(ctx, newReq(7), 0, now, countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"})
			return err
		}, true},
		{"revoke another key", func() error {
			k := &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: f.account.ID, Name: "other", Hash: countersign.HashSecret("csk_other"), CreatedAt: now}
			if err := db.CreateAgentKey(ctx, k); err != nil {
				return err
			}
			return db.RevokeAgentKey(ctx, f.account.ID, "other", now)
		}, false},
		{"approve 2", func() error { return approve(created[2].ID) }, true},
		{"approve 3", func() error { return approve(created[3].ID) }, true},
	}
	errs := make([]error, len(changes))
	var wg sync.WaitGroup
	for i, c := range changes {
		wg.Go(func() { errs[i] = c.run() })
		waitQueued(t, db, i+1) // in this order
	}
	release()
	wg.Wait()
	want := seq0
	for i, c := range changes {
		if c.kept {
			want++
			if errs[i] != nil {
				t.Errorf("%s: %v", c.name, errs[i])
			}
		} else if c.name != "revoke another key" && errs[i] == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	problems, count := storetest.Verify(t, db)
	if len(problems) != 0 {
		t.Errorf("audit chain: %v", problems)
	}
	if seq, _, _ := db.AuditHead(ctx); seq != want || count != want {
		t.Errorf("audit head %d with %d entries, want %d", seq, count, want)
	}
}

// testRef returns a distinct reference code for each i.
func testRef(i int) string {
	b := make([]byte, 6)
	for j := 5; j >= 0; j-- {
		b[j] = countersign.ReferenceAlphabet[i%len(countersign.ReferenceAlphabet)]
		i /= len(countersign.ReferenceAlphabet)
	}
	return string(b)
}

func mustEncode(t *testing.T, r *countersign.Request) *encodedRequest {
	enc, err := encodeRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// A group with more audit entries than one INSERT writes leaves them all,
// chained, in order.
func TestGroupAuditChainLong(t *testing.T) {
	f := newCacheFixture(t)
	db, ctx := f.db, t.Context()
	now := time.Now().UTC()
	seq0, _, err := db.AuditHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, db)
	const n = 2*auditInsertRows + 5
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			args := fmt.Sprintf(`{"i":%d}`, i)
			_, _, errs[i] = db.CreateRequest(ctx, &countersign.Request{
				AccountID: f.account.ID, KeyID: f.key.ID, KeyName: f.key.Name, Reference: testRef(i),
				Kind: countersign.KindGeneric, Action: "x", Arguments: json.RawMessage(args), ArgsHash: countersign.HashSecret(args),
				Preview: "x", PreviewHash: countersign.HashSecret("x"), Status: countersign.StatusPending, ExpiresAt: now.Add(time.Hour),
			}, 0, now, countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"})
		})
	}
	waitQueued(t, db, n)
	groups := db.groups.Load()
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("create %d: %v", i, err)
		}
	}
	if got := db.groups.Load() - groups; got != 1 {
		t.Errorf("%d transactions, want the %d creates in 1", got, n)
	}
	problems, count := storetest.Verify(t, db)
	if len(problems) != 0 {
		t.Errorf("audit chain: %v", problems)
	}
	if seq, _, _ := db.AuditHead(ctx); seq != seq0+n || count != seq0+n {
		t.Errorf("audit head %d with %d entries, want %d", seq, count, seq0+n)
	}
}

// A group is run again when one of its changes fails; a real change run
// twice hands its caller what the second run did, not both runs: ClaimDue
// claims its item once.
func TestGroupRerunClaimsOnce(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "countersign.db"))
	ctx := t.Context()
	now := time.Now().UTC().Truncate(time.Second)
	acc := &countersign.Account{ID: countersign.NewID("acc_"), Name: "a", CreatedAt: now}
	if err := db.CreateAccount(ctx, acc); err != nil {
		t.Fatal(err)
	}
	ch := &countersign.Channel{ID: countersign.NewID("chn_"), AccountID: acc.ID, Name: "hook", Type: countersign.ChannelWebhook,
		Config: json.RawMessage(`{"url":"https://hooks.example.com/x"}`), CreatedAt: now}
	if err := db.CreateChannel(ctx, ch); err != nil {
		t.Fatal(err)
	}
	if err := db.Enqueue(ctx, []countersign.OutboxItem{{ID: countersign.NewID("ntf_"), AccountID: acc.ID, ChannelID: ch.ID,
		Event: "created", Payload: []byte("p")}}, now); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, db)
	groups := db.groups.Load()
	var wg sync.WaitGroup
	var got []*countersign.OutboxItem
	var claimErr, failErr error
	wg.Go(func() { got, claimErr = db.ClaimDue(ctx, now.Add(time.Second), 10, time.Minute) })
	waitQueued(t, db, 1)
	wg.Go(func() {
		failErr = db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
			// A row changed, then a failure: the group is undone.
			if _, err := tx.ExecContext(ctx, `UPDATE audit_head SET seq = seq WHERE id = 1`); err != nil {
				return err
			}
			return errors.New("refused")
		})
	})
	waitQueued(t, db, 2)
	release()
	wg.Wait()
	if claimErr != nil || failErr == nil {
		t.Fatalf("claim: %v; the failing change: %v", claimErr, failErr)
	}
	if n := db.groups.Load() - groups; n != 2 {
		t.Fatalf("%d transactions, want 2: the group was not run again", n)
	}
	if len(got) != 1 || got[0].Attempts != 1 {
		t.Fatalf("ClaimDue handed back %d items (%+v) for 1 due item", len(got), got)
	}
}

// When the second run of a group fails before it reaches a change the
// first run started, that change's caller still hears: here another
// connection takes the write lock between the runs, as another process on
// the file may, and holds it past the busy timeout (here a short one).
func TestGroupRerunFailureAnswersAll(t *testing.T) {
	const busy = 200 * time.Millisecond
	path := filepath.Join(t.TempDir(), "countersign.db")
	db := openTest(t, path, withBusyTimeout(busy))
	ctx := t.Context()
	other := rawDB(t, path)
	oc, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Close()

	release := holdWriter(t, db)
	errs := make(chan error, 2)
	go func() {
		errs <- db.updateUncached(ctx, func(ctx context.Context, tx querier) error { return nil })
	}()
	waitQueued(t, db, 1)
	runs := 0
	go func() {
		errs <- db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
			runs++
			if runs == 1 {
				// A row changed, so the group is run again; then the
				// group's transaction ends and another writer takes
				// the lock until after the busy timeout.
				tx.ExecContext(ctx, `UPDATE audit_head SET seq = seq WHERE id = 1`)
				tx.ExecContext(ctx, `ROLLBACK`)
				if _, err := oc.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
					t.Errorf("the other writer's BEGIN: %v", err)
				}
				time.AfterFunc(busy+2*time.Second, func() { oc.ExecContext(context.Background(), `ROLLBACK`) })
			}
			return errors.New("refused")
		})
	}()
	waitQueued(t, db, 2)
	release()
	for i := range 2 {
		select {
		case err := <-errs:
			if err == nil {
				t.Errorf("answer %d: success, but nothing of the group was kept", i)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of 2 callers answered: a change started in the first run was never answered", i)
		}
	}
}

// A refusal that changed no row does not undo its group: the others commit
// in the one transaction, and what the refused change chained in the audit
// log is dropped.
func TestGroupCleanRefusal(t *testing.T) {
	f := newCacheFixture(t)
	db, ctx := f.db, t.Context()
	if !db.rowHook {
		t.Fatal("the write connection does not count the rows it changes")
	}
	now := time.Now().UTC()
	var reqs []*countersign.Request
	for i := range 2 {
		args := fmt.Sprintf(`{"i":%d}`, i)
		r, _, err := db.CreateRequest(ctx, &countersign.Request{
			AccountID: f.account.ID, KeyID: f.key.ID, KeyName: f.key.Name, Reference: testRef(i),
			Kind: countersign.KindGeneric, Action: "x", Arguments: json.RawMessage(args), ArgsHash: countersign.HashSecret(args),
			Preview: "x", PreviewHash: countersign.HashSecret("x"), Status: countersign.StatusPending, ExpiresAt: now.Add(time.Hour),
		}, 0, now, countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"})
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	seq0, _, _ := db.AuditHead(ctx)
	approve := func(id string) error {
		_, err := db.Transition(ctx, countersign.Transition{ID: id, From: []countersign.Status{countersign.StatusPending},
			To: countersign.StatusApproved, Now: now, DecidedBy: "alice"}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
		return err
	}
	changes := []func() error{
		func() error { return approve(reqs[0].ID) },
		func() error { return approve(reqs[0].ID) }, // second: refused, changes nothing
		func() error {
			return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
				if err := appendAudit(ctx, tx, now, f.account.ID, reqs[1].ID, countersign.AuditEvent{Event: "x", Actor: "system", Detail: "{}"}); err != nil {
					return err
				}
				return errors.New("refused after chaining an entry")
			})
		},
		func() error { return approve(reqs[1].ID) },
	}
	release := holdWriter(t, db)
	groups := db.groups.Load()
	errs := make([]error, len(changes))
	// A change that wrote a row and then failed must still be undone.
	dirtyID := countersign.NewOrderedID("req_")
	dirty := func() error {
		return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
			r := &countersign.Request{ID: dirtyID, AccountID: f.account.ID, KeyID: f.key.ID, KeyName: f.key.Name, Reference: testRef(99),
				Kind: countersign.KindGeneric, Action: "x", Arguments: json.RawMessage(`{}`), ArgsHash: countersign.HashSecret("{}"),
				Preview: "x", PreviewHash: countersign.HashSecret("x"), Status: countersign.StatusPending, ExpiresAt: now.Add(time.Hour)}
			if _, _, err := createRequest(ctx, tx, r, mustEncode(t, r), 0, now, countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"}); err != nil {
				return err
			}
			return errors.New("refused after writing")
		})
	}
	var wg sync.WaitGroup
	for i, c := range changes {
		wg.Go(func() { errs[i] = c() })
		waitQueued(t, db, i+1)
	}
	release()
	wg.Wait()
	if errs[0] != nil || errs[3] != nil || countersign.ErrorCode(errs[1]) != countersign.ECONFLICT || errs[2] == nil {
		t.Fatalf("outcomes %v", errs)
	}
	if n := db.groups.Load() - groups; n != 1 {
		t.Errorf("%d transactions, want 1: a refusal that changed nothing undid its group", n)
	}
	if err := dirty(); err == nil {
		t.Fatal("the change that fails after writing succeeded")
	}
	if _, err := db.Request(ctx, dirtyID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the request of a change that failed after writing it: %v, want not found", err)
	}
	problems, count := storetest.Verify(t, db)
	if len(problems) != 0 {
		t.Errorf("audit chain: %v", problems)
	}
	if seq, _, _ := db.AuditHead(ctx); seq != seq0+2 || count != seq0+2 {
		t.Errorf("audit head %d with %d entries, want %d: the two approvals only", seq, count, seq0+2)
	}
}

// A change that fails with SQLite's own error is not taken for a clean
// refusal, even when it changed no row: its group is run again, and the
// others' changes are kept once.
func TestGroupSQLiteErrorReruns(t *testing.T) {
	db, ctx := openWithTable(t), t.Context()
	release := holdWriter(t, db)
	groups := db.groups.Load()
	var wg sync.WaitGroup
	var okErr, badErr error
	wg.Go(func() {
		okErr = db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (1)`)
			return err
		})
	})
	waitQueued(t, db, 1)
	wg.Go(func() {
		badErr = db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO no_such_table (n) VALUES (1)`)
			return err
		})
	})
	waitQueued(t, db, 2)
	release()
	wg.Wait()
	if okErr != nil || sqliteCode(badErr) == 0 {
		t.Fatalf("outcomes %v, %v", okErr, badErr)
	}
	if n := db.groups.Load() - groups; n != 2 {
		t.Errorf("%d transactions, want 2: a SQLite error was taken for a clean refusal", n)
	}
	var count int
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&count); err != nil || count != 1 {
		t.Errorf("%d rows (%v), want 1", count, err)
	}
}

// A refusal that changed no row is answered only once its group is settled:
// when a later change of the group fails after writing, the group runs again
// and the refusal with it, and its caller hears the second run's outcome.
// Answered early, a caller that retried at once (a create whose reference
// was taken, with a new one) raced the second run, which then committed the
// first attempt's request behind the caller's back.
func TestGroupRefusalAnsweredAfterRerun(t *testing.T) {
	f := newCacheFixture(t)
	db, ctx := f.db, t.Context()
	now := time.Now().UTC()
	ev := countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"}
	newReq := func(ref, action string) *countersign.Request {
		args := `{"a":"` + action + `"}`
		return &countersign.Request{AccountID: f.account.ID, KeyID: f.key.ID, KeyName: f.key.Name, Reference: ref,
			Kind: countersign.KindGeneric, Action: action, Arguments: json.RawMessage(args), ArgsHash: countersign.HashSecret(args),
			Preview: action, PreviewHash: countersign.HashSecret(action), Status: countersign.StatusPending, ExpiresAt: now.Add(time.Hour)}
	}
	if _, _, err := db.CreateRequest(ctx, newReq(testRef(0), "holder"), 0, now, ev); err != nil {
		t.Fatal(err)
	}
	release := holdWriter(t, db)
	var wg sync.WaitGroup
	r := newReq(testRef(0), "mine") // its reference is taken
	var firstErr error
	answered := make(chan struct{})
	wg.Go(func() {
		_, _, firstErr = db.CreateRequest(ctx, r, 0, now, ev)
		close(answered)
	})
	waitQueued(t, db, 1)
	var dirtyErr error
	wg.Go(func() {
		dirtyErr = db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
			if _, err := tx.ExecContext(ctx, `UPDATE audit_head SET seq = seq WHERE id = 1`); err != nil {
				return err
			}
			// An answer given now would reach its caller well within
			// the wait; one given after the group cannot come at all.
			select {
			case <-answered:
				t.Error("the refusal was answered before its group was settled")
			case <-time.After(100 * time.Millisecond):
			}
			return errors.New("refused after writing")
		})
	})
	waitQueued(t, db, 2)
	release()
	wg.Wait()
	if !errors.Is(firstErr, countersign.ErrReferenceTaken) || dirtyErr == nil {
		t.Fatalf("outcomes %v, %v; want the reference taken, and the refusal", firstErr, dirtyErr)
	}
	if _, err := db.Request(ctx, r.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the refused create's request: %v, want not found", err)
	}
}

// A change that panics, or returns, with a result still open does not keep
// the write connection: the writer goes on.
func TestGroupOpenResults(t *testing.T) {
	db, ctx := openWithTable(t), t.Context()
	for name, fn := range map[string]func(ctx context.Context, tx querier) error{
		"panic with rows open": func(ctx context.Context, tx querier) error {
			rows, err := tx.QueryContext(ctx, `SELECT n FROM t UNION ALL SELECT 1 UNION ALL SELECT 2`)
			if err != nil {
				return err
			}
			rows.Next()
			panic("in the middle of the rows")
		},
		"return with rows open": func(ctx context.Context, tx querier) error {
			rows, err := tx.QueryContext(ctx, `SELECT 1 UNION ALL SELECT 2`)
			if err != nil {
				return err
			}
			rows.Next()
			return errors.New("left them open")
		},
		"panic before a row's Scan": func(ctx context.Context, tx querier) error {
			tx.QueryRowContext(ctx, `SELECT 1`)
			panic("before the scan")
		},
	} {
		if err := db.updateUncached(ctx, fn); err == nil {
			t.Errorf("%s: no error", name)
		}
		done := make(chan error, 1)
		go func() {
			done <- db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (NULL)`)
				return err
			})
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("after %s: %v", name, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("after %s the writer took no change for 10 s", name)
		}
	}
}
