package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// approveEdited approves r with an approver's edit to args and preview,
// and returns the edited request.
func approveEdited(t *testing.T, s countersign.Store, r *countersign.Request, args, preview string, now time.Time) *countersign.Request {
	t.Helper()
	got, err := s.Transition(t.Context(), countersign.Transition{
		ID: r.ID, From: fromPending, To: countersign.StatusApproved, Now: now,
		AccountID: r.AccountID, DecidedBy: "alice", Edited: edited(r, args, preview),
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: `{"edited":true}`})
	if err != nil {
		t.Fatalf("approve %s with an edit: %v", r.ID, err)
	}
	return got
}

// takeOriginal calls ConsumeApproved with the binding r had before it was
// edited: a model's retry of the call it asked about.
func takeOriginal(t *testing.T, s countersign.Store, keyID string, r *countersign.Request, acceptEdits bool, now time.Time) (*countersign.Request, error) {
	t.Helper()
	return s.ConsumeApproved(t.Context(), keyID, r.Kind, r.Action, r.Original.ArgsHash, r.Original.PreviewHash, r.Tier, acceptEdits, now,
		countersign.AuditEvent{Event: "consumed", Actor: "key:" + keyID, Detail: `{"via":"retry"}`})
}

// testConsumeApprovedEdited: a retry of the call as the agent asked it
// takes the approval an approver gave to an edit of it, once, when the
// caller runs edits, and gets the edited action; a caller that does not
// is refused and takes nothing; an approval of the call itself goes
// first; nothing of another key, kind, action, tier or original matches.
func testConsumeApprovedEdited(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := create(t, s, mcpRequest(f.key, "fs_write", `{"path":"/a"}`, "write /a"), Base)
	e := approveEdited(t, s, r, `{"path":"/tmp/a"}`, "write /tmp/a", Base.Add(time.Second))
	now := Base.Add(2 * time.Second)
	seq, _, _ := s.AuditHead(ctx)

	misses := map[string]func(m *countersign.Request) string{
		"another key":      func(m *countersign.Request) string { return f.key2.ID },
		"another kind":     func(m *countersign.Request) string { m.Kind = countersign.KindTool; return f.key.ID },
		"another action":   func(m *countersign.Request) string { m.Action = "fs_delete"; return f.key.ID },
		"another original": func(m *countersign.Request) string { m.Original.ArgsHash = sha(`{"path":"/b"}`); return f.key.ID },
		"another preview":  func(m *countersign.Request) string { m.Original.PreviewHash = sha("write /b"); return f.key.ID },
		"the hashes swapped": func(m *countersign.Request) string {
			m.Original.ArgsHash, m.Original.PreviewHash = m.Original.PreviewHash, m.Original.ArgsHash
			return f.key.ID
		},
		"another tier": func(m *countersign.Request) string { m.Tier = countersign.TierRead; return f.key.ID },
	}
	for name, change := range misses {
		m := *e
		o := *e.Original
		m.Original = &o
		key := change(&m)
		_, err := takeOriginal(t, s, key, &m, true, now)
		wantCode(t, "take by the original ("+name+")", err, countersign.ENOTFOUND)
	}
	_, err := takeOriginal(t, s, f.key.ID, e, true, e.ExpiresAt)
	wantCode(t, "take by the original at expiry", err, countersign.ENOTFOUND)

	// A caller that does not run edits would run the call as it asked:
	// the approval is refused to it, and stays.
	_, err = takeOriginal(t, s, f.key.ID, e, false, now)
	wantCode(t, "take by the original without running edits", err, countersign.ECONFLICT)
	wantMessage(t, "take by the original without running edits", err, "edited")
	if seq2, _, _ := s.AuditHead(ctx); seq2 != seq {
		t.Errorf("a refused take wrote the audit log: head %d, want %d", seq2, seq)
	}
	if stored, _ := s.Request(ctx, r.ID); stored == nil || stored.Status != countersign.StatusApproved {
		t.Fatalf("after refused takes: %+v, want still approved", stored)
	}

	// An approval of the call itself is taken first, though decided later.
	plain := create(t, s, mcpRequest(f.key, "fs_write", `{"path":"/a"}`, "write /a"), Base.Add(time.Second))
	approve(t, s, plain.ID, Base.Add(time.Second+1))
	if got, err := takeOriginal(t, s, f.key.ID, e, true, now); err != nil || got.ID != plain.ID || got.Original != nil {
		t.Fatalf("take with an approval of the call itself: %+v, %v; want %s", got, err, plain.ID)
	}

	seq, _, _ = s.AuditHead(ctx)
	got, err := takeOriginal(t, s, f.key.ID, e, true, now)
	if err != nil {
		t.Fatalf("take the edited approval by the original: %v", err)
	}
	want := *e
	want.Status, want.ConsumedAt = countersign.StatusConsumed, now
	same(t, "edited approval taken by the original", got, &want)
	if got.ArgsHash != sha(`{"path":"/tmp/a"}`) || string(got.Arguments) != `{"path":"/tmp/a"}` {
		t.Errorf("taken request runs %s, want the edited arguments", got.Arguments)
	}
	stored, err := s.Request(ctx, r.ID)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	same(t, "stored edited approval after the take", stored, &want)
	entries, err := s.AuditLog(ctx, seq, 10)
	if err != nil || len(entries) != 1 || entries[0].RequestID != r.ID || entries[0].Event != "consumed" || entries[0].Detail != `{"via":"retry"}` {
		t.Fatalf("AuditLog after the take: %+v, %v; want one consumed entry of %s", entries, err, r.ID)
	}

	// Single use, by either binding.
	_, err = takeOriginal(t, s, f.key.ID, e, true, now)
	wantCode(t, "take by the original twice", err, countersign.ENOTFOUND)
	_, err = consumeApproved(t, s, f.key.ID, e, now)
	wantCode(t, "take by the edited binding after", err, countersign.ENOTFOUND)
	_, err = takeOriginal(t, s, f.key.ID, e, false, now)
	wantCode(t, "take without running edits after", err, countersign.ENOTFOUND)

	// Of two edited approvals of one call, the one decided first goes
	// first, each with its own edit.
	r1 := create(t, s, mcpRequest(f.key, "send", `{"to":"x"}`, "send to x"), Base)
	e1 := approveEdited(t, s, r1, `{"to":"y"}`, "send to y", Base.Add(10*time.Second))
	r2 := create(t, s, mcpRequest(f.key, "send", `{"to":"x"}`, "send to x"), Base.Add(time.Second))
	approveEdited(t, s, r2, `{"to":"z"}`, "send to z", Base.Add(5*time.Second))
	for i, want := range []string{r2.ID, r1.ID} {
		got, err := takeOriginal(t, s, f.key.ID, e1, true, Base.Add(20*time.Second))
		if err != nil || got.ID != want {
			t.Fatalf("take #%d: %+v, %v; want %s", i+1, got, err, want)
		}
	}
}

