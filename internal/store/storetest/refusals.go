package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// wantError fails the test unless err is an application error with
// exactly the code and the message: every backend refuses with the same
// words, since users read them.
func wantError(t *testing.T, what string, err error, code, message string) {
	t.Helper()
	var e *countersign.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: error %v, want %s %q", what, err, code, message)
		return
	}
	if e.Code != code || e.Message != message {
		t.Errorf("%s: error %s %q, want %s %q", what, e.Code, e.Message, code, message)
	}
}

// testTransitionRefusals checks every refusal of Transition, word for
// word, and that none changes the request.
func testTransitionRefusals(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	other := mustAccount(t, s, "other")
	pending := create(t, s, newRequest(f.key, "Bash", `{"p":1}`, "p"), Base)
	approved := approve(t, s, create(t, s, newRequest(f.key, "Bash", `{"a":1}`, "a"), Base).ID, Base.Add(time.Second))
	denied := deny(t, s, create(t, s, newRequest(f.key, "Bash", `{"d":1}`, "d"), Base).ID, Base.Add(time.Second))
	short := newRequest(f.key, "Bash", `{"e":1}`, "e")
	short.ExpiresAt = Base.Add(time.Minute)
	short = create(t, s, short, Base)
	now := Base.Add(2 * time.Second)
	approve := []countersign.Status{countersign.StatusApproved}
	ev := countersign.AuditEvent{Event: "denied", Actor: "approver:alice", Detail: "{}"}

	tests := []struct {
		name          string
		t             countersign.Transition
		code, message string
	}{
		{"no source", countersign.Transition{ID: pending.ID, To: countersign.StatusDenied, Now: now},
			countersign.EINVALID, "a transition needs a known target and at least one source status"},
		{"unknown target", countersign.Transition{ID: pending.ID, From: fromPending, To: "maybe", Now: now},
			countersign.EINVALID, "a transition needs a known target and at least one source status"},
		{"window without approval", countersign.Transition{ID: pending.ID, From: fromPending, To: countersign.StatusDenied, Now: now,
			Window: &countersign.AutoApproveWindow{Until: now.Add(time.Hour)}},
			countersign.EINVALID, "only an approval opens an auto-approve window"},
		{"missing", countersign.Transition{ID: "req_missing", From: fromPending, To: countersign.StatusDenied, Now: now},
			countersign.ENOTFOUND, "request not found"},
		{"another key", countersign.Transition{ID: pending.ID, From: fromPending, To: countersign.StatusCancelled, Now: now, KeyID: f.key2.ID},
			countersign.ENOTFOUND, "request not found"},
		{"another account", countersign.Transition{ID: pending.ID, From: fromPending, To: countersign.StatusDenied, Now: now, AccountID: other.ID},
			countersign.ENOTFOUND, "request not found"},
		{"still pending", countersign.Transition{ID: pending.ID, From: approve, To: countersign.StatusConsumed, Now: now, KeyID: f.key.ID},
			countersign.ECONFLICT, "request is still pending"},
		{"already approved", countersign.Transition{ID: approved.ID, From: fromPending, To: countersign.StatusDenied, Now: now},
			countersign.ECONFLICT, "request is already approved"},
		{"already denied", countersign.Transition{ID: denied.ID, From: fromPending, To: countersign.StatusApproved, Now: now},
			countersign.ECONFLICT, "request is already denied"},
		{"expired, not yet marked", countersign.Transition{ID: short.ID, From: fromPending, To: countersign.StatusApproved, Now: short.ExpiresAt},
			countersign.ECONFLICT, "request has expired"},
	}
	seq, _, _ := s.AuditHead(ctx)
	for _, tt := range tests {
		_, err := s.Transition(ctx, tt.t, ev)
		wantError(t, tt.name, err, tt.code, tt.message)
	}
	if _, err := s.ExpireRequests(ctx, short.ID, short.ExpiresAt); err != nil {
		t.Fatalf("ExpireRequests: %v", err)
	}
	_, err := s.Transition(ctx, countersign.Transition{ID: short.ID, From: fromPending, To: countersign.StatusApproved, Now: Base}, ev)
	wantError(t, "expired, marked", err, countersign.ECONFLICT, "request has expired")

	for _, r := range []*countersign.Request{pending, approved, denied} {
		got, err := s.Request(ctx, r.ID)
		if err != nil {
			t.Fatalf("Request: %v", err)
		}
		same(t, "request "+r.ID+" after refusals", got, r)
	}
	if seq2, _, _ := s.AuditHead(ctx); seq2 != seq+1 { // the expiry only
		t.Errorf("refused transitions wrote the audit log: head %d, want %d", seq2, seq+1)
	}
}

