package identity_test

import (
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// TestPasskeyOnlyPassword: an approver without a password is refused as a
// wrong password is, with the same message, whatever is typed.
func TestPasskeyOnlyPassword(t *testing.T) {
	e := newEnv(t)
	if _, err := e.store.SetPassword(e.ctx, e.alice.ApproverID, "", false, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	s := &identity.Sessions{Store: e.store, Clock: e.clock}
	_, _, wrong := s.SignIn(e.ctx, "bob", "not the password", "c", "ua")
	for _, pw := range []string{"", "a long test password", "countersign-no-such-approver"} {
		_, _, err := s.SignIn(e.ctx, "alice", pw, "c", "ua")
		if countersign.ErrorCode(err) != countersign.EUNAUTHORIZED || countersign.ErrorMessage(err) != countersign.ErrorMessage(wrong) {
			t.Fatalf("SignIn of a passkey-only approver with %q: %v, want %v", pw, err, wrong)
		}
	}
}
