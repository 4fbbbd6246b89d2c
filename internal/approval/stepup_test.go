package approval_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// TestStepUpPolicy: the approvals the default policy names, by the typed
// facts of a request (its kind, tier, protection) and never by the
// wording of its risk reasons, are refused without a verification of
// exactly that decision; deny stays possible, and a plain request is
// approved as before.
func TestStepUpPolicy(t *testing.T) {
	e := newEnv(t, approval.Config{StepUp: approval.DefaultStepUp})
	mcp := func(tier countersign.Tier, reasons ...string) countersign.CreateInput {
		in := e.toolCall("files.write", "s1")
		in.Kind, in.Tier, in.RiskReasons = countersign.KindMCP, tier, reasons
		return in
	}
	rm := func(protected bool, reason string) countersign.CreateInput {
		in := e.toolCall("rm -rf x", "s1")
		in.Kind, in.Protected, in.RiskReasons = countersign.KindRm, protected, []string{reason}
		return in
	}
	for _, tt := range []struct {
		name    string
		in      countersign.CreateInput
		minutes int
		needs   bool
	}{
		{"mcp commit", mcp(countersign.TierCommit, approval.TierReason(countersign.TierCommit)), 0, true},
		{"mcp external", mcp(countersign.TierExternal, approval.TierReason(countersign.TierExternal)), 0, true},
		{"mcp external without reasons", mcp(countersign.TierExternal), 0, true},
		{"mcp of an unknown tier", mcp(""), 0, true},
		{"mcp write", mcp(countersign.TierWrite, approval.TierReason(countersign.TierWrite)), 0, false},
		{"rm of a protected path", rm(true, "protected path: /etc (inside /)"), 0, true},
		{"rm of a protected path, said only by an older client's reason", rm(false, "protected path: /etc (inside /)"), 0, true},
		{"rm of a protected path without the reason", rm(true, "recursive deletion (-r/-R)"), 0, true},
		{"rm of many files", rm(false, "recursive delete of 120 files"), 0, false},
		{"the hook's rm of a protected path", func() countersign.CreateInput {
			in := e.toolCall("Bash", "s3")
			in.Protected, in.RiskReasons = true, []string{"protected path: ~/.ssh"}
			return in
		}(), 0, true},
		{"a window on a plain tool", e.toolCall("Bash", "s1"), 5, true},
		{"a plain tool", e.toolCall("Bash", "s2"), 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.create(e.keyA, tt.in)
			before := e.auditCount()
			d := countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: tt.minutes}
			_, err := e.svc.Decide(e.ctx, e.alice, r.ID, d)
			if !tt.needs {
				if err != nil {
					t.Fatalf("Decide of a request without step-up: %v", err)
				}
				return
			}
			if !errors.Is(err, approval.ErrPasskeyNeeded) {
				t.Fatalf("Decide without a passkey: %v, want ErrPasskeyNeeded", err)
			}
			if e.auditCount() != before {
				t.Fatal("a refused approval wrote to the audit log")
			}
			e.wantStatus(r.ID, countersign.StatusPending)
			// By reference code, the same.
			if _, err := e.svc.Decide(e.ctx, e.alice, r.Reference, d); !errors.Is(err, approval.ErrPasskeyNeeded) {
				t.Fatalf("Decide by reference without a passkey: %v", err)
			}

			// A verification of another request, decision or window
			// does not pass.
			good := &countersign.Verification{Method: "webauthn", CredentialID: "Y3JlZA", PasskeyID: "pk_1", RequestID: r.ID,
				BindingHash: r.BindingHash(), Decision: countersign.DecisionApprove, Minutes: tt.minutes}
			for _, bad := range []func(v *countersign.Verification){
				func(v *countersign.Verification) { v.RequestID = "req_other" },
				func(v *countersign.Verification) { v.BindingHash = strings.Repeat("0", 64) },
				func(v *countersign.Verification) { v.Minutes = tt.minutes + 1 },
				func(v *countersign.Verification) { v.Method = "" },
			} {
				v := *good
				bad(&v)
				d.Verified = &v
				if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, d); !errors.Is(err, approval.ErrPasskeyNeeded) {
					t.Fatalf("Decide with a verification of something else (%+v): %v", v, err)
				}
			}
			d.Verified = good
			got, err := e.svc.Decide(e.ctx, e.alice, r.ID, d)
			if err != nil || got.Status != countersign.StatusApproved {
				t.Fatalf("Decide with the verification: %v, %v", got, err)
			}
			entries, _ := e.store.AuditLog(e.ctx, 0, 100000)
			last := entries[len(entries)-1]
			if last.Event != "approved" || !strings.Contains(last.Detail, `"verified":"webauthn"`) || !strings.Contains(last.Detail, `"credential_id":"Y3JlZA"`) {
				t.Fatalf("audit entry of a verified approval: %s %s", last.Event, last.Detail)
			}
		})
	}

	// Deny, answer and stop of a step-up request need no passkey.
	for _, d := range []countersign.DecisionInput{
		{Decision: countersign.DecisionDeny},
		{Decision: countersign.DecisionRespond, Text: "no"},
		{Decision: countersign.DecisionStop},
	} {
		r := e.create(e.keyA, mcp(countersign.TierCommit))
		if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, d); err != nil {
			t.Fatalf("%s of a step-up request: %v", d.Decision, err)
		}
	}
}

