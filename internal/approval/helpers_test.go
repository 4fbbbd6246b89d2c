package approval_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// start is where every test's clock begins.
var start = testutil.Start

// env is a service on a real SQLite store with two accounts: acme with the
// agent keys A and B and the approver alice, other with the key X and the
// approver bob.
type env struct {
	t      *testing.T
	world  *testutil.World
	ctx    context.Context
	store  *sqlite.DB
	clock  *testutil.Clock
	hub    *approval.Hub
	svc    *approval.Service
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
	w := testutil.NewWorld(t)
	hub := approval.NewHub()
	e := &env{
		t: t, world: w, ctx: w.Ctx, store: w.Store, clock: w.Clock, hub: hub,
		svc:   approval.New(w.Store, w.Clock, hub, cfg, nil, nil),
		acme:  w.Acme,
		other: w.Other,
	}
	e.keyA = e.principal(w.KeyA)
	e.keyB = e.agent("acme", "b")
	e.keyX = e.principal(w.KeyX)
	e.alice = e.approver(w.Token("alice", "acme"))
	e.bob = e.approver(w.Token("bob", "other"))
	return e
}

// agent creates an agent key and returns the principal its secret proves.
func (e *env) agent(account, name string) countersign.Agent {
	e.t.Helper()
	_, secret, err := e.world.Admin.CreateAgentKey(e.ctx, account, name)
	if err != nil {
		e.t.Fatalf("create key %s: %v", name, err)
	}
	return e.principal(secret)
}

// principal is the agent an agent key's secret proves.
func (e *env) principal(secret string) countersign.Agent {
	e.t.Helper()
	a, err := e.world.Auth.Agent(e.ctx, secret)
	if err != nil {
		e.t.Fatalf("authenticate agent key: %v", err)
	}
	return a
}

// newApprover makes an approver of the account and returns the principal
// its API token proves.
func (e *env) newApprover(username, account string) countersign.ApproverPrincipal {
	e.t.Helper()
	e.world.Approver(username, account)
	return e.approver(e.world.Token(username, account))
}

// approver is the principal an approver's API token proves.
func (e *env) approver(token string) countersign.ApproverPrincipal {
	e.t.Helper()
	p, err := e.world.Auth.Approver(e.ctx, token)
	if err != nil {
		e.t.Fatalf("authenticate approver token: %v", err)
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

// waitForWaiters blocks until the hub has n waiters, so that a test acts
// only once a Wait is really holding.
func waitForWaiters(t *testing.T, hub *approval.Hub, n int64) {
	t.Helper()
	if !testutil.Wait(func() bool { return hub.Waiters() >= n }, testutil.EventuallyWithin) {
		t.Fatalf("hub has %d waiters, want %d", hub.Waiters(), n)
	}
}

func asError(err error) *countersign.Error {
	var e *countersign.Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
