package storetest

import (
	"bytes"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// approverIn creates an approver who is a member of the accounts.
func approverIn(t *testing.T, s countersign.Store, name string, accounts ...*countersign.Account) *countersign.Approver {
	t.Helper()
	a := &countersign.Approver{ID: countersign.NewID("apr_"), Username: name, PasswordHash: "h", CreatedAt: Base}
	if err := s.CreateApprover(t.Context(), a); err != nil {
		t.Fatalf("CreateApprover: %v", err)
	}
	for _, acc := range accounts {
		if err := s.AddMembership(t.Context(), a.ID, acc.ID, countersign.RoleAdmin, Base); err != nil {
			t.Fatalf("AddMembership: %v", err)
		}
	}
	return a
}

func newSession(t *testing.T, s countersign.Store, a *countersign.Approver, acc *countersign.Account, created time.Time) *countersign.Session {
	t.Helper()
	sess := &countersign.Session{
		Hash: sha(countersign.NewID("")), ApproverID: a.ID, AccountID: acc.ID,
		CreatedAt: created, ExpiresAt: created.Add(12 * time.Hour), LastSeenAt: created,
		UserAgent: "test browser", Client: "192.0.2.1",
	}
	if err := s.CreateSession(t.Context(), sess); err != nil {
		t.Fatalf("CreateSession: %v", err)
	}
	return sess
}

func testSessions(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	one, two := mustAccount(t, s, "one"), mustAccount(t, s, "two")
	alice := approverIn(t, s, "alice", one, two)
	bob := approverIn(t, s, "bob", one)

	first := newSession(t, s, alice, one, Base)
	second := newSession(t, s, alice, one, Base.Add(time.Minute))
	bobs := newSession(t, s, bob, one, Base)

	got, ap, err := s.SessionByHash(ctx, first.Hash, Base.Add(time.Hour))
	if err != nil {
		t.Fatalf("SessionByHash: %v", err)
	}
	first.Role = countersign.RoleAdmin // read from the membership
	same(t, "SessionByHash", got, first)
	if ap.ID != alice.ID || ap.Username != "alice" {
		t.Errorf("SessionByHash approver = %+v", ap)
	}
	_, _, err = s.SessionByHash(ctx, first.Hash, first.ExpiresAt)
	wantCode(t, "SessionByHash at expiry", err, countersign.ENOTFOUND)
	_, _, err = s.SessionByHash(ctx, sha("unknown"), Base)
	wantCode(t, "SessionByHash(unknown)", err, countersign.ENOTFOUND)
	wantCode(t, "CreateSession for a missing approver", s.CreateSession(ctx, &countersign.Session{
		Hash: sha("x"), ApproverID: "apr_missing", AccountID: one.ID, CreatedAt: Base, ExpiresAt: Base.Add(time.Hour), LastSeenAt: Base,
	}), countersign.ENOTFOUND)

	if err := s.TouchSession(ctx, first.Hash, Base.Add(2*time.Hour)); err != nil {
		t.Fatalf("TouchSession: %v", err)
	}
	list, err := s.Sessions(ctx, alice.ID, Base.Add(3*time.Hour))
	if err != nil || len(list) != 2 || list[0].Hash != second.Hash || !list[1].LastSeenAt.Equal(Base.Add(2*time.Hour)) {
		t.Fatalf("Sessions = %+v, %v", list, err)
	}

	// Switching accounts: only to an account of the approver.
	if err := s.SwitchSessionAccount(ctx, first.Hash, two.ID); err != nil {
		t.Fatalf("SwitchSessionAccount: %v", err)
	}
	if got, _, _ := s.SessionByHash(ctx, first.Hash, Base); got == nil || got.AccountID != two.ID {
		t.Fatalf("session after switch = %+v", got)
	}
	wantCode(t, "SwitchSessionAccount to a foreign account", s.SwitchSessionAccount(ctx, bobs.Hash, two.ID), countersign.ENOTFOUND)

	if err := s.DeleteSession(ctx, second.Hash); err != nil {
		t.Fatalf("DeleteSession: %v", err)
	}
	_, _, err = s.SessionByHash(ctx, second.Hash, Base)
	wantCode(t, "SessionByHash after DeleteSession", err, countersign.ENOTFOUND)

	// Sign out everywhere ends alice's sessions and nobody else's.
	n, err := s.DeleteSessions(ctx, alice.ID)
	if err != nil || n != 1 {
		t.Fatalf("DeleteSessions = %d, %v", n, err)
	}
	if _, _, err := s.SessionByHash(ctx, bobs.Hash, Base); err != nil {
		t.Fatalf("bob's session after alice signed out everywhere: %v", err)
	}

	// A new password ends the approver's sessions.
	again := newSession(t, s, bob, one, Base)
	if _, err := s.SetPassword(ctx, bob.ID, "new hash", false, Base); err != nil {
		t.Fatalf("SetPassword: %v", err)
	}
	_, _, err = s.SessionByHash(ctx, again.Hash, Base)
	wantCode(t, "SessionByHash after SetPassword", err, countersign.ENOTFOUND)
	if a, _ := s.ApproverByUsername(ctx, "bob"); a == nil || a.PasswordHash != "new hash" {
		t.Fatalf("password hash after SetPassword = %+v", a)
	}
	_, err = s.SetPassword(ctx, "apr_missing", "h", false, Base)
	wantCode(t, "SetPassword of a missing approver", err, countersign.ENOTFOUND)
}

func testMembershipRemoval(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	one, two := mustAccount(t, s, "one"), mustAccount(t, s, "two")
	alice := approverIn(t, s, "alice", one, two)
	inOne := newSession(t, s, alice, one, Base)
	inTwo := newSession(t, s, alice, two, Base)

	accounts, err := s.MembershipAccounts(ctx, alice.ID)
	if err != nil || len(accounts) != 2 || accounts[0].Name != "one" || accounts[1].Name != "two" {
		t.Fatalf("MembershipAccounts = %+v, %v", accounts, err)
	}
	if _, err := s.RemoveMembership(ctx, alice.ID, one.ID, Base); err != nil {
		t.Fatalf("RemoveMembership: %v", err)
	}
	_, _, err = s.SessionByHash(ctx, inOne.Hash, Base)
	wantCode(t, "session in the account left", err, countersign.ENOTFOUND)
	if _, _, err := s.SessionByHash(ctx, inTwo.Hash, Base); err != nil {
		t.Fatalf("session in the other account: %v", err)
	}
	_, err = s.RemoveMembership(ctx, alice.ID, one.ID, Base)
	wantCode(t, "RemoveMembership again", err, countersign.ENOTFOUND)

	if _, err := s.RemoveApprover(ctx, alice.ID, Base); err != nil {
		t.Fatalf("RemoveApprover: %v", err)
	}
	_, _, err = s.SessionByHash(ctx, inTwo.Hash, Base)
	wantCode(t, "session after RemoveApprover", err, countersign.ENOTFOUND)
	_, err = s.ApproverByUsername(ctx, "alice")
	wantCode(t, "ApproverByUsername after RemoveApprover", err, countersign.ENOTFOUND)
	_, err = s.RemoveApprover(ctx, alice.ID, Base)
	wantCode(t, "RemoveApprover again", err, countersign.ENOTFOUND)
}

func testServerKey(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	a, err := s.ServerKey(ctx, "csrf", 32)
	if err != nil || len(a) != 32 {
		t.Fatalf("ServerKey = %x, %v", a, err)
	}
	b, err := s.ServerKey(ctx, "csrf", 32)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatalf("ServerKey again = %x, %v; want the same key", b, err)
	}
	c, err := s.ServerKey(ctx, "other", 32)
	if err != nil || bytes.Equal(a, c) {
		t.Fatalf("another name gave %x, %v", c, err)
	}
}
