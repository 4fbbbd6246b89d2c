package approval_test

import (
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
)

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
