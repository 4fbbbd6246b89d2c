package identity_test

import (
	"context"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// env is a real SQLite store with two accounts: acme with the approver
// alice, other with the approver bob, and the administration and
// authentication on it.
type env struct {
	t      *testing.T
	ctx    context.Context
	store  *sqlite.DB
	clock  *testutil.Clock
	admin  *identity.Admin
	auth   *identity.Authenticator
	acme   *countersign.Account
	alice  countersign.ApproverPrincipal
	bob    countersign.ApproverPrincipal
	nextID int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	w := testutil.NewWorld(t)
	e := &env{t: t, ctx: w.Ctx, store: w.Store, clock: w.Clock, admin: w.Admin, auth: w.Auth, acme: w.Acme}
	e.alice = e.approver(w.Token("alice", "acme"))
	e.bob = e.approver(w.Token("bob", "other"))
	return e
}

// approver is the principal an approver's API token proves.
func (e *env) approver(token string) countersign.ApproverPrincipal {
	e.t.Helper()
	p, err := e.auth.Approver(e.ctx, token)
	if err != nil {
		e.t.Fatalf("authenticate approver token: %v", err)
	}
	return p
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := countersign.ErrorCode(err); got != code {
		t.Errorf("%s: error code %q (%v), want %q", what, got, err, code)
	}
}
