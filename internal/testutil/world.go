package testutil

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// Start is where the clock of every World begins.
var Start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Password is the password of every approver a World makes.
const Password = "correct horse battery staple"

// PasswordHash is an argon2id hash of Password in the format of
// identity.HashPassword but with tiny parameters. CheckPassword reads the
// parameters from the hash, so signing in stays the real code path while
// costing microseconds instead of seconds under the race detector.
func PasswordHash() string {
	salt := []byte("countersign-salt")
	key := argon2.IDKey([]byte(Password), salt, 1, 64, 1, 32)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=64,t=1,p=1$%s$%s", argon2.Version, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// World is the setting most tests start from, made the one way the server
// makes it: a real SQLite store in t.TempDir(), the approval service's
// Admin on a clock at Start (NewWorldAt: another time), and two accounts.
// acme has the agent key a and the approver alice; other has the key x and
// the approver bob. A package adds the keys, approvers and tokens its
// tests need with Key, Approver and Token, and builds its service and
// server on Store and Clock (or, on another backend, Admin.Store).
type World struct {
	t     testing.TB
	Ctx   context.Context
	Store *sqlite.DB // nil in a World on another store (NewWorldOn)
	Path  string     // the store's file, for a test that opens it again
	Clock *Clock
	Admin *identity.Admin
	Auth  *identity.Authenticator

	Acme, Other *countersign.Account
	Alice, Bob  *countersign.Approver
	KeyA, KeyX  string // the secrets of the agent keys a (acme) and x (other)
}

// migrated is the file of an empty store with every migration applied,
// made once per test binary: each World's store starts as a copy of it
// rather than applying the migrations again, which cost most of the
// processor time of opening a store.
var migrated = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "countersign-world-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "countersign.db")
	store, err := sqlite.Open(context.Background(), path)
	if err != nil {
		return nil, err
	}
	if err := store.Close(); err != nil {
		return nil, err
	}
	// Closed, the store holds everything in its one file.
	if _, err := os.Stat(path + "-wal"); err == nil {
		return nil, fmt.Errorf("the closed store left %s-wal", path)
	}
	return os.ReadFile(path)
})

// NewWorld makes a World; the store closes when the test ends.
func NewWorld(t testing.TB) *World {
	t.Helper()
	return NewWorldAt(t, Start)
}

// NewWorldAt makes a World whose clock begins at start: near time.Now for
// a test whose server keeps some times on the real clock (its sign-in
// sessions, say) and compares them with the World's.
func NewWorldAt(t testing.TB, start time.Time) *World {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "countersign.db")
	empty, err := migrated()
	if err != nil {
		t.Fatalf("make the migrated store: %v", err)
	}
	if err := os.WriteFile(path, empty, 0o600); err != nil {
		t.Fatalf("copy the migrated store: %v", err)
	}
	store, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	w := NewWorldOn(t, store, start)
	w.Store, w.Path = store, path
	return w
}

// NewWorldOn makes a World on a store the test opened and closes, of any
// backend, migrated and empty; its clock begins at start. Store and Path
// stay empty: Admin.Store is the store.
func NewWorldOn(t testing.TB, store countersign.Store, start time.Time) *World {
	t.Helper()
	clock := NewClock(start)
	w := &World{t: t, Ctx: t.Context(), Clock: clock,
		Admin: &identity.Admin{Store: store, Clock: clock}, Auth: &identity.Authenticator{Store: store}}
	w.Acme, w.Other = w.Account("acme"), w.Account("other")
	w.KeyA, w.KeyX = w.Key("acme", "a"), w.Key("other", "x")
	w.Alice, w.Bob = w.Approver("alice", "acme"), w.Approver("bob", "other")
	return w
}

// Account creates an account.
func (w *World) Account(name string) *countersign.Account {
	w.t.Helper()
	a, err := w.Admin.CreateAccount(w.Ctx, name)
	if err != nil {
		w.t.Fatalf("create account %s: %v", name, err)
	}
	return a
}

// Key creates an agent key of the account and returns its secret.
func (w *World) Key(account, name string) string {
	w.t.Helper()
	_, secret, err := w.Admin.CreateAgentKey(w.Ctx, account, name)
	if err != nil {
		w.t.Fatalf("create key %s of %s: %v", name, account, err)
	}
	return secret
}

// Approver stores an approver with the password Password (its cheap hash)
// and makes it a member of the accounts through Admin.
func (w *World) Approver(username string, accounts ...string) *countersign.Approver {
	w.t.Helper()
	ap := &countersign.Approver{ID: countersign.NewID("apr_"), Username: username, PasswordHash: PasswordHash(), CreatedAt: w.Clock.Now()}
	if err := w.Admin.Store.CreateApprover(w.Ctx, ap); err != nil {
		w.t.Fatalf("create approver %s: %v", username, err)
	}
	for _, acc := range accounts {
		if _, err := w.Admin.CreateApprover(w.Ctx, acc, username, "", countersign.RoleAdmin); err != nil {
			w.t.Fatalf("add approver %s to %s: %v", username, acc, err)
		}
	}
	return ap
}

// Token creates an API token of the approver in the account and returns
// its secret.
func (w *World) Token(username, account string) string {
	w.t.Helper()
	_, secret, err := w.Admin.CreateApproverToken(w.Ctx, username, account, "test")
	if err != nil {
		w.t.Fatalf("create token of %s in %s: %v", username, account, err)
	}
	return secret
}
