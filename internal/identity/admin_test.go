package identity_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/testutil"
)

func TestAdminValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.admin.CreateAccount(e.ctx, "Bad Name")
	wantCode(t, "account name with a space", err, countersign.EINVALID)
	_, err = e.admin.CreateAccount(e.ctx, "acme")
	wantCode(t, "duplicate account", err, countersign.ECONFLICT)
	_, _, err = e.admin.CreateAgentKey(e.ctx, "nope", "k")
	wantCode(t, "key of an unknown account", err, countersign.ENOTFOUND)
	_, err = e.admin.CreateApprover(e.ctx, "acme", "carol", "short", countersign.RoleAdmin)
	wantCode(t, "short password", err, countersign.EINVALID)
	_, err = e.admin.CreateApprover(e.ctx, "acme", "alice", "another long password", countersign.RoleAdmin)
	wantCode(t, "existing approver with a password", err, countersign.ECONFLICT)
	// The test approvers' password hash is a real argon2id hash.
	if !identity.CheckPassword(testutil.PasswordHash(), testutil.Password) || identity.CheckPassword(testutil.PasswordHash(), "another password") {
		t.Error("CheckPassword does not accept exactly the test password")
	}
	// alice belongs to acme only: a token for other is refused.
	_, _, err = e.admin.CreateApproverToken(e.ctx, "alice", "other", "")
	wantCode(t, "token for an account alice is not in", err, countersign.EINVALID)
}

// hashOf is the stored password hash of an approver.
func (e *env) hashOf(username string) string {
	e.t.Helper()
	ap, err := e.store.ApproverByUsername(e.ctx, username)
	if err != nil {
		e.t.Fatal(err)
	}
	return ap.PasswordHash
}

func TestAdminSetPassword(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.hashOf("alice")
	_, _, err := e.admin.SetPassword(e.ctx, "nobody", "a long enough password", false)
	wantCode(t, "unknown approver", err, countersign.ENOTFOUND)
	_, _, err = e.admin.SetPassword(e.ctx, "alice", "short", false)
	wantCode(t, "short password", err, countersign.EINVALID)
	_, _, err = e.admin.SetPassword(e.ctx, "alice", strings.Repeat("x", 1025), false)
	wantCode(t, "password over 1024 bytes", err, countersign.EINVALID)
	if got := e.hashOf("alice"); got != before {
		t.Fatal("a refused password changed the stored hash")
	}
	ap, _, err := e.admin.SetPassword(e.ctx, "alice", "a new long password", false)
	if err != nil || ap.Username != "alice" {
		t.Fatalf("SetPassword = %+v, %v", ap, err)
	}
	if h := e.hashOf("alice"); !identity.CheckPassword(h, "a new long password") || identity.CheckPassword(h, "a long test password") {
		t.Error("the stored hash does not check exactly the new password")
	}
	if e.hashOf("bob") != before {
		t.Error("another approver's password changed")
	}
}

func TestAdminDisablePassword(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, _, err := e.admin.DisablePassword(e.ctx, "alice", false)
	wantCode(t, "approver without a passkey", err, countersign.ECONFLICT)
	if e.hashOf("alice") == "" {
		t.Fatal("a refused disable turned the password off")
	}
	_, _, err = e.admin.DisablePassword(e.ctx, "nobody", false)
	wantCode(t, "unknown approver", err, countersign.ENOTFOUND)
	e.passkey(e.alice.ApproverID, "laptop")
	n, _, err := e.admin.DisablePassword(e.ctx, "alice", false)
	if err != nil || n != 1 {
		t.Fatalf("DisablePassword = %d, %v; want 1 passkey", n, err)
	}
	if e.hashOf("alice") != "" || e.hashOf("bob") == "" {
		t.Error("the password of alice, and only hers, should be off")
	}
}

// passkey stores a passkey of the approver.
func (e *env) passkey(approverID, name string) *countersign.Passkey {
	e.t.Helper()
	e.nextID++
	pk := &countersign.Passkey{
		ID: countersign.NewID("pk_"), ApproverID: approverID, CredentialID: []byte(fmt.Sprintf("cred-%d", e.nextID)),
		PublicKey: []byte("key"), Name: name, CreatedAt: e.clock.Now(),
	}
	if err := e.store.CreatePasskey(e.ctx, pk); err != nil {
		e.t.Fatal(err)
	}
	return pk
}