// testConsumeApprovedEditedRace: retries of the original call race
// retries of the edited one, consumptions by id, and retries of agents
// that do not run edits, for one edited approval: exactly one takes it,
// never one that does not run edits, and one audit entry is written.
func testConsumeApprovedEditedRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	for run := range 6 {
		r := create(t, s, mcpRequest(f.key, "deploy", `{"env":"prod"}`, "deploy prod"), Base)
		e := approveEdited(t, s, r, `{"env":"staging"}`, "deploy staging", Base.Add(time.Second))
		seq, _, _ := s.AuditHead(t.Context())
		now := Base.Add(2 * time.Second)

		var wg sync.WaitGroup
		var mu sync.Mutex
		start := make(chan struct{})
		var winners []int
		for i := range 20 {
			wg.Go(func() {
				<-start
				var err error
				switch {
				case run%2 == 0 || i%4 == 0: // the even runs: only retries of the original call
					_, err = takeOriginal(t, s, f.key.ID, e, true, now)
				case i%4 == 1:
					_, err = consumeApproved(t, s, f.key.ID, e, now)
				case i%4 == 2:
					_, err = s.Transition(t.Context(), countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusApproved},
						To: countersign.StatusConsumed, Now: now, KeyID: f.key.ID},
						countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"})
				default:
					_, err = takeOriginal(t, s, f.key.ID, e, false, now)
				}
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					winners = append(winners, i)
				} else if c := countersign.ErrorCode(err); c != countersign.ENOTFOUND && c != countersign.ECONFLICT {
					t.Errorf("run %d, goroutine %d: %v, want not found or conflict", run, i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("run %d: %d callers took the approval, want exactly 1", run, len(winners))
		}
		if i := winners[0]; run%2 == 1 && i%4 == 3 {
			t.Fatalf("run %d: a caller that does not run edits took the edited approval", run)
		}
		if seq2, _, _ := s.AuditHead(t.Context()); seq2 != seq+1 {
			t.Fatalf("run %d: audit head moved from %d to %d, want one entry", run, seq, seq2)
		}
		if got, _ := s.Request(t.Context(), r.ID); got == nil || got.Status != countersign.StatusConsumed {
			t.Fatalf("run %d: request %+v, want consumed", run, got)
		}
	}
}
