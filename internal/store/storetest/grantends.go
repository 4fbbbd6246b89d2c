package storetest

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// liveGrant stores a grant of acc allowed by ap and redeems its code for
// an access and a refresh token (tokens(name, …)).
func liveGrant(t *testing.T, s countersign.Store, acc *countersign.Account, ap *countersign.Approver, name string) (*countersign.Grant, *countersign.Session) {
	t.Helper()
	g, sess, code := newGrant(t, s, acc, ap, name)
	if _, _, err := s.RedeemOAuthToken(t.Context(), code, countersign.TokenCode, Base, nil, tokens(name, Base.Add(time.Hour))); err != nil {
		t.Fatalf("RedeemOAuthToken(%s): %v", name, err)
	}
	return g, sess
}

// wantGrantLive checks that a grant works: its access token and its
// consent's session are found, and it reads as live.
func wantGrantLive(t *testing.T, s countersign.Store, what string, g *countersign.Grant, name string) {
	t.Helper()
	if got, err := s.Grant(t.Context(), g.ID); err != nil || got.Revoked() {
		t.Errorf("%s: grant %s = %+v, %v; want live", what, name, got, err)
	}
	if _, _, err := s.AccessToken(t.Context(), sha("access-"+name), Base); err != nil {
		t.Errorf("%s: the access token of grant %s: %v", what, name, err)
	}
}

// wantGrantEnded checks that a grant was revoked at at: it reads as
// revoked, its key is revoked, its access token is not found, its refresh
// token cannot be redeemed, and its consent's session is gone.
func wantGrantEnded(t *testing.T, s countersign.Store, what string, g *countersign.Grant, sess *countersign.Session, name string, at time.Time) {
	t.Helper()
	ctx := t.Context()
	if got, err := s.Grant(ctx, g.ID); err != nil || !got.RevokedAt.Equal(at) {
		t.Errorf("%s: grant %s = %+v, %v; want revoked at %v", what, name, got, err, at)
	}
	if k, err := s.AgentKeyByHash(ctx, sha("grant-key-"+name)); err != nil || !k.Revoked() {
		t.Errorf("%s: the key of grant %s = %+v, %v; want revoked", what, name, k, err)
	}
	_, _, err := s.AccessToken(ctx, sha("access-"+name), Base)
	wantCode(t, what+": access token of grant "+name, err, countersign.ENOTFOUND)
	_, _, err = s.RedeemOAuthToken(ctx, sha("refresh-"+name), countersign.TokenRefresh, Base, nil, nil)
	wantCode(t, what+": refresh token of grant "+name, err, countersign.ENOTFOUND)
	_, _, err = s.SessionByHash(ctx, sess.Hash, Base)
	wantCode(t, what+": the consent's session of grant "+name, err, countersign.ENOTFOUND)
	wantCode(t, what+": RevokeGrant of grant "+name, s.RevokeGrant(ctx, "", g.ID, at), countersign.ECONFLICT)
}

// grantRevocations returns the audit log's grant_revoked entries, and
// fails if one holds any of the secrets' hashes.
func grantRevocations(t *testing.T, s countersign.Store, hashes ...string) []*countersign.AuditEntry {
	t.Helper()
	entries, err := s.AuditLog(t.Context(), 0, 1000)
	if err != nil {
		t.Fatalf("AuditLog: %v", err)
	}
	var out []*countersign.AuditEntry
	for _, e := range entries {
		if e.Event != countersign.AuditGrantRevoked {
			continue
		}
		for _, h := range hashes {
			if strings.Contains(e.Detail, h) {
				t.Errorf("the audit entry %q holds a token's hash", e.Detail)
			}
		}
		out = append(out, e)
	}
	return out
}

// wantRevocation checks that an audit entry records grant g of the
// account revoked at at for reason.
func wantRevocation(t *testing.T, e *countersign.AuditEntry, g *countersign.Grant, reason string, at time.Time) {
	t.Helper()
	want := countersign.GrantRevokedEvent(g.ID, reason)
	if e.AccountID != g.AccountID || e.RequestID != "" || e.Event != want.Event || e.Actor != want.Actor || e.Detail != want.Detail || !e.At.Equal(at) {
		t.Errorf("audit entry = %+v, want %+v of account %s at %v", e, want, g.AccountID, at)
	}
}