func TestAdminRevokeAndRemove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, key, err := e.admin.CreateAgentKey(e.ctx, "acme", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := e.admin.CreateApproverToken(e.ctx, "alice", "", "phone")
	if err != nil {
		t.Fatal(err)
	}
	pk := e.passkey(e.alice.ApproverID, "yubikey")

	// Nothing crosses accounts or approvers: each of these names a thing
	// that exists, but not where it is asked for.
	_, err = e.admin.RevokeAgentKey(e.ctx, "other", "laptop")
	wantCode(t, "key of another account", err, countersign.ENOTFOUND)
	_, err = e.admin.RevokeAgentKey(e.ctx, "nope", "laptop")
	wantCode(t, "key of an unknown account", err, countersign.ENOTFOUND)
	wantCode(t, "token of another approver", e.admin.RevokeApproverToken(e.ctx, "bob", "phone"), countersign.ENOTFOUND)
	wantCode(t, "passkey of another approver", e.admin.RemovePasskey(e.ctx, "bob", pk.ID), countersign.ENOTFOUND)
	wantCode(t, "unknown grant", e.admin.RevokeGrant(e.ctx, "acme", "grt_nope"), countersign.ENOTFOUND)
	wantCode(t, "over-long grant id", e.admin.RevokeGrant(e.ctx, "acme", strings.Repeat("g", 101)), countersign.ENOTFOUND)
	wantCode(t, "grant of an unknown account", e.admin.RevokeGrant(e.ctx, "nope", "grt_nope"), countersign.ENOTFOUND)
	_, err = e.admin.RemoveMembership(e.ctx, "alice", "other")
	wantCode(t, "membership alice lacks", err, countersign.ENOTFOUND)
	_, err = e.admin.RemoveApprover(e.ctx, "nobody")
	wantCode(t, "unknown approver", err, countersign.ENOTFOUND)
	if _, err := e.auth.Agent(e.ctx, key); err != nil {
		t.Fatalf("a refused revocation revoked the key: %v", err)
	}
	if _, err := e.auth.Approver(e.ctx, token); err != nil {
		t.Fatalf("a refused revocation revoked the token: %v", err)
	}

	if g, err := e.admin.RevokeAgentKey(e.ctx, "acme", "laptop"); err != nil || g != nil {
		t.Fatal(err)
	}
	_, err = e.auth.Agent(e.ctx, key)
	wantCode(t, "revoked key", err, countersign.EUNAUTHORIZED)
	if err := e.admin.RevokeApproverToken(e.ctx, "alice", "phone"); err != nil {
		t.Fatal(err)
	}
	_, err = e.auth.Approver(e.ctx, token)
	wantCode(t, "revoked token", err, countersign.EUNAUTHORIZED)
	// The CLI may remove a passkey-only approver's last passkey: it is
	// the way back for one who lost them all.
	if _, err := e.store.SetPassword(e.ctx, e.alice.ApproverID, "", false, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.admin.RemovePasskey(e.ctx, "alice", pk.ID); err != nil {
		t.Fatal(err)
	}
	if list, err := e.store.Passkeys(e.ctx, e.alice.ApproverID); err != nil || len(list) != 0 {
		t.Errorf("passkeys after removal = %d, %v", len(list), err)
	}

	if _, err := e.admin.RemoveMembership(e.ctx, "bob", "other"); err != nil {
		t.Fatal(err)
	}
	if accounts, err := e.store.Memberships(e.ctx, e.bob.ApproverID); err != nil || len(accounts) != 0 {
		t.Errorf("bob's memberships after removal = %v, %v", accounts, err)
	}
	if _, err := e.admin.RemoveApprover(e.ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	_, err = e.store.ApproverByUsername(e.ctx, "alice")
	wantCode(t, "removed approver", err, countersign.ENOTFOUND)
}
