package approval_test

import (
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// openWindow approves r with an auto-approve window of minutes.
func (e *env) openWindow(r *countersign.Request, minutes int) *countersign.Request {
	e.t.Helper()
	got, err := e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: minutes})
	if err != nil {
		e.t.Fatalf("approve with a window of %d minutes: %v", minutes, err)
	}
	return got
}

// wantAutoApproved creates in for agent and checks whether a window let it
// through.
func (e *env) wantAutoApproved(name string, agent countersign.Agent, in countersign.CreateInput, want bool) {
	e.t.Helper()
	r := e.create(agent, in)
	got := r.Status == countersign.StatusApproved && r.DecidedBy == countersign.DecidedByAutoApprove
	if got != want {
		e.t.Errorf("%s: status %s decided by %q, auto-approved=%v, want %v", name, r.Status, r.DecidedBy, got, want)
	}
	if want && !slices.Equal(e.events(r.ID), []string{"auto_approved"}) {
		e.t.Errorf("%s: audit events = %v, want [auto_approved]", name, e.events(r.ID))
	}
	if !want && r.Status != countersign.StatusPending {
		e.t.Errorf("%s: status %s, want pending", name, r.Status)
	}
}

func TestAutoApproveWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50})
	opener := e.openWindow(e.create(e.keyA, e.toolCall("Bash", "s1")), 5)
	if !opener.AutoApproveUntil.Equal(start.Add(5 * time.Minute)) {
		t.Errorf("window until %v, want %v", opener.AutoApproveUntil, start.Add(5*time.Minute))
	}
	e.clock.Advance(time.Minute)

	r := e.create(e.keyA, e.toolCall("Bash", "s1"))
	if r.Status != countersign.StatusApproved || r.DecidedBy != countersign.DecidedByAutoApprove ||
		!r.AutoApproveUntil.Equal(opener.AutoApproveUntil) || !r.DecidedAt.Equal(e.clock.Now()) {
		t.Errorf("same key, session, kind and tool: %s by %q until %v at %v", r.Status, r.DecidedBy, r.AutoApproveUntil, r.DecidedAt)
	}
	if ev := e.events(r.ID); !slices.Equal(ev, []string{"auto_approved"}) {
		t.Errorf("audit events = %v, want [auto_approved]", ev)
	}
	// An auto-approved request is used like any approval: once.
	if _, err := e.svc.Consume(e.ctx, e.keyA, r.ID); err != nil {
		t.Errorf("Consume auto-approved: %v", err)
	}

	mcp := e.toolCall("Bash", "s1")
	mcp.Kind = countersign.KindMCP
	noSession := e.toolCall("Bash", "")
	tests := []struct {
		name  string
		agent countersign.Agent
		in    countersign.CreateInput
	}{
		{"another key", e.keyB, e.toolCall("Bash", "s1")},
		{"another account's key", e.keyX, e.toolCall("Bash", "s1")},
		{"another session", e.keyA, e.toolCall("Bash", "s2")},
		{"another kind", e.keyA, mcp},
		{"another tool", e.keyA, e.toolCall("Write", "s1")},
		{"no session", e.keyA, noSession},
	}
	for _, tt := range tests {
		e.wantAutoApproved(tt.name, tt.agent, tt.in, false)
	}

	e.clock.Advance(4 * time.Minute) // the window closes at its Until
	e.wantAutoApproved("after the window closed", e.keyA, e.toolCall("Bash", "s1"), false)
}

func TestAutoApproveWindowRm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50})
	rm := func(cmd, session string) countersign.CreateInput {
		return countersign.CreateInput{Kind: countersign.KindRm, Action: cmd, Context: countersign.RequestContext{SessionID: session}}
	}
	e.openWindow(e.create(e.keyA, rm("rm -rf /tmp/a", "s1")), 10)
	e.clock.Advance(9 * time.Minute)

	// An rm window covers any delete of the session, not only the first
	// command line.
	e.wantAutoApproved("another rm of the session", e.keyA, rm("rm -r /var/tmp/b", "s1"), true)
	e.wantAutoApproved("rm of another session", e.keyA, rm("rm -r /var/tmp/c", "s2"), false)
	e.wantAutoApproved("rm of another key", e.keyB, rm("rm -r /var/tmp/d", "s1"), false)
	tool := e.toolCall("rm", "s1")
	e.wantAutoApproved("a tool named rm", e.keyA, tool, false)
	e.clock.Advance(time.Minute)
	e.wantAutoApproved("rm after the window", e.keyA, rm("rm -r /var/tmp/e", "s1"), false)
}

func TestAutoApproveWindowOfOneTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50})
	in := e.toolCall("Bash", "s1")
	in.Kind = countersign.KindMCP
	e.openWindow(e.create(e.keyA, in), 1)

	same := e.toolCall("Bash", "s1")
	same.Kind = countersign.KindMCP
	e.wantAutoApproved("same mcp tool", e.keyA, same, true)
	e.wantAutoApproved("tool kind, same name", e.keyA, e.toolCall("Bash", "s1"), false)
}

// TestAutoApprovalLastsOnlyTheWindow: an approval a window gave is usable
// while the window is open (or ConsumeGrace, when the window ends sooner),
// not for the whole life the request asked for.
func TestAutoApprovalLastsOnlyTheWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50, MaxTTL: 2 * time.Hour, ConsumeGrace: 10 * time.Second})
	e.openWindow(e.create(e.keyA, e.toolCall("Bash", "s1")), 1)
	e.clock.Advance(59 * time.Second)
	in := e.toolCall("Bash", "s1")
	in.TTL = time.Hour
	r := e.create(e.keyA, in)
	if r.DecidedBy != countersign.DecidedByAutoApprove {
		t.Fatalf("not auto-approved: %s by %q", r.Status, r.DecidedBy)
	}
	if want := e.clock.Now().Add(10 * time.Second); !r.ExpiresAt.Equal(want) {
		t.Errorf("an approval given 1 s before the window closes expires at %v, want %v (the grace)", r.ExpiresAt, want)
	}
	e.clock.Advance(time.Minute)
	if _, err := e.svc.Consume(e.ctx, e.keyA, r.ID); countersign.ErrorCode(err) != countersign.ECONFLICT {
		t.Errorf("Consume a minute after the window closed: %v, want a conflict", err)
	}
}

// TestStopEndsWindowApprovals: approvals a window gave, kept unused, are
// unusable once the human stops the session, and so is a human's.
func TestStopEndsWindowApprovals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50, MaxTTL: time.Hour})
	e.openWindow(e.create(e.keyA, e.toolCall("Bash", "s1")), 60)
	in := e.toolCall("Bash", "s1")
	in.TTL = time.Hour
	kept := e.create(e.keyA, in)
	if kept.DecidedBy != countersign.DecidedByAutoApprove {
		t.Fatalf("not auto-approved: %s by %q", kept.Status, kept.DecidedBy)
	}
	human := e.create(e.keyA, e.toolCall("Write", "s1"))
	if _, err := e.svc.Decide(e.ctx, e.alice, human.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	other := e.create(e.keyA, e.toolCall("Write", "s2"))
	if _, err := e.svc.Decide(e.ctx, e.alice, other.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	stop := e.create(e.keyA, e.toolCall("Read", "s1"))
	if _, err := e.svc.Decide(e.ctx, e.alice, stop.ID, countersign.DecisionInput{Decision: countersign.DecisionStop}); err != nil {
		t.Fatalf("stop: %v", err)
	}
	for _, r := range []*countersign.Request{kept, human} {
		if _, err := e.svc.Consume(e.ctx, e.keyA, r.ID); countersign.ErrorCode(err) != countersign.ECONFLICT {
			t.Errorf("consume an approval of the stopped session: %v, want a conflict", err)
		}
		if got, _ := e.svc.Get(e.ctx, e.keyA, r.ID); got == nil || got.Status != countersign.StatusStopped {
			t.Errorf("approval of the stopped session: %+v, want stopped", got)
		}
	}
	if _, err := e.svc.Consume(e.ctx, e.keyA, other.ID); err != nil {
		t.Errorf("consume an approval of another session: %v", err)
	}
}
