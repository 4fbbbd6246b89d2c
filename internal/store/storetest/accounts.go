package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

func testAccounts(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	b := &countersign.Account{ID: countersign.NewID("acc_"), Name: "beta", CreatedAt: Base.Add(123 * time.Nanosecond)}
	a := &countersign.Account{ID: countersign.NewID("acc_"), Name: "alpha", CreatedAt: Base}
	for _, acc := range []*countersign.Account{b, a} {
		if err := s.CreateAccount(ctx, acc); err != nil {
			t.Fatalf("CreateAccount(%s): %v", acc.Name, err)
		}
	}

	got, err := s.Account(ctx, b.ID)
	if err != nil {
		t.Fatalf("Account: %v", err)
	}
	same(t, "Account", got, b)
	got, err = s.AccountByName(ctx, "alpha")
	if err != nil {
		t.Fatalf("AccountByName: %v", err)
	}
	same(t, "AccountByName", got, a)

	all, err := s.Accounts(ctx)
	if err != nil {
		t.Fatalf("Accounts: %v", err)
	}
	same(t, "Accounts", all, []*countersign.Account{a, b})

	err = s.CreateAccount(ctx, &countersign.Account{ID: countersign.NewID("acc_"), Name: "alpha", CreatedAt: Base})
	wantCode(t, "CreateAccount with a taken name", err, countersign.ECONFLICT)
	_, err = s.Account(ctx, "acc_missing")
	wantCode(t, "Account(missing)", err, countersign.ENOTFOUND)
	_, err = s.AccountByName(ctx, "missing")
	wantCode(t, "AccountByName(missing)", err, countersign.ENOTFOUND)
}

func testAgentKeys(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	other := mustAccount(t, s, "other")
	otherKey := mustKey(t, s, other, "laptop") // the same name in another account is fine

	got, err := s.AgentKeyByHash(ctx, f.key.Hash)
	if err != nil {
		t.Fatalf("AgentKeyByHash: %v", err)
	}
	same(t, "AgentKeyByHash", got, f.key)
	if got.Revoked() {
		t.Errorf("a new key is revoked")
	}
	_, err = s.AgentKeyByHash(ctx, sha("unknown"))
	wantCode(t, "AgentKeyByHash(unknown)", err, countersign.ENOTFOUND)

	keys, err := s.AgentKeys(ctx, f.account.ID)
	if err != nil {
		t.Fatalf("AgentKeys: %v", err)
	}
	if len(keys) != 2 {
		t.Fatalf("AgentKeys: got %d keys, want 2", len(keys))
	}
	for _, k := range keys {
		if k.AccountID != f.account.ID {
			t.Errorf("AgentKeys lists key %s of account %s", k.ID, k.AccountID)
		}
	}

	dup := &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: f.account.ID, Name: "laptop", Hash: sha("x"), CreatedAt: Base}
	wantCode(t, "CreateAgentKey with a taken name", s.CreateAgentKey(ctx, dup), countersign.ECONFLICT)
	orphan := &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: "acc_missing", Name: "x", Hash: sha("y"), CreatedAt: Base}
	wantCode(t, "CreateAgentKey of a missing account", s.CreateAgentKey(ctx, orphan), countersign.ENOTFOUND)

	testRevoke(t, f, otherKey)
}

func testRevoke(t *testing.T, f *fixture, otherKey *countersign.AgentKey) {
	s, ctx := f.s, t.Context()
	at := Base.Add(time.Hour + 7*time.Nanosecond)
	if err := s.RevokeAgentKey(ctx, f.account.ID, "laptop", at); err != nil {
		t.Fatalf("RevokeAgentKey by name: %v", err)
	}
	got, err := s.AgentKeyByHash(ctx, f.key.Hash)
	if err != nil {
		t.Fatalf("AgentKeyByHash of a revoked key: %v", err)
	}
	if !got.Revoked() || !got.RevokedAt.Equal(at) {
		t.Errorf("revoked key: RevokedAt = %v, want %v", got.RevokedAt, at)
	}
	wantCode(t, "RevokeAgentKey twice", s.RevokeAgentKey(ctx, f.account.ID, f.key.ID, at), countersign.ECONFLICT)

	if err := s.RevokeAgentKey(ctx, f.account.ID, f.key2.ID, at); err != nil {
		t.Fatalf("RevokeAgentKey by id: %v", err)
	}
	wantCode(t, "RevokeAgentKey(missing)", s.RevokeAgentKey(ctx, f.account.ID, "nope", at), countersign.ENOTFOUND)
	wantCode(t, "RevokeAgentKey of another account's key", s.RevokeAgentKey(ctx, f.account.ID, otherKey.ID, at), countersign.ENOTFOUND)
	got, err = s.AgentKeyByHash(ctx, otherKey.Hash)
	if err != nil || got.Revoked() {
		t.Errorf("another account's key named laptop: revoked = %v, err = %v; want untouched", got != nil && got.Revoked(), err)
	}
}

