package storetest

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

func testExpireRequests(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	other := mustAccount(t, s, "other")
	otherKey := mustKey(t, s, other, "x")

	mk := func(key *countersign.AgentKey, name string, ttl time.Duration) *countersign.Request {
		r := newRequest(key, "Bash", `{"n":"`+name+`"}`, name)
		r.ExpiresAt = Base.Add(ttl)
		return create(t, s, r, Base)
	}
	p1 := mk(f.key, "p1", time.Minute)
	p2 := mk(otherKey, "p2", 2*time.Minute)
	a1 := mk(f.key, "a1", time.Minute)
	approve(t, s, a1.ID, Base.Add(time.Second))
	d1 := mk(f.key, "d1", time.Minute)
	deny(t, s, d1.ID, Base.Add(time.Second))
	p3 := mk(f.key, "p3", 10*time.Minute)
	seq, _, _ := s.AuditHead(ctx)

	now := Base.Add(2 * time.Minute)
	list, err := s.ExpireRequests(ctx, "", now)
	if err != nil {
		t.Fatalf("ExpireRequests: %v", err)
	}
	ids, _ := expiredIDs(list, nil)
	slices.Sort(ids)
	// Each comes with its account and kind, for the hub and the metrics.
	for _, e := range list {
		for _, r := range []*countersign.Request{p1, p2, a1} {
			if e.ID == r.ID && (e.AccountID != r.AccountID || e.Kind != r.Kind || e.Kind == "") {
				t.Errorf("ExpireRequests returned %+v for %s, want account %s and kind %q", e, r.Preview, r.AccountID, r.Kind)
			}
		}
	}
	want := []string{p1.ID, p2.ID, a1.ID}
	slices.Sort(want)
	same(t, "expired ids", ids, want)
	for _, r := range []*countersign.Request{p1, p2, a1} {
		got, _ := s.Request(ctx, r.ID)
		if got.Status != countersign.StatusExpired {
			t.Errorf("%s: status %s, want expired", r.Preview, got.Status)
		}
	}
	for _, r := range []*countersign.Request{d1, p3} {
		got, _ := s.Request(ctx, r.ID)
		if got.Status == countersign.StatusExpired {
			t.Errorf("%s was expired", r.Preview)
		}
	}

	// One audit entry per expired request, by the system, at now.
	entries, err := s.AuditLog(ctx, seq, 100)
	if err != nil {
		t.Fatalf("AuditLog: %v", err)
	}
	if len(entries) != 3 {
		t.Fatalf("expiry wrote %d audit entries, want 3", len(entries))
	}
	accounts := map[string]string{p1.ID: f.account.ID, p2.ID: other.ID, a1.ID: f.account.ID}
	for _, e := range entries {
		if e.Event != "expired" || e.Actor != "system" || e.Detail != "{}" || !e.At.Equal(now) || accounts[e.RequestID] != e.AccountID {
			t.Errorf("audit entry of an expiry: %+v", e)
		}
		delete(accounts, e.RequestID)
	}

	if ids, err := expiredIDs(s.ExpireRequests(ctx, "", now)); err != nil || len(ids) != 0 {
		t.Errorf("ExpireRequests again: %v, %v; want none", ids, err)
	}
	// With an id, only that request, and only once it is due (at its
	// expiry, not after).
	p4 := mk(f.key, "p4", 10*time.Minute)
	if ids, err := s.ExpireRequests(ctx, p3.ID, Base.Add(5*time.Minute)); err != nil || len(ids) != 0 {
		t.Errorf("ExpireRequests(p3) before its expiry: %v, %v; want none", ids, err)
	}
	ids, err = expiredIDs(s.ExpireRequests(ctx, p3.ID, p3.ExpiresAt))
	if err != nil || len(ids) != 1 || ids[0] != p3.ID {
		t.Errorf("ExpireRequests(p3) at its expiry: %v, %v; want [%s]", ids, err, p3.ID)
	}
	if got, _ := s.Request(ctx, p4.ID); got.Status != countersign.StatusPending {
		t.Errorf("ExpireRequests(p3) expired p4 too")
	}
}

