package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// testPruneRequests: old finished requests go, oldest first and no more
// than asked, with their links, windows, coverages and notifications;
// pending and approved ones stay however old, and so do recent finished
// ones; the audit log keeps every entry and its chain verifies.
func testPruneRequests(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	p, ok := s.(countersign.HistoryPruner)
	if !ok {
		t.Fatal("the store cannot prune its history")
	}
	c := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	at := func(d time.Duration, action string) *countersign.Request {
		r := newRequest(f.key, action, `{"n":"`+action+`"}`, action)
		r.CreatedAt, r.ExpiresAt = Base.Add(d), Base.Add(d+10*time.Minute)
		return create(t, s, r, r.CreatedAt)
	}
	denied := at(0, "denied")
	deny(t, s, denied.ID, Base.Add(time.Minute))
	consumed := at(time.Second, "consumed")
	if _, err := s.Transition(ctx, countersign.Transition{
		ID: consumed.ID, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusApproved,
		Now: Base.Add(time.Minute), DecidedBy: "approver:alice",
		Window: &countersign.AutoApproveWindow{ID: countersign.NewID("win_"), AccountID: f.account.ID, KeyID: f.key.ID,
			SessionID: "sess-1", Kind: countersign.KindTool, Action: "consumed", Until: Base.Add(2 * time.Minute), CreatedAt: Base.Add(time.Minute)},
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, countersign.Transition{ID: consumed.ID, From: []countersign.Status{countersign.StatusApproved},
		To: countersign.StatusConsumed, Now: Base.Add(time.Minute)}, countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	linked := newRequest(f.key, "expired", `{"n":"expired"}`, "expired")
	linked.CreatedAt, linked.ExpiresAt = Base.Add(2*time.Second), Base.Add(5*time.Minute)
	linked.Links = []countersign.Link{{Hash: sha("link token"), Action: "approve"}}
	create(t, s, linked, linked.CreatedAt)
	if _, err := s.ExpireRequests(ctx, linked.ID, Base.Add(6*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimCoverage(ctx, countersign.Coverage{ApprovalID: consumed.ID, RequestID: denied.ID, CreatedAt: Base.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, []countersign.OutboxItem{item(c, denied.ID, countersign.EventDecided)}, Base.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	pending := at(3*time.Second, "pending")
	approved := at(4*time.Second, "approved")
	approve(t, s, approved.ID, Base.Add(time.Minute))
	recent := at(100*24*time.Hour, "recent")
	deny(t, s, recent.ID, Base.Add(100*24*time.Hour+time.Minute))
	_, entries := Verify(t, s)

	cutoff := Base.Add(90 * 24 * time.Hour)
	if n, err := p.PruneRequests(ctx, cutoff, 2); err != nil || n != 2 {
		t.Fatalf("PruneRequests(limit 2) = %d, %v; want 2", n, err)
	}
	if _, err := s.Request(ctx, linked.ID); err != nil {
		t.Errorf("the third oldest finished request went before the older two: %v", err)
	}
	if n, err := p.PruneRequests(ctx, cutoff, 100); err != nil || n != 1 {
		t.Fatalf("PruneRequests again = %d, %v; want the last old one", n, err)
	}
	if n, err := p.PruneRequests(ctx, cutoff, 100); err != nil || n != 0 {
		t.Fatalf("PruneRequests with nothing old = %d, %v", n, err)
	}
	for _, r := range []*countersign.Request{denied, consumed, linked} {
		_, err := s.Request(ctx, r.ID)
		wantCode(t, "a pruned "+r.Action+" request", err, countersign.ENOTFOUND)
	}
	for _, r := range []*countersign.Request{pending, approved, recent} {
		if _, err := s.Request(ctx, r.ID); err != nil {
			t.Errorf("the %s request was pruned: %v", r.Action, err)
		}
	}
	_, err := s.Link(ctx, sha("link token"))
	wantCode(t, "a pruned request's link", err, countersign.ENOTFOUND)
	if w, err := s.ActiveWindows(ctx, f.key.ID, "sess-1", countersign.KindTool, "consumed", Base); err != nil || len(w) != 0 {
		t.Errorf("a pruned approval's window: %v, %v", w, err)
	}
	if got := claim(t, s, Base.Add(time.Hour), 10); len(got) != 0 {
		t.Errorf("a pruned request's notification is still due: %v", ids(got))
	}
	if problems, n := Verify(t, s); len(problems) != 0 || n != entries {
		t.Errorf("audit log after pruning: %d entries (want %d), problems %v", n, entries, problems)
	}
}

// testPruneWhileDeciding: requests finished while a prune runs, older than
// those it found, join no batch half-way: every statement of a prune acts
// on the same requests, so none fails on what still refers to a request,
// and none leaves a request without what refers to it.
func testPruneWhileDeciding(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	p := s.(countersign.HistoryPruner)
	const n, batch = 120, 4
	reqs := make([]*countersign.Request, n)
	for i := range reqs {
		r := newRequest(f.key, "Bash", fmt.Sprintf(`{"n":%d}`, i), fmt.Sprint(i))
		// Ties of created_at too: a batch's order must not hang on them.
		r.CreatedAt, r.ExpiresAt = Base.Add(time.Duration(i/3)*time.Second), Base.Add(time.Hour)
		r.Links = []countersign.Link{{Hash: sha(fmt.Sprint("prune link ", i)), Action: "approve"}}
		reqs[i] = create(t, s, r, r.CreatedAt)
	}
	cutoff := Base.Add(90 * 24 * time.Hour)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Newest first: each denial is older than every finished request
		// left, so it lands at the head of the next batch.
		for i := n - 1; i >= 0; i-- {
			if _, err := s.Transition(ctx, countersign.Transition{ID: reqs[i].ID, From: []countersign.Status{countersign.StatusPending},
				To: countersign.StatusDenied, Now: Base.Add(time.Minute), DecidedBy: "alice"},
				countersign.AuditEvent{Event: "denied", Actor: "approver:alice", Detail: "{}"}); err != nil {
				t.Errorf("deny: %v", err)
				return
			}
		}
	}()
	pruned, finished := 0, false
	var err error
	for !finished && err == nil {
		select {
		case <-done:
			finished = true
		default:
		}
		for m := batch; m == batch && err == nil; pruned += m {
			m, err = p.PruneRequests(ctx, cutoff, batch)
		}
	}
	<-done
	if err != nil {
		t.Fatalf("PruneRequests while deciding: %v", err)
	}
	if pruned != n {
		t.Errorf("pruned %d of %d finished requests", pruned, n)
	}
	for i, r := range reqs {
		if _, err := s.Request(ctx, r.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
			t.Errorf("request %d kept: %v", i, err)
		}
		if _, err := s.Link(ctx, sha(fmt.Sprint("prune link ", i))); countersign.ErrorCode(err) != countersign.ENOTFOUND {
			t.Errorf("the link of request %d kept: %v", i, err)
		}
	}
}

// testPruneKeepsIdempotent: a finished request an Idempotency-Key's record
// refers to stays, however short the retention, while the record lives,
// so that a retry with the key gets its answer and never makes the change
// again; once the record is pruned, the request goes too.
func testPruneKeepsIdempotent(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	p, is := s.(countersign.HistoryPruner), s.(countersign.IdempotencyStore)
	r := create(t, s, newRequest(f.key, "Bash", `{"n":1}`, "one"), Base)
	plain := create(t, s, newRequest(f.key, "Bash", `{"n":2}`, "two"), Base)
	deny(t, s, plain.ID, Base.Add(time.Second))
	dec := &countersign.Idempotency{Principal: "approver:alice", Key: "d", Op: countersign.IdemDecision, Fingerprint: "f"}
	if _, err := s.Transition(countersign.WithIdempotency(ctx, dec), countersign.Transition{ID: r.ID,
		From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusDenied, Now: Base.Add(time.Second), DecidedBy: "alice"},
		countersign.AuditEvent{Event: "denied", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	// A retention shorter than the key's window: the request is old
	// enough, its key's record is not.
	if n, err := p.PruneRequests(ctx, Base.Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("PruneRequests = %d, %v; want the request without a key", n, err)
	}
	if res, err := is.Idempotent(ctx, "approver:alice", "d", Base); err != nil || res.Request.ID != r.ID {
		t.Fatalf("the key's answer after a prune = %+v, %v", res, err)
	}
	if _, err := s.Request(ctx, plain.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the request without a key was kept: %v", err)
	}
	if _, err := is.PruneIdempotency(ctx, Base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n, err := p.PruneRequests(ctx, Base.Add(time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("PruneRequests once the key is forgotten = %d, %v; want 1", n, err)
	}
}
