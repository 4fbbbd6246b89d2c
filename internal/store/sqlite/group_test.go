package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/sqlite/engine/enginetest"
	"github.com/countersign/countersign/internal/store/storetest"
)

// The audit chain, and the store's changes, through the writer's groups
// (package engine): changes queued behind a held writer commit as one
// group, in the order they were queued.

// holdWriter keeps the writer of db busy until release is called.
func holdWriter(t *testing.T, db *DB) (release func()) { return enginetest.HoldWriter(t, db.eng) }

// waitQueued waits until n changes wait for the writer of db.
func waitQueued(t *testing.T, db *DB, n int) { enginetest.WaitQueued(t, db.eng, n) }

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
				if _, _, _, err := createRequest(ctx, tx, r, mustEncode(t, r), 0, now, countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"}); err != nil {
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
	groups := db.eng.Stats().Transactions
	release()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("create %d: %v", i, err)
		}
	}
	if got := db.eng.Stats().Transactions - groups; got != 1 {
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
	groups := db.eng.Stats().Transactions
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
	if n := db.eng.Stats().Transactions - groups; n != 2 {
		t.Fatalf("%d transactions, want 2: the group was not run again", n)
	}
	if len(got) != 1 || got[0].Attempts != 1 {
		t.Fatalf("ClaimDue handed back %d items (%+v) for 1 due item", len(got), got)
	}
}

// A refusal that changed no row does not undo its group: the others commit
// in the one transaction, and what the refused change chained in the audit
// log is dropped.
func TestGroupCleanRefusal(t *testing.T) {
	f := newCacheFixture(t)
	db, ctx := f.db, t.Context()
	if !db.eng.Stats().CountsRows {
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
	groups := db.eng.Stats().Transactions
	errs := make([]error, len(changes))
	// A change that wrote a row and then failed must still be undone.
	dirtyID := countersign.NewOrderedID("req_")
	dirty := func() error {
		return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
			r := &countersign.Request{ID: dirtyID, AccountID: f.account.ID, KeyID: f.key.ID, KeyName: f.key.Name, Reference: testRef(99),
				Kind: countersign.KindGeneric, Action: "x", Arguments: json.RawMessage(`{}`), ArgsHash: countersign.HashSecret("{}"),
				Preview: "x", PreviewHash: countersign.HashSecret("x"), Status: countersign.StatusPending, ExpiresAt: now.Add(time.Hour)}
			if _, _, _, err := createRequest(ctx, tx, r, mustEncode(t, r), 0, now, countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"}); err != nil {
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
	if n := db.eng.Stats().Transactions - groups; n != 1 {
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
			// (A wait for something not to happen, which no signal
			// can tell; it also holds the transaction open meanwhile.)
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
