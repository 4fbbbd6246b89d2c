// Package storetest is the conformance suite of countersign.Store: every
// backend runs the same tests against a real database of its kind.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) countersign.Store { … })
//	}
//
// open must return a new, empty store for each call and close it when the
// test ends. Time never comes from the clock: every call gets an explicit
// time derived from Base, so nothing sleeps.
package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// Base is the time every test starts from.
var Base = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Opener returns a new, empty store that is closed when t ends.
type Opener func(t *testing.T) countersign.Store

// Run runs the conformance suite against the stores open returns.
func Run(t *testing.T, open func(t *testing.T) countersign.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"Accounts", testAccounts},
		{"AgentKeys", testAgentKeys},
		{"Approvers", testApprovers},
		{"Roles", testRoles},
		{"LastAdmin", testLastAdmin},
		{"LastAdminRace", testLastAdminRace},
		{"GrantNeedsAdmin", testGrantNeedsAdmin},
		{"ApproverTokens", testApproverTokens},
		{"RequestRoundTrip", testRequestRoundTrip},
		{"Dedupe", testDedupe},
		{"Twin", testTwin},
		{"PendingLimit", testPendingLimit},
		{"ReferenceConflict", testReferenceConflict},
		{"Requests", testRequests},
		{"Transition", testTransition},
		{"TransitionExpired", testTransitionExpired},
		{"TransitionScope", testTransitionScope},
		{"TransitionRefusals", testTransitionRefusals},
		{"PendingLimitRefusal", testPendingLimitRefusal},
		{"RefusalWords", testRefusalWords},
		{"Consume", testConsume},
		{"DecideRace", testDecideRace},
		{"EditApprove", testEditApprove},
		{"EditRace", testEditRace},
		{"EditVotes", testEditVotes},
		{"Votes", testVotes},
		{"VoteSeparate", testVoteSeparate},
		{"VoteCounted", testVoteCounted},
		{"VoteSinceStop", testVoteSinceStop},
		{"VoteMembersRace", testVoteMembersRace},
		{"VoteIdempotency", testVoteIdempotency},
		{"VoteRace", testVoteRace},
		{"VoteDenyRace", testVoteDenyRace},
		{"ConsumeRace", testConsumeRace},
		{"ConsumeApproved", testConsumeApproved},
		{"ConsumeApprovedOrder", testConsumeApprovedOrder},
		{"ConsumeApprovedRace", testConsumeApprovedRace},
		{"ConsumeApprovedEdited", testConsumeApprovedEdited},
		{"ConsumeApprovedEditedRace", testConsumeApprovedEditedRace},
		{"ExpireRequests", testExpireRequests},
		{"Windows", testWindows},
		{"StopEndsApprovals", testStopEndsApprovals},
		{"StopRace", testStopRace},
		{"StopInFlight", testStopInFlight},
		{"Coverage", testCoverage},
		{"Ran", testRan},
		{"AuditChain", testAuditChain},
		{"AppendAudit", testAppendAudit},
		{"Sessions", testSessions},
		{"Membership", testMembershipRemoval},
		{"ServerKey", testServerKey},
		{"Passkeys", testPasskeys},
		{"LastPasskey", testLastPasskey},
		{"LastPasskeyRace", testLastPasskeyRace},
		{"ClearPassword", testClearPassword},
		{"Ceremonies", testCeremonies},
		{"OAuthClients", testOAuthClients},
		{"Grants", testGrants},
		{"GrantForGoneClient", testGrantForGoneClient},
		{"GrantEndsWithApprover", testGrantEndsWithApprover},
		{"KeyRevokeEndsGrant", testKeyRevokeEndsGrant},
		{"RedeemRace", testRedeemRace},
		{"TokenPruning", testTokenPruning},
		{"Seed", testSeed},
		{"SeedLists", testSeedLists},
		{"Channels", testChannels},
		{"OutboxWithRequest", testOutboxWithRequest},
		{"OutboxClaim", testOutboxClaim},
		{"OutboxEnqueue", testOutboxEnqueue},
		{"OutboxStatus", testOutboxStatus},
		{"OutboxClaimRace", testOutboxClaimRace},
		{"OutboxWatch", testOutboxWatch},
		{"StoreStats", testStoreStats},
		{"PruneRequests", testPruneRequests},
		{"PruneWhileDeciding", testPruneWhileDeciding},
		{"PruneKeepsIdempotent", testPruneKeepsIdempotent},
		{"Idempotency", testIdempotency},
		{"IdempotencyReuse", testIdempotencyReuse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each test opens stores of its own, so the tests may run at
			// once: a backend's tests wait mostly on its database.
			t.Parallel()
			tt.fn(t, Opener(open))
		})
	}
}

// fixture is a store with one account and two agent keys of it.
type fixture struct {
	s       countersign.Store
	account *countersign.Account
	key     *countersign.AgentKey
	key2    *countersign.AgentKey
}

func newFixture(t *testing.T, open Opener) *fixture {
	t.Helper()
	s := open(t)
	f := &fixture{s: s}
	f.account = mustAccount(t, s, "acme")
	f.key = mustKey(t, s, f.account, "laptop")
	f.key2 = mustKey(t, s, f.account, "ci")
	return f
}

func mustAccount(t *testing.T, s countersign.Store, name string) *countersign.Account {
	t.Helper()
	a := &countersign.Account{ID: countersign.NewID("acc_"), Name: name, CreatedAt: Base}
	if err := s.CreateAccount(t.Context(), a); err != nil {
		t.Fatalf("CreateAccount(%s): %v", name, err)
	}
	return a
}