// testGrantEndsWithApprover: a grant ends with the approver who allowed
// it. Removing the approver from an account revokes its grants there, and
// only there; a new password revokes its grants everywhere unless they are
// kept; removing the approver revokes the rest. Each revocation is in the
// transaction of the change, returned, and recorded in the audit log with
// its reason and no token. Another approver's grant is untouched, and an
// approver who left an account cannot be given a grant there.
func testGrantEndsWithApprover(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	one, two := mustAccount(t, s, "one"), mustAccount(t, s, "two")
	alice := approverIn(t, s, "alice", one, two)
	bob := approverIn(t, s, "bob", one)
	a1, a1Sess := liveGrant(t, s, one, alice, "a1")
	a2, a2Sess := liveGrant(t, s, two, alice, "a2")
	b1, _ := liveGrant(t, s, one, bob, "b1")

	left := Base.Add(time.Minute)
	revoked, err := s.RemoveMembership(ctx, alice.ID, one.ID, left)
	if err != nil || !slices.Equal(revoked, []string{a1.ID}) {
		t.Fatalf("RemoveMembership = %v, %v; want [%s]", revoked, err, a1.ID)
	}
	wantGrantEnded(t, s, "after RemoveMembership", a1, a1Sess, "a1", left)
	wantGrantLive(t, s, "after RemoveMembership", a2, "a2")
	wantGrantLive(t, s, "after RemoveMembership", b1, "b1")
	g := &countersign.Grant{AccountID: one.ID, ClientID: "c", ClientName: "Claude", ApproverID: alice.ID, ApproverName: "alice", Tiers: []string{"read"}, CreatedAt: left}
	err = s.CreateGrant(ctx, g, &countersign.AgentKey{AccountID: one.ID, Name: "grant-late", Hash: sha("grant-key-late"), Hint: "(grant)", CreatedAt: left}, nil, nil)
	wantCode(t, "CreateGrant of an approver who left the account", err, countersign.EFORBIDDEN)
	if _, err := s.AgentKeyByHash(ctx, sha("grant-key-late")); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("a refused grant left its key: %v", err)
	}

	kept, err := s.SetPassword(ctx, alice.ID, "new hash", true, left.Add(time.Minute))
	if err != nil || len(kept) != 0 {
		t.Fatalf("SetPassword keeping grants = %v, %v; want none revoked", kept, err)
	}
	wantGrantLive(t, s, "after SetPassword keeping grants", a2, "a2")
	reset := left.Add(2 * time.Minute)
	revoked, err = s.SetPassword(ctx, alice.ID, "newer hash", false, reset)
	if err != nil || !slices.Equal(revoked, []string{a2.ID}) {
		t.Fatalf("SetPassword = %v, %v; want [%s]", revoked, err, a2.ID)
	}
	wantGrantEnded(t, s, "after SetPassword", a2, a2Sess, "a2", reset)

	a3, a3Sess := liveGrant(t, s, two, alice, "a3")
	gone := reset.Add(time.Minute)
	revoked, err = s.RemoveApprover(ctx, alice.ID, gone)
	if err != nil || !slices.Equal(revoked, []string{a3.ID}) {
		t.Fatalf("RemoveApprover = %v, %v; want [%s]", revoked, err, a3.ID)
	}
	wantGrantEnded(t, s, "after RemoveApprover", a3, a3Sess, "a3", gone)
	wantGrantLive(t, s, "after RemoveApprover", b1, "b1")
	if got, _ := s.Grant(ctx, a3.ID); got.ApproverName != "alice" {
		t.Errorf("a removed approver's grant names %q, want alice", got.ApproverName)
	}

	var hashes []string
	for _, n := range []string{"a1", "a2", "a3", "b1"} {
		hashes = append(hashes, sha("access-"+n), sha("refresh-"+n), sha("code-"+n), sha("grant-session-"+n))
	}
	entries := grantRevocations(t, s, hashes...)
	if len(entries) != 3 {
		t.Fatalf("%d grant_revoked entries, want 3: %+v", len(entries), entries)
	}
	wantRevocation(t, entries[0], a1, countersign.RevokedApproverRemoved, left)
	wantRevocation(t, entries[1], a2, countersign.RevokedPasswordReset, reset)
	wantRevocation(t, entries[2], a3, countersign.RevokedApproverRemoved, gone)
	if problems, _ := Verify(t, s); len(problems) != 0 {
		t.Errorf("the audit chain after the revocations: %v", problems)
	}
}