// TestParseStepUp: rules of the policy setting, and its mistakes. The
// reason field of older settings is read as protected=true where it said
// that, and refused where it named other wording.
func TestParseStepUp(t *testing.T) {
	p, err := approval.ParseStepUp("kind=tool, tool=mcp__*__delete*; protected=true; kind=mcp,tier=commit; window")
	if err != nil {
		t.Fatal(err)
	}
	want := []approval.StepUpRule{{Kind: countersign.KindTool, Tool: "mcp__*__delete*"}, {Protected: true},
		{Kind: countersign.KindMCP, Tier: countersign.TierCommit}}
	if !slices.Equal(p.Rules, want) || !p.Windows {
		t.Fatalf("parsed %+v, want %+v and windows", p, want)
	}
	tool := &countersign.Request{Kind: countersign.KindTool, Action: "mcp__fs__delete_file"}
	if !p.Matches(tool) {
		t.Error("the tool glob does not match mcp__fs__delete_file")
	}
	if p.Matches(&countersign.Request{Kind: countersign.KindTool, Action: "mcp__fs__read"}) {
		t.Error("the tool glob matches mcp__fs__read")
	}
	for _, tt := range []struct {
		r    countersign.Request
		want bool
	}{
		{countersign.Request{Kind: countersign.KindRm, Protected: true}, true},
		{countersign.Request{Kind: countersign.KindRm, RiskReasons: []string{"protected path: /etc"}}, false},
		{countersign.Request{Kind: countersign.KindMCP, Tier: countersign.TierCommit}, true},
		{countersign.Request{Kind: countersign.KindMCP, Tier: countersign.TierWrite, RiskReasons: []string{"tier: commit"}}, false},
		{countersign.Request{Kind: countersign.KindMCP}, true}, // an unknown tier fails closed
		{countersign.Request{Kind: countersign.KindGeneric}, false},
	} {
		if got := p.Matches(&tt.r); got != tt.want {
			t.Errorf("Matches(%+v) = %v, want %v", tt.r, got, tt.want)
		}
	}
	for _, old := range []string{"reason=protected path: *", "kind=rm, reason=protected path:*"} {
		p, err := approval.ParseStepUp(old)
		if err != nil || len(p.Rules) != 1 || !p.Rules[0].Protected {
			t.Errorf("ParseStepUp(%q) = %+v, %v; want a rule on protected", old, p, err)
		}
	}
	if none, _ := approval.ParseStepUp("none"); none.Active() {
		t.Error(`"none" is active`)
	}
	for bad, says := range map[string]string{
		"kind=disk":                   "no kind",
		"colour=red":                  "no field",
		"kind":                        "not field=value",
		"tier=dangerous":              "no tier",
		"tier=\x02":                   "no tier",
		"protected=false":             "protected can only be true",
		"reason=tier: commit":         "no longer",
		"kind=tool,reason=*rm -rf*":   "no longer",
		"reason=protected path: /etc": "no longer",
	} {
		if _, err := approval.ParseStepUp(bad); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("ParseStepUp(%q) = %v, want an error saying %q", bad, err, says)
		}
	}
}