func testApprovers(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	acc1, acc2 := mustAccount(t, s, "one"), mustAccount(t, s, "two")
	a := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "alice", PasswordHash: "$argon2id$v=19$x", CreatedAt: Base}
	if err := s.CreateApprover(ctx, a); err != nil {
		t.Fatalf("CreateApprover: %v", err)
	}
	got, err := s.ApproverByUsername(ctx, "alice")
	if err != nil {
		t.Fatalf("ApproverByUsername: %v", err)
	}
	same(t, "ApproverByUsername", got, a)
	_, err = s.ApproverByUsername(ctx, "bob")
	wantCode(t, "ApproverByUsername(missing)", err, countersign.ENOTFOUND)
	dup := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "alice", CreatedAt: Base}
	wantCode(t, "CreateApprover with a taken username", s.CreateApprover(ctx, dup), countersign.ECONFLICT)

	ids, err := s.Memberships(ctx, a.ID)
	if err != nil || len(ids) != 0 {
		t.Fatalf("Memberships before any: %v, %v; want none", ids, err)
	}
	for _, acc := range []*countersign.Account{acc1, acc2, acc1} {
		if err := s.AddMembership(ctx, a.ID, acc.ID, countersign.RoleAdmin, Base); err != nil {
			t.Fatalf("AddMembership(%s): %v", acc.Name, err)
		}
	}
	ids, err = s.Memberships(ctx, a.ID)
	if err != nil {
		t.Fatalf("Memberships: %v", err)
	}
	slices.Sort(ids)
	want := []string{acc1.ID, acc2.ID}
	slices.Sort(want)
	same(t, "Memberships", ids, want)
	wantCode(t, "AddMembership to a missing account", s.AddMembership(ctx, a.ID, "acc_missing", countersign.RoleAdmin, Base), countersign.ENOTFOUND)
}

func testApproverTokens(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	acc := mustAccount(t, s, "one")
	a := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "alice", PasswordHash: "h", CreatedAt: Base}
	if err := s.CreateApprover(ctx, a); err != nil {
		t.Fatalf("CreateApprover: %v", err)
	}
	if err := s.AddMembership(ctx, a.ID, acc.ID, countersign.RoleAdmin, Base); err != nil {
		t.Fatalf("AddMembership: %v", err)
	}
	secret := countersign.NewSecret(countersign.ApproverTokenPrefix)
	tok := &countersign.ApproverToken{
		ID: countersign.NewID("tok_"), ApproverID: a.ID, AccountID: acc.ID, Name: "phone",
		Hash: countersign.HashSecret(secret), Hint: countersign.SecretHint(secret), CreatedAt: Base,
	}
	if err := s.CreateApproverToken(ctx, tok); err != nil {
		t.Fatalf("CreateApproverToken: %v", err)
	}
	gotTok, gotApr, err := s.ApproverTokenByHash(ctx, tok.Hash)
	if err != nil {
		t.Fatalf("ApproverTokenByHash: %v", err)
	}
	tok.Role = countersign.RoleAdmin // read from the membership
	same(t, "ApproverTokenByHash token", gotTok, tok)
	same(t, "ApproverTokenByHash approver", gotApr, a)
	if gotTok.Revoked() {
		t.Errorf("a new token is revoked")
	}
	_, _, err = s.ApproverTokenByHash(ctx, sha("unknown"))
	wantCode(t, "ApproverTokenByHash(unknown)", err, countersign.ENOTFOUND)

	// Tokens are listed and revoked by id or name, once.
	list, err := s.ApproverTokens(ctx, a.ID)
	if err != nil || len(list) != 1 || list[0].ID != tok.ID || list[0].Revoked() {
		t.Fatalf("ApproverTokens = %+v, %v", list, err)
	}
	other := &countersign.ApproverToken{ID: countersign.NewID("tok_"), ApproverID: a.ID, AccountID: acc.ID, Name: "laptop",
		Hash: sha("laptop-token"), Hint: "cst_lapt…", CreatedAt: Base.Add(time.Second)}
	if err := s.CreateApproverToken(ctx, other); err != nil {
		t.Fatalf("CreateApproverToken: %v", err)
	}
	if err := s.RevokeApproverToken(ctx, a.ID, "laptop", Base.Add(time.Hour)); err != nil {
		t.Fatalf("RevokeApproverToken by name: %v", err)
	}
	wantCode(t, "RevokeApproverToken again", s.RevokeApproverToken(ctx, a.ID, other.ID, Base.Add(time.Hour)), countersign.ECONFLICT)
	wantCode(t, "RevokeApproverToken of another approver", s.RevokeApproverToken(ctx, "apr_other", tok.ID, Base.Add(time.Hour)), countersign.ENOTFOUND)
	if got, _, err := s.ApproverTokenByHash(ctx, other.Hash); err != nil || !got.Revoked() || !got.RevokedAt.Equal(Base.Add(time.Hour)) {
		t.Fatalf("revoked token = %+v, %v", got, err)
	}
	if got, _, err := s.ApproverTokenByHash(ctx, tok.Hash); err != nil || got.Revoked() {
		t.Fatalf("the other token after revoking one = %+v, %v", got, err)
	}

	// Leaving the account revokes the approver's tokens there.
	if _, err := s.RemoveMembership(ctx, a.ID, acc.ID, Base.Add(time.Minute)); err != nil {
		t.Fatalf("RemoveMembership: %v", err)
	}
	_, _, err = s.ApproverTokenByHash(ctx, tok.Hash)
	wantCode(t, "ApproverTokenByHash after RemoveMembership", err, countersign.ENOTFOUND)
}