// testKeyRevokeEndsGrant: revoking a grant's key revokes the grant with
// what revoking the grant ends (its tokens, its consent's session), in the
// same transaction, with an audit entry; revoking another key touches no
// grant.
func testKeyRevokeEndsGrant(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	alice := approverIn(t, s, "alice", f.account)
	g, sess := liveGrant(t, s, f.account, alice, "k")
	other, _ := liveGrant(t, s, f.account, alice, "o")
	if err := s.RevokeAgentKey(ctx, f.account.ID, f.key.ID, Base); err != nil {
		t.Fatalf("RevokeAgentKey of a plain key: %v", err)
	}
	at := Base.Add(time.Minute)
	if err := s.RevokeAgentKey(ctx, f.account.ID, g.KeyName, at); err != nil {
		t.Fatalf("RevokeAgentKey of a grant's key: %v", err)
	}
	wantGrantEnded(t, s, "after RevokeAgentKey", g, sess, "k", at)
	wantGrantLive(t, s, "after RevokeAgentKey", other, "o")
	wantCode(t, "RevokeAgentKey of the grant's key again", s.RevokeAgentKey(ctx, f.account.ID, g.KeyID, at), countersign.ECONFLICT)
	entries := grantRevocations(t, s, sha("access-k"), sha("refresh-k"), sha("grant-session-k"))
	if len(entries) != 1 {
		t.Fatalf("%d grant_revoked entries, want 1: %+v", len(entries), entries)
	}
	wantRevocation(t, entries[0], g, countersign.RevokedKeyRevoked, at)
}

// StaleGrants are three grants of one account, each with its consent's
// session and its tokens, for a test of the migration that ends the grants
// an older version left live: the backend's test revokes Key's key and
// takes LeftApprover out of the account behind the store's back, as that
// version did, then migrates again.
type StaleGrants struct {
	Key, Left, Live *countersign.Grant
	LeftApprover    string
	sessions        map[string]*countersign.Session
}

// NewStaleGrants stores the grants in s.
func NewStaleGrants(t *testing.T, s countersign.Store) *StaleGrants {
	t.Helper()
	acc := mustAccount(t, s, "acme")
	alice, bob := approverIn(t, s, "alice", acc), approverIn(t, s, "bob", acc)
	g := &StaleGrants{LeftApprover: bob.ID, sessions: map[string]*countersign.Session{}}
	var sess *countersign.Session
	g.Key, sess = liveGrant(t, s, acc, alice, "key")
	g.sessions["key"] = sess
	g.Left, sess = liveGrant(t, s, acc, bob, "left")
	g.sessions["left"] = sess
	g.Live, sess = liveGrant(t, s, acc, alice, "live")
	g.sessions["live"] = sess
	return g
}

// Check checks s after the migration: the grant whose key was revoked at
// keyRevokedAt is revoked then, the grant of the approver who left is
// revoked at or after leftBy, each with its key, tokens and consent's
// session; the live grant is untouched.
func (g *StaleGrants) Check(t *testing.T, s countersign.Store, keyRevokedAt, leftBy time.Time) {
	t.Helper()
	wantGrantEnded(t, s, "migrated", g.Key, g.sessions["key"], "key", keyRevokedAt)
	got, err := s.Grant(t.Context(), g.Left.ID)
	if err != nil || got.RevokedAt.Before(leftBy) {
		t.Errorf("the grant of an approver who left = %+v, %v; want revoked at or after %v", got, err, leftBy)
	}
	if got != nil {
		wantGrantEnded(t, s, "migrated", g.Left, g.sessions["left"], "left", got.RevokedAt)
	}
	wantGrantLive(t, s, "migrated", g.Live, "live")
	if _, _, err := s.SessionByHash(t.Context(), g.sessions["live"].Hash, Base); err != nil {
		t.Errorf("the live grant's consent session after the migration: %v", err)
	}
}
