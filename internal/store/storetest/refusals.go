package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// wantError fails the test unless err is an application error with
// exactly the code and the message: every backend refuses with the same
// words, since users read them.
func wantError(t *testing.T, what string, err error, code, message string) {
	t.Helper()
	var e *countersign.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: error %v, want %s %q", what, err, code, message)
		return
	}
	if e.Code != code || e.Message != message {
		t.Errorf("%s: error %s %q, want %s %q", what, e.Code, e.Message, code, message)
	}
}

// testTransitionRefusals checks every refusal of Transition, word for
// word, and that none changes the request.
func testTransitionRefusals(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	other := mustAccount(t, s, "other")
	pending := create(t, s, newRequest(f.key, "Bash", `{"p":1}`, "p"), Base)
	approved := approve(t, s, create(t, s, newRequest(f.key, "Bash", `{"a":1}`, "a"), Base).ID, Base.Add(time.Second))
	denied := deny(t, s, create(t, s, newRequest(f.key, "Bash", `{"d":1}`, "d"), Base).ID, Base.Add(time.Second))
	short := newRequest(f.key, "Bash", `{"e":1}`, "e")
	short.ExpiresAt = Base.Add(time.Minute)
	short = create(t, s, short, Base)
	now := Base.Add(2 * time.Second)
	approve := []countersign.Status{countersign.StatusApproved}
	ev := countersign.AuditEvent{Event: "denied", Actor: "approver:alice", Detail: "{}"}

	tests := []struct {
		name          string
		t             countersign.Transition
		code, message string
	}{
		{"no source", countersign.Transition{ID: pending.ID, To: countersign.StatusDenied, Now: now},
			countersign.EINVALID, "a transition needs a known target and at least one source status"},
		{"unknown target", countersign.Transition{ID: pending.ID, From: fromPending, To: "maybe", Now: now},
			countersign.EINVALID, "a transition needs a known target and at least one source status"},
		{"window without approval", countersign.Transition{ID: pending.ID, From: fromPending, To: countersign.StatusDenied, Now: now,
			Window: &countersign.AutoApproveWindow{Until: now.Add(time.Hour)}},
			countersign.EINVALID, "only an approval opens an auto-approve window"},
		{"missing", countersign.Transition{ID: "req_missing", From: fromPending, To: countersign.StatusDenied, Now: now},
			countersign.ENOTFOUND, "request not found"},
		{"another key", countersign.Transition{ID: pending.ID, From: fromPending, To: countersign.StatusCancelled, Now: now, KeyID: f.key2.ID},
			countersign.ENOTFOUND, "request not found"},
		{"another account", countersign.Transition{ID: pending.ID, From: fromPending, To: countersign.StatusDenied, Now: now, AccountID: other.ID},
			countersign.ENOTFOUND, "request not found"},
		{"still pending", countersign.Transition{ID: pending.ID, From: approve, To: countersign.StatusConsumed, Now: now, KeyID: f.key.ID},
			countersign.ECONFLICT, "request is still pending"},
		{"already approved", countersign.Transition{ID: approved.ID, From: fromPending, To: countersign.StatusDenied, Now: now},
			countersign.ECONFLICT, "request is already approved"},
		{"already denied", countersign.Transition{ID: denied.ID, From: fromPending, To: countersign.StatusApproved, Now: now},
			countersign.ECONFLICT, "request is already denied"},
		{"expired, not yet marked", countersign.Transition{ID: short.ID, From: fromPending, To: countersign.StatusApproved, Now: short.ExpiresAt},
			countersign.ECONFLICT, "request has expired"},
	}
	seq, _, _ := s.AuditHead(ctx)
	for _, tt := range tests {
		_, err := s.Transition(ctx, tt.t, ev)
		wantError(t, tt.name, err, tt.code, tt.message)
	}
	if _, err := s.ExpireRequests(ctx, short.ID, short.ExpiresAt); err != nil {
		t.Fatalf("ExpireRequests: %v", err)
	}
	_, err := s.Transition(ctx, countersign.Transition{ID: short.ID, From: fromPending, To: countersign.StatusApproved, Now: Base}, ev)
	wantError(t, "expired, marked", err, countersign.ECONFLICT, "request has expired")

	for _, r := range []*countersign.Request{pending, approved, denied} {
		got, err := s.Request(ctx, r.ID)
		if err != nil {
			t.Fatalf("Request: %v", err)
		}
		same(t, "request "+r.ID+" after refusals", got, r)
	}
	if seq2, _, _ := s.AuditHead(ctx); seq2 != seq+1 { // the expiry only
		t.Errorf("refused transitions wrote the audit log: head %d, want %d", seq2, seq+1)
	}
}

// testPendingLimitRefusal checks the words of the pending limit and when
// it says to try again.
func testPendingLimitRefusal(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := newRequest(f.key, "Bash", `{"i":1}`, "1")
	r.ExpiresAt = Base.Add(90 * time.Second)
	create(t, s, r, Base)
	over := newRequest(f.key, "Bash", `{"i":2}`, "2")
	_, _, err := s.CreateRequest(ctx, over, 1, Base.Add(30*time.Second), createdEvent(over))
	wantError(t, "CreateRequest over the limit", err, countersign.ELIMIT,
		"this account already has 1 requests waiting for a decision; decide or cancel one, or wait for one to expire, then ask again")
	var e *countersign.Error
	if errors.As(err, &e) && e.RetryAfter != time.Minute {
		t.Errorf("RetryAfter = %v, want 1m0s", e.RetryAfter)
	}
}
