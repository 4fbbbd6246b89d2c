package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// mcpRequest returns a pending MCP request of key with the binding.
func mcpRequest(key *countersign.AgentKey, action, args, preview string) *countersign.Request {
	r := newRequest(key, action, args, preview)
	r.Kind, r.Tier = countersign.KindMCP, countersign.TierCommit
	return r
}

// consumeApproved calls ConsumeApproved with the binding of r.
func consumeApproved(t *testing.T, s countersign.Store, keyID string, r *countersign.Request, now time.Time) (*countersign.Request, error) {
	t.Helper()
	return s.ConsumeApproved(t.Context(), keyID, r.Kind, r.Action, r.ArgsHash, r.PreviewHash, r.Tier, true, now,
		countersign.AuditEvent{Event: "consumed", Actor: "key:" + keyID, Detail: `{"via":"retry"}`})
}

func testConsumeApproved(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := create(t, s, mcpRequest(f.key, "fs_write", `{"path":"/a"}`, "write /a"), Base)
	now := Base.Add(2 * time.Second)

	// A pending request is not an approval.
	_, err := consumeApproved(t, s, f.key.ID, r, now)
	wantCode(t, "ConsumeApproved(pending)", err, countersign.ENOTFOUND)

	approved := approve(t, s, r.ID, Base.Add(time.Second))
	seq, _, _ := s.AuditHead(ctx)

	// Nothing but the same key and the whole binding and tier matches: a
	// retry of a commit call takes no approval of the same call filed as
	// of another tier, or of none.
	misses := map[string]func(m *countersign.Request) string{
		"another key":     func(m *countersign.Request) string { return f.key2.ID },
		"another kind":    func(m *countersign.Request) string { m.Kind = countersign.KindTool; return f.key.ID },
		"another action":  func(m *countersign.Request) string { m.Action = "fs_delete"; return f.key.ID },
		"other arguments": func(m *countersign.Request) string { m.ArgsHash = sha(`{"path":"/b"}`); return f.key.ID },
		"another preview": func(m *countersign.Request) string { m.PreviewHash = sha("write /b"); return f.key.ID },
		"another tier":    func(m *countersign.Request) string { m.Tier = countersign.TierRead; return f.key.ID },
		"no tier":         func(m *countersign.Request) string { m.Tier = ""; return f.key.ID },
	}
	for name, change := range misses {
		m := *approved
		key := change(&m)
		_, err := consumeApproved(t, s, key, &m, now)
		wantCode(t, "ConsumeApproved("+name+")", err, countersign.ENOTFOUND)
	}
	// At its expiry the approval is gone, even before it is marked expired.
	_, err = consumeApproved(t, s, f.key.ID, approved, approved.ExpiresAt)
	wantCode(t, "ConsumeApproved(at expiry)", err, countersign.ENOTFOUND)
	if seq2, _, _ := s.AuditHead(ctx); seq2 != seq {
		t.Errorf("a miss wrote the audit log: head %d, want %d", seq2, seq)
	}

	got, err := consumeApproved(t, s, f.key.ID, approved, now)
	if err != nil {
		t.Fatalf("ConsumeApproved: %v", err)
	}
	want := *approved
	want.Status, want.ConsumedAt = countersign.StatusConsumed, now
	same(t, "consumed request", got, &want)
	stored, err := s.Request(ctx, r.ID)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	same(t, "stored consumed request", stored, &want)
	entries, err := s.AuditLog(ctx, seq, 10)
	if err != nil || len(entries) != 1 {
		t.Fatalf("AuditLog after the consumption: %d entries, %v; want 1", len(entries), err)
	}
	e := entries[0]
	if e.RequestID != r.ID || e.AccountID != f.account.ID || e.Event != "consumed" || e.Actor != "key:"+f.key.ID ||
		e.Detail != `{"via":"retry"}` || !e.At.Equal(now) {
		t.Errorf("audit entry %+v, want consumed of %s by key:%s at %v", e, r.ID, f.key.ID, now)
	}

	// Single use: the second retry finds nothing.
	_, err = consumeApproved(t, s, f.key.ID, approved, now.Add(time.Second))
	wantCode(t, "ConsumeApproved(twice)", err, countersign.ENOTFOUND)
}

func testConsumeApprovedOrder(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	// Two approvals of one binding: the one decided first goes first,
	// whatever the order of creation.
	first := create(t, s, mcpRequest(f.key, "send", `{"to":"x"}`, "send to x"), Base)
	approve(t, s, first.ID, Base.Add(10*time.Second))
	second := create(t, s, mcpRequest(f.key, "send", `{"to":"x"}`, "send to x"), Base.Add(time.Second))
	approve(t, s, second.ID, Base.Add(5*time.Second))
	// A seed-compatible request with the same binding never matches.
	seeded := mcpRequest(f.key, "send", `{"to":"x"}`, "send to x")
	seeded.SeedID = "delete:del_1"
	seeded.CreatedAt = Base.Add(2 * time.Second)
	create(t, s, seeded, Base.Add(2*time.Second))
	approve(t, s, seeded.ID, Base.Add(3*time.Second))

	now := Base.Add(20 * time.Second)
	for i, want := range []string{second.ID, first.ID} {
		got, err := consumeApproved(t, s, f.key.ID, first, now)
		if err != nil {
			t.Fatalf("ConsumeApproved #%d: %v", i+1, err)
		}
		if got.ID != want {
			t.Errorf("ConsumeApproved #%d took %s, want %s", i+1, got.ID, want)
		}
	}
	_, err := consumeApproved(t, s, f.key.ID, first, now)
	wantCode(t, "ConsumeApproved(all taken)", err, countersign.ENOTFOUND)
	if got, err := s.Request(t.Context(), seeded.ID); err != nil || got.Status != countersign.StatusApproved {
		t.Errorf("the seed-compatible request: %+v, %v; want it still approved", got, err)
	}
}

func testConsumeApprovedRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	r := create(t, s, mcpRequest(f.key, "deploy", `{"env":"prod"}`, "deploy prod"), Base)
	approve(t, s, r.ID, Base.Add(time.Second))
	seq, _, _ := s.AuditHead(t.Context())

	var wg sync.WaitGroup
	var mu sync.Mutex
	start := make(chan struct{})
	wins := 0
	for i := range 20 {
		wg.Go(func() {
			<-start
			_, err := consumeApproved(t, s, f.key.ID, r, Base.Add(2*time.Second))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
			} else if countersign.ErrorCode(err) != countersign.ENOTFOUND {
				t.Errorf("goroutine %d: %v, want ENOTFOUND", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d retries took the approval, want exactly 1", wins)
	}
	if seq2, _, _ := s.AuditHead(t.Context()); seq2 != seq+1 {
		t.Errorf("audit head moved from %d to %d, want one entry", seq, seq2)
	}
}
