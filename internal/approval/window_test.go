package approval_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
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
	opener := e.openWindow(e.create(e.keyA, e.toolCall("WebFetch", "s1")), 5)
	if !opener.AutoApproveUntil.Equal(start.Add(5 * time.Minute)) {
		t.Errorf("window until %v, want %v", opener.AutoApproveUntil, start.Add(5*time.Minute))
	}
	e.clock.Advance(time.Minute)

	r := e.create(e.keyA, e.toolCall("WebFetch", "s1"))
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

	mcp := e.toolCall("WebFetch", "s1")
	mcp.Kind = countersign.KindMCP
	noSession := e.toolCall("WebFetch", "")
	riskier := e.toolCall("WebFetch", "s1")
	riskier.RiskReasons = []string{"rule ask WebFetch"}
	tests := []struct {
		name  string
		agent countersign.Agent
		in    countersign.CreateInput
	}{
		{"another key", e.keyB, e.toolCall("WebFetch", "s1")},
		{"another account's key", e.keyX, e.toolCall("WebFetch", "s1")},
		{"another session", e.keyA, e.toolCall("WebFetch", "s2")},
		{"another kind", e.keyA, mcp},
		{"another tool", e.keyA, e.toolCall("Write", "s1")},
		{"no session", e.keyA, noSession},
		{"a risk reason the approved request lacked", e.keyA, riskier},
	}
	for _, tt := range tests {
		e.wantAutoApproved(tt.name, tt.agent, tt.in, false)
	}

	e.clock.Advance(4 * time.Minute) // the window closes at its Until
	e.wantAutoApproved("after the window closed", e.keyA, e.toolCall("WebFetch", "s1"), false)
}

func TestAutoApproveWindowRm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50})
	rm := func(session string, targets ...string) countersign.CreateInput {
		args, _ := json.Marshal(map[string]any{"targets": targets, "file_count": 3})
		return countersign.CreateInput{Kind: countersign.KindRm, Action: "rm -r " + strings.Join(targets, " "), Arguments: args,
			RiskReasons: []string{"recursive deletion (-r/-R)", "large deletion: 300 files (threshold 100)"}, Context: countersign.RequestContext{SessionID: session}}
	}
	e.openWindow(e.create(e.keyA, rm("s1", "/src/build", "/src/dist")), 10)
	e.clock.Advance(9 * time.Minute)

	// An rm window covers deletes within the trees the human saw, of any
	// size, and nothing else.
	more := rm("s1", "/src/build/sub")
	more.RiskReasons = []string{"recursive deletion (-r/-R)", "large deletion: 9000 files (threshold 100)"}
	e.wantAutoApproved("a delete within a tree the human saw", e.keyA, more, true)
	e.wantAutoApproved("deletes within both trees", e.keyA, rm("s1", "/src/dist/a", "/src/build"), true)
	e.wantAutoApproved("a delete outside the trees", e.keyA, rm("s1", "/src/build-old"), false)
	e.wantAutoApproved("a delete of a tree holding one the human saw", e.keyA, rm("s1", "/src"), false)
	e.wantAutoApproved("one target outside the trees", e.keyA, rm("s1", "/src/build/x", "/home/ada/.ssh"), false)
	protected := rm("s1", "/src/build/x")
	protected.RiskReasons = append(protected.RiskReasons, "protected path: /src/build/x")
	e.wantAutoApproved("a risk the approved delete lacked", e.keyA, protected, false)
	// Protection is a fact the window checks, whatever the reasons say.
	quiet := rm("s1", "/src/build/y")
	quiet.Protected = true
	e.wantAutoApproved("a protected delete whose reasons do not say so", e.keyA, quiet, false)
	noTargets := rm("s1")
	e.wantAutoApproved("a delete that names no targets", e.keyA, noTargets, false)
	e.wantAutoApproved("rm of another session", e.keyA, rm("s2", "/src/build/c"), false)
	e.wantAutoApproved("rm of another key", e.keyB, rm("s1", "/src/build/d"), false)
	tool := e.toolCall("rm", "s1")
	e.wantAutoApproved("a tool named rm", e.keyA, tool, false)
	e.clock.Advance(time.Minute)
	e.wantAutoApproved("rm after the window", e.keyA, rm("s1", "/src/build/e"), false)
}

func TestAutoApproveWindowOfOneTool(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50})
	mcp := func(tool string, tier countersign.Tier) countersign.CreateInput {
		in := e.toolCall(tool, "s1")
		in.Kind, in.Tier = countersign.KindMCP, tier
		return in
	}
	e.openWindow(e.create(e.keyA, mcp("mcp__github__create_issue", countersign.TierWrite)), 1)

	e.wantAutoApproved("same mcp tool", e.keyA, mcp("mcp__github__create_issue", countersign.TierWrite), true)
	e.wantAutoApproved("another tool of the same server", e.keyA, mcp("mcp__github__delete_repo", countersign.TierWrite), false)
	// The tier is a fact the window checks: the same tool, now of a
	// higher tier (its rule changed), or of an unknown one, is asked.
	e.wantAutoApproved("same mcp tool, of a higher tier", e.keyA, mcp("mcp__github__create_issue", countersign.TierExternal), false)
	e.wantAutoApproved("same mcp tool, of an unknown tier", e.keyA, mcp("mcp__github__create_issue", ""), false)
	e.wantAutoApproved("tool kind, same name", e.keyA, e.toolCall("mcp__github__create_issue", "s1"), false)
}