// testPendingLimitRefusal checks the words of the pending limit and when
// it says to try again.
func testPendingLimitRefusal(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := newRequest(f.key, "Bash", `{"i":1}`, "1")
	r.ExpiresAt = Base.Add(90 * time.Second)
	create(t, s, r, Base)
	over := newRequest(f.key, "Bash", `{"i":2}`, "2")
	_, _, err := s.CreateRequest(ctx, over, 1, Base.Add(30*time.Second), createdEvent(over))
	wantError(t, "CreateRequest over the limit", err, countersign.ELIMIT,
		"this account already has 1 requests waiting for a decision; decide or cancel one, or wait for one to expire, then ask again")
	var e *countersign.Error
	if errors.As(err, &e) && e.RetryAfter != time.Minute {
		t.Errorf("RetryAfter = %v, want 1m0s", e.RetryAfter)
	}
}

// testRefusalWords checks, word for word, what the store answers to what
// it refuses outside transitions: the names that are taken, what is gone
// or revoked, the outbox claims, the OAuth tokens, the passkeys and their
// ceremonies.
func testRefusalWords(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	alice := approverIn(t, s, "alice", f.account)
	other := mustAccount(t, s, "other")
	E := countersign.ErrorCode

	// Names and ids that are taken.
	wantError(t, "CreateAccount with a taken name", s.CreateAccount(ctx, &countersign.Account{ID: countersign.NewID("acc_"), Name: "acme", CreatedAt: Base}),
		countersign.ECONFLICT, `account "acme" already exists`)
	wantError(t, "CreateApprover with a taken username", s.CreateApprover(ctx, &countersign.Approver{ID: countersign.NewID("apr_"), Username: "alice", PasswordHash: "h", CreatedAt: Base}),
		countersign.ECONFLICT, `approver "alice" already exists`)
	wantError(t, "CreateAgentKey with a taken name", s.CreateAgentKey(ctx, &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: f.account.ID,
		Name: "laptop", Hash: sha("k2"), Hint: "x", CreatedAt: Base}), countersign.ECONFLICT, `the account already has a key named "laptop"`)
	wantError(t, "CreateAgentKey in no account", s.CreateAgentKey(ctx, &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: "acc_missing",
		Name: "x", Hash: sha("k3"), Hint: "x", CreatedAt: Base}), countersign.ENOTFOUND, "account not found")
	wantError(t, "RevokeAgentKey of no key", s.RevokeAgentKey(ctx, f.account.ID, "nope", Base), countersign.ENOTFOUND, "agent key not found")
	wantError(t, "RevokeAgentKey of another account's key", s.RevokeAgentKey(ctx, other.ID, f.key.ID, Base), countersign.ENOTFOUND, "agent key not found")
	if err := s.RevokeAgentKey(ctx, f.account.ID, f.key2.ID, Base); err != nil {
		t.Fatalf("RevokeAgentKey: %v", err)
	}
	wantError(t, "RevokeAgentKey twice", s.RevokeAgentKey(ctx, f.account.ID, f.key2.ID, Base), countersign.ECONFLICT, "agent key is already revoked")
	hook := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	wantError(t, "CreateChannel with a taken name", s.CreateChannel(ctx, newChannel(f, "n8n", countersign.ChannelWebhook)),
		countersign.ECONFLICT, `the account already has a channel named "n8n"`)
	wantError(t, "CreateChannel of no known type", s.CreateChannel(ctx, newChannel(f, "odd", "pigeon")),
		countersign.EINVALID, `unknown channel type "pigeon"`)
	wantError(t, "RemoveChannel of no channel", s.RemoveChannel(ctx, f.account.ID, "nope"), countersign.ENOTFOUND, "channel not found")

	// Approver tokens.
	tok := &countersign.ApproverToken{ID: countersign.NewID("tok_"), ApproverID: alice.ID, AccountID: f.account.ID, Name: "phone",
		Hash: sha("tok"), Hint: "x", CreatedAt: Base}
	if err := s.CreateApproverToken(ctx, tok); err != nil {
		t.Fatalf("CreateApproverToken: %v", err)
	}
	again := *tok
	wantError(t, "CreateApproverToken twice", s.CreateApproverToken(ctx, &again), countersign.ECONFLICT, "approver token already exists")
	wantError(t, "RevokeApproverToken of no token", s.RevokeApproverToken(ctx, alice.ID, "nope", Base), countersign.ENOTFOUND, "approver token not found")
	if err := s.RevokeApproverToken(ctx, alice.ID, tok.ID, Base); err != nil {
		t.Fatalf("RevokeApproverToken: %v", err)
	}
	wantError(t, "RevokeApproverToken twice", s.RevokeApproverToken(ctx, alice.ID, tok.ID, Base), countersign.ECONFLICT, "approver token is already revoked")
	_, _, err := s.ApproverTokenByHash(ctx, sha("unknown"))
	wantError(t, "ApproverTokenByHash(unknown)", err, countersign.ENOTFOUND, "approver token not found")

	// Sessions.
	sess := newSession(t, s, alice, f.account, Base)
	wantError(t, "SwitchSessionAccount to no account", s.SwitchSessionAccount(ctx, sess.Hash, "acc_missing"), countersign.ENOTFOUND, "no such account")
	wantError(t, "SwitchSessionAccount to another's account", s.SwitchSessionAccount(ctx, sess.Hash, other.ID),
		countersign.ENOTFOUND, "no such account")
	_, err = s.RemoveMembership(ctx, alice.ID, other.ID, Base)
	wantError(t, "RemoveMembership of no membership", err,
		countersign.ENOTFOUND, "the approver is not a member of that account")
	_, _, err = s.SessionByHash(ctx, sha("nope"), Base)
	wantError(t, "SessionByHash(unknown)", err, countersign.ENOTFOUND, "session not found")

	// Requests, windows and coverages.
	_, err = s.Requests(ctx, countersign.RequestFilter{})
	wantError(t, "Requests of no account", err, countersign.EINVALID, "an account is required to list requests")
	bad := newRequest(f.key, "Bash", `{}`, "x")
	bad.Status = "maybe"
	_, _, err = s.CreateRequest(ctx, bad, 0, Base, createdEvent(bad))
	wantError(t, "CreateRequest of no known status", err, countersign.EINVALID, `unknown status "maybe"`)
	r := create(t, s, newRequest(f.key, "Bash", `{"w":1}`, "w"), Base)
	dup := *r
	dup.Reference, dup.Arguments, dup.ArgsHash = nextRef(), []byte(`{"w":2}`), sha(`{"w":2}`)
	_, _, err = s.CreateRequest(ctx, &dup, 0, Base, createdEvent(&dup))
	wantError(t, "CreateRequest with a taken id", err, countersign.ECONFLICT, "request already exists")
	_, err = s.Transition(ctx, countersign.Transition{ID: r.ID, From: fromPending, To: countersign.StatusApproved, Now: Base, DecidedBy: "approver:alice",
		Window: &countersign.AutoApproveWindow{KeyID: f.key2.ID, Until: Base.Add(time.Hour)}}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
	wantError(t, "a window of another key", err, countersign.EINVALID, "an auto-approve window belongs to the request that opened it")
	_, err = s.ConsumeApproved(ctx, f.key.ID, countersign.KindTool, "Bash", sha("none"), sha("none"), "", true, Base, countersign.AuditEvent{Event: "consumed", Actor: "key:x", Detail: "{}"})
	wantError(t, "ConsumeApproved of nothing approved", err, countersign.ENOTFOUND, "no approved request matches")
	_, err = s.Request(ctx, "req_missing")
	wantError(t, "Request(missing)", err, countersign.ENOTFOUND, "request not found")
	a := approve(t, s, r.ID, Base.Add(time.Second))
	c := countersign.Coverage{ApprovalID: a.ID, RequestID: "req_one", CreatedAt: Base}
	if err := s.ClaimCoverage(ctx, c); err != nil {
		t.Fatalf("ClaimCoverage: %v", err)
	}
	wantError(t, "ClaimCoverage twice", s.ClaimCoverage(ctx, c), countersign.ECONFLICT, "this approval already covered a delete")
	wantError(t, "ClaimCoverage of no approval", s.ClaimCoverage(ctx, countersign.Coverage{ApprovalID: "req_missing", RequestID: "req_x", CreatedAt: Base}),
		countersign.ENOTFOUND, "request not found")

	// The outbox.
	_, err = s.ClaimDue(ctx, Base, 0, time.Minute)
	wantError(t, "ClaimDue of no items", err, countersign.EINVALID, "a claim needs a positive limit and lease")
	it := item(hook, "req_x", countersign.EventDecided)
	it.CreatedAt, it.NextAttemptAt = Base, Base
	if err := s.Enqueue(ctx, []countersign.OutboxItem{it}, Base); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	wantError(t, "Enqueue of a taken id", s.Enqueue(ctx, []countersign.OutboxItem{it}, Base), countersign.ECONFLICT, "outbox item "+it.ID+" already exists")
	held := claim(t, s, Base, 1)
	if len(held) != 1 {
		t.Fatalf("claimed %d items, want 1", len(held))
	}
	wantError(t, "MarkSent with another claim", s.MarkSent(ctx, it.ID, "clm_other", Base), countersign.ECONFLICT, "the outbox item is no longer held by this claim")
	wantError(t, "MarkSent of no item", s.MarkSent(ctx, "ntf_missing", held[0].Claim, Base), countersign.ENOTFOUND, "outbox item not found")

	// OAuth clients, grants and tokens.
	lim := countersign.ClientLimits{Max: 1}
	cl := &countersign.OAuthClient{ID: "csc_1", Name: "x", RedirectURIs: []string{"https://x.example/cb"}, AuthMethod: "none", RegisteredFrom: "192.0.2.1",
		CreatedAt: Base, LastUsedAt: Base}
	if err := s.CreateOAuthClient(ctx, cl, countersign.ClientLimits{}); err != nil {
		t.Fatalf("CreateOAuthClient: %v", err)
	}
	wantError(t, "CreateOAuthClient twice", s.CreateOAuthClient(ctx, cl, countersign.ClientLimits{}), countersign.ECONFLICT, "client already exists")
	cl2 := *cl
	cl2.ID, cl2.LastUsedAt = "csc_2", time.Time{}
	wantError(t, "CreateOAuthClient when full", s.CreateOAuthClient(ctx, &cl2, lim), countersign.ELIMIT,
		"the server holds as many registered clients as it may; try again later")
	unused := cl2
	unused.ID, unused.RegisteredNet = "csc_3", "2001:db8::/48"
	if err := s.CreateOAuthClient(ctx, &unused, countersign.ClientLimits{}); err != nil {
		t.Fatalf("CreateOAuthClient: %v", err)
	}
	wantError(t, "CreateOAuthClient from a full address", s.CreateOAuthClient(ctx, &cl2, countersign.ClientLimits{PerAddress: 1}), countersign.ELIMIT,
		"this address registered as many clients as it may; use one of them, or wait until unused ones expire")
	cl2.RegisteredFrom, cl2.RegisteredNet = "2001:db8:0:1::/64", "2001:db8::/48"
	wantError(t, "CreateOAuthClient from a full network", s.CreateOAuthClient(ctx, &cl2, countersign.ClientLimits{PerNetwork: 1}), countersign.ELIMIT,
		"this network registered as many clients as it may; use one of them, or wait until unused ones expire")
	_, err = s.OAuthClient(ctx, "csc_missing")
	wantError(t, "OAuthClient(missing)", err, countersign.ENOTFOUND, "client not found")
	g, _, code := newGrant(t, s, f.account, alice, "a")
	_, _, err = s.RedeemOAuthToken(ctx, sha("nope"), countersign.TokenCode, Base, nil, nil)
	wantError(t, "RedeemOAuthToken of no token", err, countersign.ENOTFOUND, "unknown token")
	_, _, err = s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base.Add(time.Minute), nil, nil)
	wantError(t, "RedeemOAuthToken of an expired code", err, countersign.ENOTFOUND, "the token expired")
	if _, _, err := s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base, nil, tokens("a", Base.Add(time.Hour))); err != nil {
		t.Fatalf("RedeemOAuthToken: %v", err)
	}
	_, _, err = s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base, nil, nil)
	wantError(t, "RedeemOAuthToken twice", err, countersign.ECONFLICT, "the token was already used")
	wantError(t, "RevokeGrant of no grant", s.RevokeGrant(ctx, f.account.ID, "grt_missing", Base), countersign.ENOTFOUND, "grant not found")
	if err := s.RevokeGrant(ctx, f.account.ID, g.ID, Base); err != nil {
		t.Fatalf("RevokeGrant: %v", err)
	}
	wantError(t, "RevokeGrant twice", s.RevokeGrant(ctx, f.account.ID, g.ID, Base), countersign.ECONFLICT, "the grant is already revoked")
	_, _, codeB := newGrant(t, s, f.account, alice, "b")
	if _, _, err := s.RedeemOAuthToken(ctx, codeB, countersign.TokenCode, Base, nil, tokens("b", Base.Add(time.Hour))); err != nil {
		t.Fatalf("RedeemOAuthToken: %v", err)
	}
	if err := s.RevokeAgentKey(ctx, f.account.ID, "grant-b", Base); err != nil {
		t.Fatalf("RevokeAgentKey of a grant's key: %v", err)
	}
	// Revoking a grant's key revokes the grant, whose tokens go with it.
	_, _, err = s.RedeemOAuthToken(ctx, sha("refresh-b"), countersign.TokenRefresh, Base, nil, nil)
	wantError(t, "RedeemOAuthToken of a revoked grant", err, countersign.ENOTFOUND, "unknown token")
	_, _, err = s.AccessToken(ctx, sha("nope"), Base)
	wantError(t, "AccessToken(unknown)", err, countersign.ENOTFOUND, "access token not found")

	// Passkeys and ceremonies.
	pk := &countersign.Passkey{ID: "pk_1", ApproverID: alice.ID, CredentialID: []byte{1}, PublicKey: []byte{1}, SignCount: 3,
		AAGUID: []byte{}, Transports: []string{}, Name: "laptop", CreatedAt: Base}
	if err := s.CreatePasskey(ctx, pk); err != nil {
		t.Fatalf("CreatePasskey: %v", err)
	}
	pk2 := *pk
	pk2.ID = "pk_2"
	wantError(t, "CreatePasskey twice", s.CreatePasskey(ctx, &pk2), countersign.ECONFLICT, "this passkey, or a passkey of this name, is already registered")
	pk3 := pk2
	pk3.ApproverID, pk3.CredentialID = "apr_missing", []byte{3}
	wantError(t, "CreatePasskey of no approver", s.CreatePasskey(ctx, &pk3), countersign.ENOTFOUND, "approver not found")
	wantError(t, "UsePasskey with an old counter", s.UsePasskey(ctx, pk.ID, 3, Base), countersign.ECONFLICT,
		"the passkey's signature counter did not advance: the assertion was replayed or the passkey was copied")
	wantError(t, "RemovePasskey of no passkey", s.RemovePasskey(ctx, alice.ID, "phone", true), countersign.ENOTFOUND, `no passkey "phone"`)
	_, err = s.PasskeyByCredentialID(ctx, []byte{9})
	wantError(t, "PasskeyByCredentialID(missing)", err, countersign.ENOTFOUND, "passkey not found")
	cer := &countersign.Ceremony{Hash: sha("c1"), Purpose: "stepup", ApproverID: alice.ID, Data: "{}", ExpiresAt: Base.Add(time.Minute)}
	if err := s.CreateCeremony(ctx, cer, Base); err != nil {
		t.Fatalf("CreateCeremony: %v", err)
	}
	_, err = s.TakeCeremony(ctx, sha("nope"), "stepup", Base)
	wantError(t, "TakeCeremony of none", err, countersign.ENOTFOUND, "no such ceremony")
	_, err = s.TakeCeremony(ctx, cer.Hash, "stepup", Base.Add(time.Minute))
	if E(err) != countersign.ENOTFOUND {
		t.Errorf("TakeCeremony at its expiry: %v, want ENOTFOUND", err)
	}
}
