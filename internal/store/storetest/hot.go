package storetest

import (
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// HotPaths runs, on a store of its own making (open), the queries a busy
// server runs all the time: creating a request (its twin check and
// pending count), asking again for a waiting one, reaching the pending
// limit, the approver's pending list and other lists, a lookup by
// reference code, the seed routes' lists, the auto-approve window lookup,
// decisions and a consumption, a model's retries, the expiry sweep, the outbox's due items,
// the pruning of old history and the store's stats (every /metrics
// scrape). It returns the store; start is called
// once the accounts and keys exist, before the hot queries run, so that a
// backend's test of query plans collects only theirs.
func HotPaths(t *testing.T, open Opener, start func()) countersign.Store {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	c := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	start()

	seed := newRequest(f.key, "rm -rf /srv", `{"n":0}`, "delete /srv")
	seed.Kind, seed.SeedID = countersign.KindRm, "delete:del_1"
	create(t, s, seed, Base)
	first := create(t, s, newRequest(f.key, "Bash", `{"n":1}`, "one"), Base)
	// The same ask again is its twin; one past the limit is refused.
	if _, created, err := s.CreateRequest(ctx, newRequest(f.key, "Bash", `{"n":1}`, "one"), 0, Base, createdEvent(first)); err != nil || created {
		t.Fatalf("the twin: created %v, %v", created, err)
	}
	_, _, err := s.CreateRequest(ctx, newRequest(f.key, "Bash", `{"n":2}`, "two"), 2, Base, createdEvent(first))
	wantCode(t, "a request past the pending limit", err, countersign.ELIMIT)
	if err := s.Enqueue(ctx, []countersign.OutboxItem{item(c, first.ID, countersign.EventCreated)}, Base); err != nil {
		t.Fatal(err)
	}
	claim(t, s, Base.Add(time.Second), 10)

	if _, err := s.Transition(ctx, countersign.Transition{
		ID: first.ID, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusApproved,
		Now: Base.Add(time.Minute), AccountID: f.account.ID, DecidedBy: "alice",
		Window: &countersign.AutoApproveWindow{ID: countersign.NewID("win_"), AccountID: f.account.ID, KeyID: f.key.ID,
			SessionID: "sess-1", Kind: countersign.KindTool, Action: "Bash", Until: Base.Add(5 * time.Minute), CreatedAt: Base.Add(time.Minute)},
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ActiveWindows(ctx, f.key.ID, "sess-1", countersign.KindTool, "Bash", Base.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, countersign.Transition{ID: first.ID, From: []countersign.Status{countersign.StatusApproved},
		To: countersign.StatusConsumed, Now: Base.Add(2 * time.Minute), KeyID: f.key.ID, AccountID: f.account.ID},
		countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	// A model's retry: of a call no approval has (the first try of every
	// call that needs a human), and of one an approver edited.
	mcp := create(t, s, mcpRequest(f.key, "fs_write", `{"path":"/a"}`, "write /a"), Base)
	e := approveEdited(t, s, mcp, `{"path":"/b"}`, "write /b", Base.Add(time.Minute))
	if _, err := consumeApproved(t, s, f.key.ID, mcp, Base.Add(2*time.Minute)); err != nil {
		t.Fatalf("the retry of an edited call: %v", err)
	}
	_, err = takeOriginal(t, s, f.key.ID, e, false, Base.Add(2*time.Minute))
	wantCode(t, "a retry that no approval matches", err, countersign.ENOTFOUND)
	for _, fl := range []countersign.RequestFilter{
		{Status: countersign.StatusPending, Limit: 50},
		{Limit: 100},
		{Reference: first.Reference, Limit: 1},
		{Kind: countersign.KindRm, SeedPrefix: "delete:", Limit: 25},
		{Kind: countersign.KindRm, SeedPrefix: "delete:", Statuses: []countersign.Status{countersign.StatusPending}, Limit: 25},
	} {
		fl.AccountID = f.account.ID
		if _, err := s.Requests(ctx, fl); err != nil {
			t.Fatalf("Requests(%+v): %v", fl, err)
		}
	}
	if _, err := s.ExpireRequests(ctx, "", Base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if p, ok := s.(countersign.HistoryPruner); ok {
		if _, err := p.PruneRequests(ctx, Base.Add(91*24*time.Hour), 500); err != nil {
			t.Fatal(err)
		}
	}
	// Every scrape of /metrics, which needs no sign-in, asks for these.
	if st, ok := s.(countersign.StatsReporter); ok {
		if _, err := st.StoreStats(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return s
}
