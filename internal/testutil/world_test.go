package testutil_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// TestWorld: the world is what its doc comment says: each key proves its
// own account, each approver's token its own account, and the password
// signs in through the real check.
func TestWorld(t *testing.T) {
	w := testutil.NewWorld(t)
	for _, k := range []struct {
		secret, account, name string
	}{{w.KeyA, w.Acme.ID, "a"}, {w.KeyX, w.Other.ID, "x"}} {
		a, err := w.Auth.Agent(w.Ctx, k.secret)
		if err != nil || a.AccountID != k.account || a.KeyName != k.name {
			t.Errorf("key %s: %+v, %v; want account %s", k.name, a, err, k.account)
		}
	}
	for _, ap := range []struct {
		username, account, id string
	}{{"alice", "acme", w.Acme.ID}, {"bob", "other", w.Other.ID}} {
		p, err := w.Auth.Approver(w.Ctx, w.Token(ap.username, ap.account))
		if err != nil || p.Username != ap.username || p.AccountID != ap.id {
			t.Errorf("token of %s: %+v, %v; want account %s", ap.username, p, err, ap.id)
		}
	}
	if _, _, err := w.Admin.CreateApproverToken(w.Ctx, "alice", "other", ""); err == nil {
		t.Error("alice got a token of other, which she is not a member of")
	}
	if !identity.CheckPassword(w.Alice.PasswordHash, testutil.Password) || identity.CheckPassword(w.Alice.PasswordHash, "wrong") {
		t.Error("the approvers' hash does not check Password, and only it")
	}
	if got := w.Clock.Now(); !got.Equal(testutil.Start) {
		t.Errorf("the clock reads %v, want %v", got, testutil.Start)
	}
}

// TestWorldAt: NewWorldAt's clock reads the time it is given, and Path is
// the file of the store, so that opening it again finds the accounts.
func TestWorldAt(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	w := testutil.NewWorldAt(t, at)
	if got := w.Clock.Now(); !got.Equal(at) || !w.Acme.CreatedAt.Equal(at) {
		t.Errorf("the clock reads %v and acme was made at %v, want %v", got, w.Acme.CreatedAt, at)
	}
	if err := w.Store.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlite.Open(t.Context(), w.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if acc, err := again.AccountByName(t.Context(), "other"); err != nil || acc.ID != w.Other.ID {
		t.Errorf("the store at Path has other as %+v, %v; want %s", acc, err, w.Other.ID)
	}
}
