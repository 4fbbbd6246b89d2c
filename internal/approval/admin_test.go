package approval_test

import (
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
)

func TestAuthenticator(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	_, key, err := e.admin.CreateAgentKey(e.ctx, "acme", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	_, revoked, err := e.admin.CreateAgentKey(e.ctx, "acme", "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.store.RevokeAgentKey(e.ctx, e.acme.ID, "old", e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	_, token, err := e.admin.CreateApproverToken(e.ctx, "alice", "", "")
	if err != nil {
		t.Fatal(err)
	}

	if a, err := e.auth.Agent(e.ctx, key); err != nil || a.AccountID != e.acme.ID || a.KeyName != "laptop" {
		t.Errorf("Agent(valid key) = %+v, %v", a, err)
	}
	if p, err := e.auth.Approver(e.ctx, token); err != nil || p.AccountID != e.acme.ID || p.Username != "alice" {
		t.Errorf("Approver(valid token) = %+v, %v", p, err)
	}
	tests := []struct {
		name     string
		approver bool
		secret   string
		code     string
	}{
		{"approver token as agent", false, token, countersign.EFORBIDDEN},
		{"unknown key", false, countersign.NewSecret(countersign.AgentKeyPrefix), countersign.EUNAUTHORIZED},
		{"revoked key", false, revoked, countersign.EUNAUTHORIZED},
		{"garbage as agent", false, "hunter2", countersign.EUNAUTHORIZED},
		{"empty as agent", false, "", countersign.EUNAUTHORIZED},
		{"agent key as approver", true, key, countersign.EFORBIDDEN},
		{"unknown token", true, countersign.NewSecret(countersign.ApproverTokenPrefix), countersign.EUNAUTHORIZED},
		{"garbage as approver", true, "hunter2", countersign.EUNAUTHORIZED},
	}
	for _, tt := range tests {
		var err error
		if tt.approver {
			_, err = e.auth.Approver(e.ctx, tt.secret)
		} else {
			_, err = e.auth.Agent(e.ctx, tt.secret)
		}
		wantCode(t, tt.name, err, tt.code)
	}
}

func TestAdminValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	_, err := e.admin.CreateAccount(e.ctx, "Bad Name")
	wantCode(t, "account name with a space", err, countersign.EINVALID)
	_, err = e.admin.CreateAccount(e.ctx, "acme")
	wantCode(t, "duplicate account", err, countersign.ECONFLICT)
	_, _, err = e.admin.CreateAgentKey(e.ctx, "nope", "k")
	wantCode(t, "key of an unknown account", err, countersign.ENOTFOUND)
	_, err = e.admin.CreateApprover(e.ctx, "acme", "carol", "short")
	wantCode(t, "short password", err, countersign.EINVALID)
	_, err = e.admin.CreateApprover(e.ctx, "acme", "alice", "another long password")
	wantCode(t, "existing approver with a password", err, countersign.ECONFLICT)
	// The test approvers' password hash is a real argon2id hash.
	if !approval.CheckPassword(testutil.PasswordHash(), testutil.Password) || approval.CheckPassword(testutil.PasswordHash(), "another password") {
		t.Error("CheckPassword does not accept exactly the test password")
	}
	// alice belongs to acme only: a token for other is refused.
	_, _, err = e.admin.CreateApproverToken(e.ctx, "alice", "other", "")
	wantCode(t, "token for an account alice is not in", err, countersign.EINVALID)
}
