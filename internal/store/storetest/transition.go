package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

var fromPending = []countersign.Status{countersign.StatusPending}

func testTransition(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := create(t, s, newRequest(f.key, "Bash", `{}`, "x"), Base)

	now := Base.Add(time.Minute + 9)
	grace := r.ExpiresAt.Add(3 * time.Minute) // a later expiry replaces the request's
	got, err := s.Transition(ctx, countersign.Transition{
		ID: r.ID, From: fromPending, To: countersign.StatusApproved, Now: now,
		KeyID: f.key.ID, AccountID: f.account.ID, DecidedBy: "approver:alice", Reason: "ok", ExpiresAt: grace,
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	want := *r
	want.Status, want.DecidedAt, want.DecidedBy, want.Reason, want.ExpiresAt = countersign.StatusApproved, now, "approver:alice", "ok", grace
	same(t, "approved request", got, &want)
	stored, err := s.Request(ctx, r.ID)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	same(t, "stored approved request", stored, &want)

	// The first decision wins; any later one is refused and changes
	// nothing.
	for _, to := range []countersign.Status{countersign.StatusApproved, countersign.StatusDenied} {
		_, err := s.Transition(ctx, countersign.Transition{ID: r.ID, From: fromPending, To: to, Now: now.Add(time.Second), DecidedBy: "approver:bob"},
			countersign.AuditEvent{Event: string(to), Actor: "approver:bob", Detail: "{}"})
		wantCode(t, "a second decision ("+string(to)+")", err, countersign.ECONFLICT)
		wantMessage(t, "a second decision", err, "already approved")
	}
	stored, _ = s.Request(ctx, r.ID)
	same(t, "request after refused decisions", stored, &want)

	// Cancel is not a decision: it records no decider.
	c := create(t, s, newRequest(f.key, "Bash", `{"c":1}`, "c"), Base)
	got, err = s.Transition(ctx, countersign.Transition{ID: c.ID, From: fromPending, To: countersign.StatusCancelled, Now: now, KeyID: f.key.ID},
		countersign.AuditEvent{Event: "cancelled", Actor: "key:" + f.key.ID, Detail: "{}"})
	if err != nil || got.Status != countersign.StatusCancelled || !got.DecidedAt.IsZero() || !got.ExpiresAt.Equal(c.ExpiresAt) {
		t.Errorf("cancel: %+v, %v", got, err)
	}
	_, err = s.Transition(ctx, countersign.Transition{ID: "req_missing", From: fromPending, To: countersign.StatusDenied, Now: now},
		countersign.AuditEvent{Event: "denied", Actor: "approver:alice", Detail: "{}"})
	wantCode(t, "Transition(missing)", err, countersign.ENOTFOUND)

	// ExpiresAt is the least expiry: an approval whose grace ends before
	// the request's own expiry keeps the later one.
	l := create(t, s, newRequest(f.key, "Bash", `{"l":1}`, "l"), Base)
	got, err = s.Transition(ctx, countersign.Transition{
		ID: l.ID, From: fromPending, To: countersign.StatusApproved, Now: now, AccountID: f.account.ID,
		DecidedBy: "approver:alice", ExpiresAt: l.ExpiresAt.Add(-time.Minute),
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
	if err != nil {
		t.Fatalf("approve with an earlier grace: %v", err)
	}
	if !got.ExpiresAt.Equal(l.ExpiresAt) {
		t.Errorf("approved with an earlier grace: expires %v, want the request's own %v", got.ExpiresAt, l.ExpiresAt)
	}
	if stored, _ := s.Request(ctx, l.ID); stored == nil || !stored.ExpiresAt.Equal(l.ExpiresAt) {
		t.Errorf("stored after an earlier grace: %+v, want expiry %v", stored, l.ExpiresAt)
	}
}

func testTransitionExpired(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := newRequest(f.key, "Bash", `{}`, "x")
	r.ExpiresAt = Base.Add(time.Minute)
	r = create(t, s, r, Base)
	seq, _, _ := s.AuditHead(ctx)

	// At its expiry a request can no longer be decided, even before it is
	// marked expired.
	_, err := s.Transition(ctx, countersign.Transition{ID: r.ID, From: fromPending, To: countersign.StatusApproved, Now: r.ExpiresAt, DecidedBy: "approver:alice"},
		countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
	wantCode(t, "approve at expiry", err, countersign.ECONFLICT)
	wantMessage(t, "approve at expiry", err, "expired")
	got, err := s.Request(ctx, r.ID)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	same(t, "request after a refused late approval", got, r)
	if seq2, _, _ := s.AuditHead(ctx); seq2 != seq {
		t.Errorf("a refused transition wrote the audit log: head %d, want %d", seq2, seq)
	}
}

func testTransitionScope(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	other := mustAccount(t, s, "other")
	r := create(t, s, newRequest(f.key, "Bash", `{}`, "x"), Base)
	ev := countersign.AuditEvent{Event: "cancelled", Actor: "key:x", Detail: "{}"}

	// Another key's or another account's request does not exist for the
	// caller, whatever its state.
	_, err := s.Transition(ctx, countersign.Transition{ID: r.ID, From: fromPending, To: countersign.StatusCancelled, Now: Base, KeyID: f.key2.ID}, ev)
	wantCode(t, "Transition with another key", err, countersign.ENOTFOUND)
	_, err = s.Transition(ctx, countersign.Transition{ID: r.ID, From: fromPending, To: countersign.StatusDenied, Now: Base, AccountID: other.ID}, ev)
	wantCode(t, "Transition in another account", err, countersign.ENOTFOUND)
	_, err = s.Transition(ctx, countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusApproved}, To: countersign.StatusConsumed, Now: Base, KeyID: f.key2.ID}, ev)
	wantCode(t, "consume with another key", err, countersign.ENOTFOUND)
	got, _ := s.Request(ctx, r.ID)
	same(t, "request after foreign transitions", got, r)
}

func testConsume(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := create(t, s, newRequest(f.key, "Bash", `{}`, "x"), Base)
	consume := func(now time.Time) (*countersign.Request, error) {
		return s.Transition(ctx, countersign.Transition{
			ID: r.ID, From: []countersign.Status{countersign.StatusApproved}, To: countersign.StatusConsumed, Now: now, KeyID: f.key.ID,
		}, countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"})
	}

	_, err := consume(Base)
	wantCode(t, "consume a pending request", err, countersign.ECONFLICT)
	approve(t, s, r.ID, Base.Add(time.Second))
	at := Base.Add(2*time.Second + 5)
	got, err := consume(at)
	if err != nil {
		t.Fatalf("consume: %v", err)
	}
	if got.Status != countersign.StatusConsumed || !got.ConsumedAt.Equal(at) || !got.DecidedAt.Equal(Base.Add(time.Second)) {
		t.Errorf("consumed request: status %s, consumed at %v, decided at %v", got.Status, got.ConsumedAt, got.DecidedAt)
	}
	_, err = consume(at.Add(time.Second))
	wantCode(t, "consume twice", err, countersign.ECONFLICT)
	wantMessage(t, "consume twice", err, "already consumed")
}

// race runs n goroutines that each try one transition of the same request
// at the same moment and returns how many succeeded.
func race(t *testing.T, s countersign.Store, n int, tr func(i int) countersign.Transition) int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	wins := 0
	for i := range n {
		wg.Go(func() {
			<-start
			tt := tr(i)
			_, err := s.Transition(t.Context(), tt, countersign.AuditEvent{Event: string(tt.To), Actor: "test", Detail: "{}"})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
			} else if countersign.ErrorCode(err) != countersign.ECONFLICT {
				t.Errorf("goroutine %d: %v, want ECONFLICT", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return wins
}

func testDecideRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	for run := range 20 {
		r := create(t, s, newRequest(f.key, "Bash", `{}`, "race"), Base)
		seq, _, _ := s.AuditHead(t.Context())
		wins := race(t, s, 50, func(i int) countersign.Transition {
			to := countersign.StatusApproved
			if i%2 == 1 {
				to = countersign.StatusDenied
			}
			return countersign.Transition{ID: r.ID, From: fromPending, To: to, Now: Base.Add(time.Second), DecidedBy: "approver:alice"}
		})
		if wins != 1 {
			t.Fatalf("run %d: %d decisions succeeded, want exactly 1", run, wins)
		}
		if seq2, _, _ := s.AuditHead(t.Context()); seq2 != seq+1 {
			t.Fatalf("run %d: audit head moved from %d to %d, want one entry", run, seq, seq2)
		}
		// Finish it so that the next run's identical request is new.
		if _, err := s.ExpireRequests(t.Context(), r.ID, r.ExpiresAt); err != nil {
			t.Fatalf("ExpireRequests: %v", err)
		}
	}
}

func testConsumeRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	r := create(t, s, newRequest(f.key, "Bash", `{}`, "race"), Base)
	approve(t, s, r.ID, Base.Add(time.Second))
	wins := race(t, s, 20, func(int) countersign.Transition {
		return countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusApproved}, To: countersign.StatusConsumed, Now: Base.Add(2 * time.Second), KeyID: f.key.ID}
	})
	if wins != 1 {
		t.Fatalf("%d consumptions succeeded, want exactly 1", wins)
	}
}