// TestAutoApprovalLastsOnlyTheWindow: an approval a window gave is usable
// while the window is open (or ConsumeGrace, when the window ends sooner),
// not for the whole life the request asked for.
func TestAutoApprovalLastsOnlyTheWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50, MaxTTL: 2 * time.Hour, ConsumeGrace: 10 * time.Second})
	e.openWindow(e.create(e.keyA, e.toolCall("WebFetch", "s1")), 1)
	e.clock.Advance(59 * time.Second)
	in := e.toolCall("WebFetch", "s1")
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
	e.openWindow(e.create(e.keyA, e.toolCall("WebFetch", "s1")), 60)
	in := e.toolCall("WebFetch", "s1")
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

// stopAfterWindows is a store on which the human's stop of the session
// lands right after a request read its windows, before it is stored.
type stopAfterWindows struct {
	countersign.Store
	stop func()
}

func (s *stopAfterWindows) ActiveWindows(ctx context.Context, keyID, sessionID string, kind countersign.Kind, action string, now time.Time) ([]*countersign.AutoApproveWindow, error) {
	list, err := s.Store.ActiveWindows(ctx, keyID, sessionID, kind, action, now)
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
	return list, err
}

// TestStopDuringWindowApproval: a stop that lands while a window lets a
// request through leaves no approval of the session usable.
func TestStopDuringWindowApproval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50})
	e.openWindow(e.create(e.keyA, e.toolCall("WebFetch", "s1")), 60)
	stop := e.create(e.keyA, e.toolCall("Read", "s1"))
	racing := &stopAfterWindows{Store: e.store, stop: func() {
		if _, err := e.svc.Decide(e.ctx, e.alice, stop.ID, countersign.DecisionInput{Decision: countersign.DecisionStop}); err != nil {
			t.Errorf("stop: %v", err)
		}
	}}
	svc := approval.New(racing, e.clock, e.hub, approval.Config{MaxPending: 50}, nil, nil)
	r, _, err := svc.Create(e.ctx, e.keyA, e.toolCall("WebFetch", "s1"))
	if err == nil && r.Status == countersign.StatusApproved {
		t.Errorf("a request the window let through as the session was stopped: %s by %q", r.Status, r.DecidedBy)
	}
	list, err := e.store.Requests(e.ctx, countersign.RequestFilter{AccountID: e.acme.ID, SessionID: "s1", Status: countersign.StatusApproved})
	if err != nil || len(list) != 0 {
		t.Errorf("approved requests of the stopped session: %d, %v; want none", len(list), err)
	}
}

// TestWindowOfOneAgent: a window approved in one coding agent's session
// lets through only that agent's calls of the session, though another
// agent names a session of the same id; an unknown agent, and a session id
// that looks prefixed, are refused.
func TestWindowOfOneAgent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50})
	as := func(agent string) countersign.CreateInput {
		in := e.toolCall("WebFetch", "s1")
		in.Context.Agent = agent
		return in
	}
	opener := e.create(e.keyA, as(countersign.AgentCodex))
	if opener.Context.SessionID != "codex:s1" || opener.Context.Agent != countersign.AgentCodex {
		t.Fatalf("codex's request has context %+v, want session codex:s1 of agent codex", opener.Context)
	}
	e.openWindow(opener, 5)
	e.wantAutoApproved("codex, same session", e.keyA, as(countersign.AgentCodex), true)
	e.wantAutoApproved("claude code, a session of the same id", e.keyA, as(countersign.AgentClaudeCode), false)
	e.wantAutoApproved("no agent named, a session of the same id", e.keyA, as(""), false)
	e.wantAutoApproved("gemini, a session of the same id", e.keyA, as(countersign.AgentGemini), false)

	claude := e.create(e.keyA, as(countersign.AgentClaudeCode))
	if claude.Context.SessionID != "s1" {
		t.Errorf("claude code's session is %q, want it as sent: s1", claude.Context.SessionID)
	}
	for name, c := range map[string]countersign.RequestContext{
		"an unknown agent":                    {SessionID: "s1", Agent: "cursor"},
		"a session that looks prefixed":       {SessionID: "codex:s1", Agent: countersign.AgentClaudeCode},
		"a prefixed session without agent":    {SessionID: "copilot:s1"},
		"a prefixed session of another agent": {SessionID: "gemini:s1", Agent: countersign.AgentCodex},
	} {
		in := as("")
		in.Context = c
		if _, _, err := e.svc.Create(e.ctx, e.keyA, in); countersign.ErrorCode(err) != countersign.EINVALID {
			t.Errorf("%s: Create err = %v, want EINVALID", name, err)
		}
	}
}