func mustKey(t *testing.T, s countersign.Store, a *countersign.Account, name string) *countersign.AgentKey {
	t.Helper()
	secret := countersign.NewSecret(countersign.AgentKeyPrefix)
	k := &countersign.AgentKey{
		ID:        countersign.NewID("key_"),
		AccountID: a.ID,
		Name:      name,
		Hash:      countersign.HashSecret(secret),
		Hint:      countersign.SecretHint(secret),
		CreatedAt: Base,
	}
	if err := s.CreateAgentKey(t.Context(), k); err != nil {
		t.Fatalf("CreateAgentKey(%s): %v", name, err)
	}
	return k
}

// refCounter makes reference codes that never collide by chance.
var refCounter atomic.Int64

// nextRef returns a fresh reference code.
func nextRef() string {
	n := refCounter.Add(1)
	b := make([]byte, 6)
	for i := 5; i >= 0; i-- {
		b[i] = countersign.ReferenceAlphabet[n%int64(len(countersign.ReferenceAlphabet))]
		n /= int64(len(countersign.ReferenceAlphabet))
	}
	return string(b)
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// newRequest returns a pending tool request of key with the binding
// (action, args, preview), created at Base and expiring ten minutes later.
func newRequest(key *countersign.AgentKey, action, args, preview string) *countersign.Request {
	return &countersign.Request{
		ID:          countersign.NewID("req_"),
		AccountID:   key.AccountID,
		KeyID:       key.ID,
		KeyName:     key.Name,
		Reference:   nextRef(),
		Kind:        countersign.KindTool,
		Action:      action,
		Arguments:   json.RawMessage(args),
		ArgsHash:    sha(args),
		Preview:     preview,
		PreviewHash: sha(preview),
		RiskReasons: []string{"recursive delete"},
		Context:     countersign.RequestContext{User: "ada", Host: "box", Cwd: "/src", SessionID: "sess-1"},
		Status:      countersign.StatusPending,
		CreatedAt:   Base,
		ExpiresAt:   Base.Add(10 * time.Minute),
	}
}

// create stores r with no pending limit and fails the test on an error.
func create(t *testing.T, s countersign.Store, r *countersign.Request, now time.Time) *countersign.Request {
	t.Helper()
	got, created, err := s.CreateRequest(t.Context(), r, 0, now, createdEvent(r))
	if err != nil {
		t.Fatalf("CreateRequest: %v", err)
	}
	if !created {
		t.Fatalf("CreateRequest: created = false, want a new request")
	}
	return got
}

func createdEvent(r *countersign.Request) countersign.AuditEvent {
	return countersign.AuditEvent{Event: "created", Actor: "key:" + r.KeyID, Detail: `{"action":"` + r.Action + `"}`}
}

// wantCode fails the test unless err carries the code.
func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if got := countersign.ErrorCode(err); got != code {
		t.Errorf("%s: error %v (code %q), want code %q", what, err, got, code)
	}
}

// wantMessage fails the test unless err is an application error whose
// message contains part.
func wantMessage(t *testing.T, what string, err error, part string) {
	t.Helper()
	var e *countersign.Error
	if !errors.As(err, &e) || !strings.Contains(e.Message, part) {
		t.Errorf("%s: error %v, want a message containing %q", what, err, part)
	}
}

// same fails the test when got and want differ. Times compare with Equal
// and must be UTC; a nil and an empty slice are the same.
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if d := diff(reflect.ValueOf(got), reflect.ValueOf(want), ""); len(d) > 0 {
		t.Errorf("%s differs:\n  %s", what, strings.Join(d, "\n  "))
	}
}

var timeType = reflect.TypeOf(time.Time{})

func diff(g, w reflect.Value, path string) []string {
	if g.Type() == timeType {
		gt, wt := g.Interface().(time.Time), w.Interface().(time.Time)
		if !gt.Equal(wt) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, gt, wt)}
		}
		if !gt.IsZero() && gt.Location() != time.UTC {
			return []string{fmt.Sprintf("%s: got %v, want it in UTC", path, gt)}
		}
		return nil
	}
	switch g.Kind() {
	case reflect.Pointer:
		if g.IsNil() || w.IsNil() {
			if g.IsNil() != w.IsNil() {
				return []string{fmt.Sprintf("%s: got %v, want %v", path, g, w)}
			}
			return nil
		}
		return diff(g.Elem(), w.Elem(), path)
	case reflect.Struct:
		var out []string
		for i := range g.NumField() {
			out = append(out, diff(g.Field(i), w.Field(i), path+"."+g.Type().Field(i).Name)...)
		}
		return out
	case reflect.Slice:
		if g.Type().Elem().Kind() == reflect.Uint8 {
			if gs, ws := string(g.Bytes()), string(w.Bytes()); gs != ws {
				return []string{fmt.Sprintf("%s: got %q, want %q", path, gs, ws)}
			}
			return nil
		}
		if g.Len() != w.Len() {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, g, w)}
		}
		var out []string
		for i := range g.Len() {
			out = append(out, diff(g.Index(i), w.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	if !reflect.DeepEqual(g.Interface(), w.Interface()) {
		return []string{fmt.Sprintf("%s: got %v, want %v", path, g, w)}
	}
	return nil
}