func testWindows(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := create(t, s, newRequest(f.key, "Bash", `{}`, "x"), Base)
	until := Base.Add(15*time.Minute + 3)
	w := &countersign.AutoApproveWindow{
		ID: countersign.NewID("win_"), AccountID: f.account.ID, KeyID: f.key.ID, SessionID: "sess-1",
		Kind: countersign.KindTool, Action: "Bash", Until: until, CreatedAt: Base.Add(time.Minute), RequestID: r.ID,
		Scope: &countersign.Scope{StatedScope: countersign.StatedScope{Commands: []string{"rm"}, Paths: []string{"/src/build"}, Files: 3, Bytes: 9}, Classes: []string{"recursive deletion (-r/-R)"}},
	}
	got, err := s.Transition(ctx, countersign.Transition{
		ID: r.ID, From: fromPending, To: countersign.StatusApproved, Now: Base.Add(time.Minute), DecidedBy: "approver:alice", Window: w,
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: `{"auto_approve_minutes":15}`})
	if err != nil {
		t.Fatalf("approve with a window: %v", err)
	}
	if !got.AutoApproveUntil.Equal(until) {
		t.Errorf("AutoApproveUntil = %v, want %v", got.AutoApproveUntil, until)
	}

	found, err := s.ActiveWindows(ctx, f.key.ID, "sess-1", countersign.KindTool, "Bash", Base.Add(10*time.Minute))
	if err != nil || len(found) != 1 {
		t.Fatalf("ActiveWindows: %v, %v; want one", found, err)
	}
	same(t, "ActiveWindows", found[0], w)

	// Several windows of one session are all open, the one open longest
	// first.
	r3 := create(t, s, newRequest(f.key, "Bash", `{"n":3}`, "w"), Base)
	w3 := &countersign.AutoApproveWindow{SessionID: "sess-1", Kind: countersign.KindTool, Action: "Bash", Until: until.Add(time.Minute),
		Scope: &countersign.Scope{StatedScope: countersign.StatedScope{Commands: []string{"git push"}}}}
	if _, err := s.Transition(ctx, countersign.Transition{ID: r3.ID, From: fromPending, To: countersign.StatusApproved, Now: Base.Add(time.Minute), DecidedBy: "approver:alice", Window: w3},
		countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatalf("approve with a second window: %v", err)
	}
	found, err = s.ActiveWindows(ctx, f.key.ID, "sess-1", countersign.KindTool, "Bash", Base.Add(10*time.Minute))
	if err != nil || len(found) != 2 || found[0].RequestID != r3.ID || found[1].ID != w.ID ||
		found[0].Scope == nil || found[0].Scope.Commands[0] != "git push" {
		t.Errorf("ActiveWindows with two open: %+v, %v; want the later-closing one first, with its scope", found, err)
	}

	// The window never widens: every other key, session, kind or action,
	// and any time from Until on, finds nothing.
	misses := []struct {
		what    string
		key     string
		session string
		kind    countersign.Kind
		action  string
		now     time.Time
	}{
		{"another key", f.key2.ID, "sess-1", countersign.KindTool, "Bash", Base.Add(10 * time.Minute)},
		{"another session", f.key.ID, "sess-2", countersign.KindTool, "Bash", Base.Add(10 * time.Minute)},
		{"no session", f.key.ID, "", countersign.KindTool, "Bash", Base.Add(10 * time.Minute)},
		{"another kind", f.key.ID, "sess-1", countersign.KindMCP, "Bash", Base.Add(10 * time.Minute)},
		{"another action", f.key.ID, "sess-1", countersign.KindTool, "Write", Base.Add(10 * time.Minute)},
		{"at Until", f.key.ID, "sess-1", countersign.KindTool, "Bash", until.Add(time.Minute)},
		{"after Until", f.key.ID, "sess-1", countersign.KindTool, "Bash", until.Add(time.Hour)},
	}
	for _, m := range misses {
		got, err := s.ActiveWindows(ctx, m.key, m.session, m.kind, m.action, m.now)
		if err != nil || len(got) != 0 {
			t.Errorf("ActiveWindows for %s: %v, %v; want none", m.what, got, err)
		}
	}

	// A stop of a request of the session closes its windows at once, and
	// no window of another session or key.
	r2 := newRequest(f.key, "Write", `{"n":2}`, "y")
	r2.Context.SessionID = "sess-2"
	r2 = create(t, s, r2, Base)
	if _, err := s.Transition(ctx, countersign.Transition{
		ID: r2.ID, From: fromPending, To: countersign.StatusApproved, Now: Base.Add(time.Minute), DecidedBy: "approver:alice",
		Window: &countersign.AutoApproveWindow{SessionID: "sess-2", Kind: countersign.KindTool, Action: "Write", Until: until},
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatalf("approve with a window of sess-2: %v", err)
	}
	// A request the window lets through is stored while the window is as
	// it was read; once a stop closed it, a request that read it open
	// before the stop was stored is refused.
	byWindow := func(args string) error {
		r := newRequest(f.key, "Bash", args, "v"+args)
		r.Context.SessionID = "sess-1"
		r.Status, r.DecidedBy, r.DecidedAt, r.AutoApproveUntil = countersign.StatusApproved, countersign.DecidedByAutoApprove, Base.Add(time.Minute), until
		_, _, err := s.CreateRequest(ctx, r, 0, Base.Add(time.Minute), countersign.AuditEvent{Event: "auto_approved", Actor: "key:" + f.key.ID, Detail: "{}"})
		return err
	}
	if err := byWindow(`{"n":10}`); err != nil {
		t.Fatalf("CreateRequest let through by an open window: %v", err)
	}
	stop := create(t, s, newRequest(f.key, "Read", `{"n":3}`, "z"), Base) // of sess-1
	stoppedAt := Base.Add(2 * time.Minute)
	if _, err := s.Transition(ctx, countersign.Transition{ID: stop.ID, From: fromPending, To: countersign.StatusStopped, Now: stoppedAt, DecidedBy: "approver:alice"},
		countersign.AuditEvent{Event: "stopped", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got, err := s.ActiveWindows(ctx, f.key.ID, "sess-1", countersign.KindTool, "Bash", stoppedAt); err != nil || len(got) != 0 {
		t.Errorf("ActiveWindows of the stopped session: %v, %v; want none", got, err)
	}
	wantError(t, "CreateRequest let through by a window a stop closed", byWindow(`{"n":11}`), countersign.ECONFLICT,
		"the auto-approve window of this agent session closed while the request was made (the session was stopped); ask again")
	if got, err := s.ActiveWindows(ctx, f.key.ID, "sess-2", countersign.KindTool, "Write", stoppedAt); err != nil || len(got) != 1 {
		t.Errorf("ActiveWindows of another session after a stop: %v, %v; want one", got, err)
	}
}

// expiredIDs returns the ids of what ExpireRequests expired.
func expiredIDs(list []countersign.Expired, err error) ([]string, error) {
	ids := []string{}
	for _, e := range list {
		ids = append(ids, e.ID)
	}
	return ids, err
}

// testStopEndsApprovals: a stop makes every approval of the session that
// is not yet consumed unusable (those a window gave and those a human
// gave), and no approval of another session or key.
func testStopEndsApprovals(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	approve := func(r *countersign.Request, by string) *countersign.Request {
		t.Helper()
		r = create(t, s, r, Base)
		got, err := s.Transition(ctx, countersign.Transition{
			ID: r.ID, From: fromPending, To: countersign.StatusApproved, Now: Base.Add(time.Second), DecidedBy: by,
			ExpiresAt: Base.Add(time.Hour),
		}, countersign.AuditEvent{Event: "approved", Actor: "approver:" + by, Detail: "{}"})
		if err != nil {
			t.Fatalf("approve: %v", err)
		}
		return got
	}
	inSession := func(session, args string) *countersign.Request {
		r := newRequest(f.key, "Bash", args, "p"+args)
		r.Context.SessionID = session
		return r
	}
	byWindow := approve(inSession("sess-1", `{"n":1}`), countersign.DecidedByAutoApprove)
	byHuman := approve(inSession("sess-1", `{"n":2}`), "alice")
	used := approve(inSession("sess-1", `{"n":3}`), "alice")
	if _, err := s.Transition(ctx, countersign.Transition{ID: used.ID, From: []countersign.Status{countersign.StatusApproved},
		To: countersign.StatusConsumed, Now: Base.Add(2 * time.Second)}, countersign.AuditEvent{Event: "consumed", Actor: "key:x", Detail: "{}"}); err != nil {
		t.Fatalf("consume: %v", err)
	}
	otherSession := approve(inSession("sess-2", `{"n":4}`), "alice")
	otherKey := newRequest(f.key2, "Bash", `{"n":5}`, "p5")
	otherKey = approve(otherKey, "alice") // of sess-1, of another key
	noSession := approve(inSession("", `{"n":6}`), "alice")
	waiting := create(t, s, inSession("sess-1", `{"n":7}`), Base)

	stop := create(t, s, inSession("sess-1", `{"n":8}`), Base)
	stoppedAt := Base.Add(time.Minute)
	seq, _, _ := s.AuditHead(ctx)
	if _, err := s.Transition(ctx, countersign.Transition{ID: stop.ID, From: fromPending, To: countersign.StatusStopped, Now: stoppedAt, DecidedBy: "bob"},
		countersign.AuditEvent{Event: "stopped", Actor: "approver:bob", Detail: "{}"}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// The log says it: one entry for the stop, one for each approval it
	// ended, naming the stop.
	entries, err := s.AuditLog(ctx, seq, 10)
	if err != nil {
		t.Fatalf("AuditLog: %v", err)
	}
	ended := map[string]string{}
	for _, e := range entries {
		ended[e.RequestID] = e.Event + " " + e.Detail
	}
	if len(entries) != 3 || !strings.HasPrefix(ended[stop.ID], "stopped") ||
		!strings.Contains(ended[byWindow.ID], stop.ID) || !strings.Contains(ended[byHuman.ID], stop.ID) {
		t.Errorf("audit entries of the stop = %v, want the stop and the two approvals it ended, naming it", ended)
	}
	for _, r := range []*countersign.Request{byWindow, byHuman} {
		got, err := s.Request(ctx, r.ID)
		if err != nil || got.Status != countersign.StatusStopped || got.DecidedBy != "bob" || !got.DecidedAt.Equal(stoppedAt) {
			t.Errorf("approval %s by %s after the stop of its session: %+v, %v; want stopped by bob", r.ID, r.DecidedBy, got, err)
		}
		_, err = s.Transition(ctx, countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusApproved},
			To: countersign.StatusConsumed, Now: stoppedAt.Add(time.Second), KeyID: r.KeyID}, countersign.AuditEvent{Event: "consumed", Actor: "key:x", Detail: "{}"})
		wantCode(t, "consume an approval of a stopped session", err, countersign.ECONFLICT)
		_, err = s.ConsumeApproved(ctx, r.KeyID, r.Kind, r.Action, r.ArgsHash, r.PreviewHash, r.Tier, true, stoppedAt.Add(time.Second), countersign.AuditEvent{Event: "consumed", Actor: "key:x", Detail: "{}"})
		wantCode(t, "ConsumeApproved of a stopped session", err, countersign.ENOTFOUND)
	}
	for _, r := range []*countersign.Request{otherSession, otherKey, noSession} {
		if got, _ := s.Request(ctx, r.ID); got == nil || got.Status != countersign.StatusApproved {
			t.Errorf("approval of another session, key or of none after a stop: %+v, want approved", got)
		}
	}
	if got, _ := s.Request(ctx, used.ID); got == nil || got.Status != countersign.StatusConsumed {
		t.Errorf("a consumed approval after a stop: %+v, want consumed", got)
	}
	if got, _ := s.Request(ctx, waiting.ID); got == nil || got.Status != countersign.StatusPending {
		t.Errorf("a pending request after a stop: %+v, want pending", got)
	}
	// The hook's used approval of the session has no delete left to cover.
	err = s.ClaimCoverage(ctx, countersign.Coverage{ApprovalID: used.ID, RequestID: "req_after", CreatedAt: stoppedAt.Add(time.Second)})
	wantCode(t, "ClaimCoverage of a used approval of a stopped session", err, countersign.ECONFLICT)
}

// testCoverage: an approval covers one request at most; a second claim is
// refused, and an unknown approval is not found.
func testCoverage(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	hook := create(t, s, newRequest(f.key, "Bash", `{}`, "x"), Base)
	c := countersign.Coverage{ApprovalID: hook.ID, RequestID: "req_first", CreatedAt: Base.Add(time.Second)}
	if err := s.ClaimCoverage(ctx, c); err != nil {
		t.Fatalf("ClaimCoverage: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.ClaimCoverage(ctx, countersign.Coverage{ApprovalID: hook.ID, RequestID: "req_again", CreatedAt: Base.Add(2 * time.Second)})
		}()
	}
	wg.Wait()
	for _, err := range errs {
		wantCode(t, "a second claim of one approval", err, countersign.ECONFLICT)
	}
	err := s.ClaimCoverage(ctx, countersign.Coverage{ApprovalID: "req_missing", RequestID: "req_x", CreatedAt: Base})
	wantCode(t, "ClaimCoverage of an unknown approval", err, countersign.ENOTFOUND)
}
