package approval_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// start is where every test's clock begins.
var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// passwordHash is an argon2id hash in the format of approval.HashPassword
// but with tiny parameters: the real ones take more than a second under the
// race detector, and no test here is about passwords.
func passwordHash() string {
	salt := []byte("countersign-test")
	key := argon2.IDKey([]byte("a long test password"), salt, 1, 64, 1, 32)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=64,t=1,p=1$%s$%s", argon2.Version, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// env is a service on a real SQLite store with two accounts: acme with the
// agent keys A and B and the approver alice, other with the key X and the
// approver bob.
type env struct {
	t      *testing.T
	ctx    context.Context
	store  *sqlite.DB
	clock  *testutil.Clock
	hub    *approval.Hub
	svc    *approval.Service
	admin  *approval.Admin
	auth   *approval.Authenticator
	acme   *countersign.Account
	other  *countersign.Account
	keyA   countersign.Agent
	keyB   countersign.Agent
	keyX   countersign.Agent
	alice  countersign.ApproverPrincipal
	bob    countersign.ApproverPrincipal
	nextID int
}

func newEnv(t *testing.T, cfg approval.Config) *env {
	t.Helper()
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	clock := testutil.NewClock(start)
	hub := approval.NewHub()
	e := &env{
		t: t, ctx: ctx, store: store, clock: clock, hub: hub,
		svc:   approval.New(store, clock, hub, cfg, nil, nil),
		admin: &approval.Admin{Store: store, Clock: clock},
		auth:  &approval.Authenticator{Store: store},
	}
	e.acme = e.account("acme")
	e.other = e.account("other")
	e.keyA = e.agent("acme", "a")
	e.keyB = e.agent("acme", "b")
	e.keyX = e.agent("other", "x")
	e.alice = e.approver("acme", "alice")
	e.bob = e.approver("other", "bob")
	return e
}

func (e *env) account(name string) *countersign.Account {
	e.t.Helper()
	a, err := e.admin.CreateAccount(e.ctx, name)
	if err != nil {
		e.t.Fatalf("create account %s: %v", name, err)
	}
	return a
}

// agent creates an agent key and returns the principal its secret proves.
func (e *env) agent(account, name string) countersign.Agent {
	e.t.Helper()
	_, secret, err := e.admin.CreateAgentKey(e.ctx, account, name)
	if err != nil {
		e.t.Fatalf("create key %s: %v", name, err)
	}
	a, err := e.auth.Agent(e.ctx, secret)
	if err != nil {
		e.t.Fatalf("authenticate key %s: %v", name, err)
	}
	return a
}

// approver creates an approver of the account with an API token and returns
// the principal the token proves. The approver row gets the precomputed
// password hash; membership and token go through Admin.
func (e *env) approver(account, username string) countersign.ApproverPrincipal {
	e.t.Helper()
	ap := &countersign.Approver{ID: countersign.NewID("apr_"), Username: username, PasswordHash: passwordHash(), CreatedAt: e.clock.Now()}
	if err := e.store.CreateApprover(e.ctx, ap); err != nil {
		e.t.Fatalf("create approver %s: %v", username, err)
	}
	if _, err := e.admin.CreateApprover(e.ctx, account, username, ""); err != nil {
		e.t.Fatalf("add approver %s to %s: %v", username, account, err)
	}
	_, secret, err := e.admin.CreateApproverToken(e.ctx, username, account, "test")
	if err != nil {
		e.t.Fatalf("create token of %s: %v", username, err)
	}
	p, err := e.auth.Approver(e.ctx, secret)
	if err != nil {
		e.t.Fatalf("authenticate token of %s: %v", username, err)
	}
	return p
}

// toolCall is a request of kind tool with distinct arguments on each call,
// so that no two of them are identical.
func (e *env) toolCall(action, session string) countersign.CreateInput {
	e.nextID++
	args, _ := json.Marshal(map[string]int{"n": e.nextID})
	return countersign.CreateInput{Kind: countersign.KindTool, Action: action, Arguments: args, Context: countersign.RequestContext{SessionID: session}}
}

// create asks and fails the test unless a new request was created.
func (e *env) create(agent countersign.Agent, in countersign.CreateInput) *countersign.Request {
	e.t.Helper()
	r, created, err := e.svc.Create(e.ctx, agent, in)
	if err != nil || !created {
		e.t.Fatalf("Create(%s %s): created=%v err=%v", in.Kind, in.Action, created, err)
	}
	return r
}

// pending creates a new tool request of key A.
func (e *env) pending() *countersign.Request {
	e.t.Helper()
	return e.create(e.keyA, e.toolCall("Bash", ""))
}

func (e *env) decide(id string, d countersign.Decision) *countersign.Request {
	e.t.Helper()
	r, err := e.svc.Decide(e.ctx, e.alice, id, countersign.DecisionInput{Decision: d})
	if err != nil {
		e.t.Fatalf("Decide(%s, %s): %v", id, d, err)
	}
	return r
}

// stored reads a request straight from the store, past every rule.
func (e *env) stored(id string) *countersign.Request {
	e.t.Helper()
	r, err := e.store.Request(e.ctx, id)
	if err != nil {
		e.t.Fatalf("store.Request(%s): %v", id, err)
	}
	return r
}

func (e *env) wantStatus(id string, want countersign.Status) {
	e.t.Helper()
	if got := e.stored(id).Status; got != want {
		e.t.Errorf("stored status of %s = %s, want %s", id, got, want)
	}
}

// events returns the audit events of one request, in order.
func (e *env) events(id string) []string {
	e.t.Helper()
	entries, err := e.store.AuditLog(e.ctx, 0, 100000)
	if err != nil {
		e.t.Fatalf("AuditLog: %v", err)
	}
	var out []string
	for _, en := range entries {
		if en.RequestID == id {
			out = append(out, en.Event)
		}
	}
	return out
}

// auditCount is the length of the whole audit log: a refused call must not
// change it.
func (e *env) auditCount() int {
	e.t.Helper()
	entries, err := e.store.AuditLog(e.ctx, 0, 100000)
	if err != nil {
		e.t.Fatalf("AuditLog: %v", err)
	}
	return len(entries)
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := countersign.ErrorCode(err); got != code {
		t.Errorf("%s: error code %q (%v), want %q", what, got, err, code)
	}
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// rang reports whether ch was closed within a generous bound: the bound
// guards against a hang, it does not measure speed.
func rang(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

// waitForWaiters blocks until the hub has n waiters, so that a test acts
// only once a Wait is really holding.
func waitForWaiters(t *testing.T, hub *approval.Hub, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for hub.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatalf("hub has %d waiters, want %d", hub.Waiters(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func asError(err error) *countersign.Error {
	var e *countersign.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
