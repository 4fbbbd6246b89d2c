package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// testIdempotency: a change made with an Idempotency-Key records the key in
// its own transaction, with the state it left the request in; the record
// reads back so after the request moved on; a key recorded already fails
// the change and leaves nothing of it; keys are the principal's own and are
// forgotten when pruned.
func testIdempotency(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	is, ok := s.(countersign.IdempotencyStore)
	if !ok {
		t.Fatal("the store records no idempotency keys")
	}
	agent := "key:" + f.key.ID
	withKey := func(key, op string) *countersign.Idempotency {
		return &countersign.Idempotency{Principal: agent, Key: key, Op: op, Fingerprint: sha(key + op)}
	}
	r := newRequest(f.key, "Bash", `{"n":1}`, "one")
	got, created, err := s.CreateRequest(countersign.WithIdempotency(ctx, withKey("k1", countersign.IdemCreate)), r, 0, Base, createdEvent(r))
	if err != nil || !created {
		t.Fatalf("CreateRequest with a key: %v, %v", created, err)
	}
	// The same key again fails, and creates nothing.
	again := newRequest(f.key, "Bash", `{"n":2}`, "two")
	_, _, err = s.CreateRequest(countersign.WithIdempotency(ctx, withKey("k1", countersign.IdemCreate)), again, 0, Base, createdEvent(again))
	wantCode(t, "a second creation with the same key", err, countersign.ECONFLICT)
	if _, err := s.Request(ctx, again.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the refused creation was kept: %v", err)
	}
	// Its twin, asked with another key, records that key with created false.
	twin := newRequest(f.key, "Bash", `{"n":1}`, "one")
	if _, created, err := s.CreateRequest(countersign.WithIdempotency(ctx, withKey("k2", countersign.IdemCreate)), twin, 0, Base, createdEvent(twin)); err != nil || created {
		t.Fatalf("the twin with a key: %v, %v", created, err)
	}
	// A decision records the decided state; a lazy expiry on the way
	// would not be the decision and records nothing.
	dec := &countersign.Idempotency{Principal: "approver:alice", Key: "d1", Op: countersign.IdemDecision, Fingerprint: "f"}
	if _, err := s.Transition(countersign.WithIdempotency(ctx, dec), countersign.Transition{ID: got.ID,
		From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusApproved, Now: Base.Add(time.Minute), DecidedBy: "alice"},
		countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	consume := withKey("c1", countersign.IdemConsume)
	if _, err := s.Transition(countersign.WithIdempotency(ctx, consume), countersign.Transition{ID: got.ID,
		From: []countersign.Status{countersign.StatusApproved}, To: countersign.StatusConsumed, Now: Base.Add(2 * time.Minute)},
		countersign.AuditEvent{Event: "consumed", Actor: agent, Detail: "{}"}); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		principal, key string
		created        bool
		status         countersign.Status
	}{
		{agent, "k1", true, countersign.StatusPending},
		{agent, "k2", false, countersign.StatusPending},
		{"approver:alice", "d1", false, countersign.StatusApproved},
		{agent, "c1", false, countersign.StatusConsumed},
	} {
		res, err := is.Idempotent(ctx, tt.principal, tt.key, Base)
		if err != nil || res.RequestID != got.ID || res.Created != tt.created || res.Request.Status != tt.status || res.Request.ID != got.ID {
			t.Errorf("Idempotent(%s, %s) = %+v, %v; want %s created=%v", tt.principal, tt.key, res, err, tt.status, tt.created)
		}
	}
	if res, err := is.Idempotent(ctx, agent, "c1", Base); err == nil && !res.Request.ConsumedAt.Equal(Base.Add(2*time.Minute)) {
		t.Errorf("the consumption's record: consumed at %v", res.Request.ConsumedAt)
	}
	_, err = is.Idempotent(ctx, "key:"+f.key2.ID, "k1", Base)
	wantCode(t, "another principal's key", err, countersign.ENOTFOUND)
	_, err = is.Idempotent(ctx, agent, "k1", Base.Add(time.Hour))
	wantCode(t, "a key recorded before since", err, countersign.ENOTFOUND)
	if n, err := is.PruneIdempotency(ctx, Base.Add(90*time.Second)); err != nil || n != 3 {
		t.Errorf("PruneIdempotency = %d, %v; want the 3 keys recorded before", n, err)
	}
	if _, err := is.Idempotent(ctx, agent, "c1", Base); err != nil {
		t.Errorf("the newer key was pruned: %v", err)
	}
}

// testIdempotencyReuse: a key whose record is older than the window, not
// yet pruned, is free again: a change made with it is recorded in place of
// the old record, and its retry gets the new answer. Within the window the
// key is still taken.
func testIdempotencyReuse(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	is := s.(countersign.IdempotencyStore)
	agent := "key:" + f.key.ID
	withKey := func(body string) context.Context {
		return countersign.WithIdempotency(ctx, &countersign.Idempotency{Principal: agent, Key: "reused", Op: countersign.IdemCreate, Fingerprint: sha(body)})
	}
	first := newRequest(f.key, "Bash", `{"n":1}`, "one")
	first.ExpiresAt = Base.Add(100 * 24 * time.Hour)
	if _, _, err := s.CreateRequest(withKey("one"), first, 0, Base, createdEvent(first)); err != nil {
		t.Fatalf("CreateRequest with a key: %v", err)
	}
	within := newRequest(f.key, "Bash", `{"n":2}`, "two")
	_, _, err := s.CreateRequest(withKey("two"), within, 0, Base.Add(countersign.IdempotencyWindow-time.Second), createdEvent(within))
	wantCode(t, "the key again within its window", err, countersign.ECONFLICT)

	later := Base.Add(countersign.IdempotencyWindow + time.Hour)
	second := newRequest(f.key, "Bash", `{"n":3}`, "three")
	second.CreatedAt, second.ExpiresAt = later, first.ExpiresAt
	if _, created, err := s.CreateRequest(withKey("three"), second, 0, later, createdEvent(second)); err != nil || !created {
		t.Fatalf("CreateRequest with the key past its window = %v, %v; want the change made", created, err)
	}
	res, err := is.Idempotent(ctx, agent, "reused", later.Add(-countersign.IdempotencyWindow))
	if err != nil || res.RequestID != second.ID || res.Fingerprint != sha("three") || !res.At.Equal(later) {
		t.Fatalf("Idempotent after the reuse = %+v, %v; want the new change's record", res, err)
	}
	// The decision's key too: the same rule holds for every change.
	dec := &countersign.Idempotency{Principal: "approver:alice", Key: "d", Op: countersign.IdemDecision, Fingerprint: "f"}
	for i, r := range []*countersign.Request{first, second} {
		now := later.Add(time.Duration(i) * (countersign.IdempotencyWindow + time.Minute))
		if _, err := s.Transition(countersign.WithIdempotency(ctx, dec), countersign.Transition{ID: r.ID,
			From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusDenied, Now: now, DecidedBy: "alice"},
			countersign.AuditEvent{Event: "denied", Actor: "approver:alice", Detail: "{}"}); err != nil {
			t.Fatalf("decision %d with the key: %v", i, err)
		}
	}
}