// testRoles: a membership's role is stored, read with the sessions and
// tokens of the account (not of another), changed by SetRole at once
// (however the store caches tokens), and listed by Members; a role that is
// not one, and a change for a non-member, change nothing.
func testRoles(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	acc, other := mustAccount(t, s, "one"), mustAccount(t, s, "two")
	a := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "vera", PasswordHash: "h", CreatedAt: Base}
	if err := s.CreateApprover(ctx, a); err != nil {
		t.Fatalf("CreateApprover: %v", err)
	}
	b := approverIn(t, s, "ann", acc)
	if err := s.AddMembership(ctx, a.ID, acc.ID, countersign.RoleViewer, Base); err != nil {
		t.Fatalf("AddMembership viewer: %v", err)
	}
	if err := s.AddMembership(ctx, a.ID, other.ID, countersign.RoleApprover, Base); err != nil {
		t.Fatalf("AddMembership approver: %v", err)
	}
	// Adding again keeps the role.
	if err := s.AddMembership(ctx, a.ID, acc.ID, countersign.RoleAdmin, Base); err != nil {
		t.Fatalf("AddMembership again: %v", err)
	}
	wantCode(t, "AddMembership with no role", s.AddMembership(ctx, b.ID, other.ID, "", Base), countersign.EINVALID)
	wantCode(t, "AddMembership with an unknown role", s.AddMembership(ctx, b.ID, other.ID, "owner", Base), countersign.EINVALID)

	secret := countersign.NewSecret(countersign.ApproverTokenPrefix)
	tok := &countersign.ApproverToken{ID: countersign.NewID("tok_"), ApproverID: a.ID, AccountID: acc.ID, Name: "cli",
		Hash: countersign.HashSecret(secret), Hint: countersign.SecretHint(secret), CreatedAt: Base}
	if err := s.CreateApproverToken(ctx, tok); err != nil {
		t.Fatalf("CreateApproverToken: %v", err)
	}
	sessOne, sessTwo := newSession(t, s, a, acc, Base), newSession(t, s, a, other, Base)
	wantRoles := func(what string, one, two countersign.Role) {
		t.Helper()
		if got, _, err := s.SessionByHash(ctx, sessOne.Hash, Base); err != nil || got.Role != one {
			t.Errorf("%s: the session of account one reads role %q (%v), want %s", what, roleOf(got), err, one)
		}
		if got, _, err := s.SessionByHash(ctx, sessTwo.Hash, Base); err != nil || got.Role != two {
			t.Errorf("%s: the session of account two reads role %q (%v), want %s", what, roleOf(got), err, two)
		}
		if got, _, err := s.ApproverTokenByHash(ctx, tok.Hash); err != nil || got.Role != one {
			t.Errorf("%s: the token of account one reads role %q (%v), want %s", what, tokRole(got), err, one)
		}
	}
	wantRoles("as added", countersign.RoleViewer, countersign.RoleApprover)
	if err := s.SetRole(ctx, a.ID, acc.ID, countersign.RoleAdmin); err != nil {
		t.Fatalf("SetRole: %v", err)
	}
	wantRoles("after SetRole", countersign.RoleAdmin, countersign.RoleApprover)
	wantCode(t, "SetRole of a non-member", s.SetRole(ctx, b.ID, other.ID, countersign.RoleAdmin), countersign.ENOTFOUND)
	wantCode(t, "SetRole to an unknown role", s.SetRole(ctx, a.ID, acc.ID, "root"), countersign.EINVALID)
	wantRoles("after refused changes", countersign.RoleAdmin, countersign.RoleApprover)

	same(t, "Members", memberRoles(t, s, acc.ID), []string{"ann:admin", "vera:admin"})
	if members, err := s.Members(ctx, "acc_missing"); err != nil || len(members) != 0 {
		t.Errorf("Members of a missing account: %v, %v; want none", members, err)
	}
}

// memberRoles lists the members of an account as username:role.
func memberRoles(t *testing.T, s countersign.Store, accountID string) []string {
	t.Helper()
	members, err := s.Members(t.Context(), accountID)
	if err != nil {
		t.Fatalf("Members: %v", err)
	}
	var got []string
	for _, m := range members {
		got = append(got, m.Username+":"+string(m.Role))
	}
	return got
}

func roleOf(s *countersign.Session) countersign.Role {
	if s == nil {
		return ""
	}
	return s.Role
}

func tokRole(t *countersign.ApproverToken) countersign.Role {
	if t == nil {
		return ""
	}
	return t.Role
}
