package approval_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// TestStepUpPolicy: the approvals the default policy names are refused
// without a verification of exactly that decision, deny stays possible,
// and a plain request is approved as before.
func TestStepUpPolicy(t *testing.T) {
	e := newEnv(t, approval.Config{StepUp: approval.DefaultStepUp})
	mcp := func(tier string) countersign.CreateInput {
		in := e.toolCall("files.write", "s1")
		in.Kind, in.RiskReasons = countersign.KindMCP, []string{approval.TierReason(tier)}
		return in
	}
	rm := func(reason string) countersign.CreateInput {
		in := e.toolCall("rm -rf x", "s1")
		in.Kind, in.RiskReasons = countersign.KindRm, []string{reason}
		return in
	}
	for _, tt := range []struct {
		name    string
		in      countersign.CreateInput
		minutes int
		needs   bool
	}{
		{"mcp commit", mcp("commit"), 0, true},
		{"mcp external", mcp("external"), 0, true},
		{"mcp write", mcp("write"), 0, false},
		{"rm of a protected path", rm("protected path: /etc (inside /)"), 0, true},
		{"rm of many files", rm("recursive delete of 120 files"), 0, false},
		{"the hook's rm of a protected path", func() countersign.CreateInput {
			in := e.toolCall("Bash", "s3")
			in.RiskReasons = []string{"protected path: ~/.ssh"}
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
				BindingHash: approval.BindingHash(r), Decision: countersign.DecisionApprove, Minutes: tt.minutes}
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
		r := e.create(e.keyA, mcp("commit"))
		if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, d); err != nil {
			t.Fatalf("%s of a step-up request: %v", d.Decision, err)
		}
	}
}

// TestParseStepUp: rules of the policy setting, and its mistakes.
func TestParseStepUp(t *testing.T) {
	p, err := approval.ParseStepUp("kind=tool, tool=mcp__*__delete*; reason=protected path: *; window")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules) != 2 || !p.Windows || p.Rules[0].Kind != countersign.KindTool || p.Rules[0].Tool != "mcp__*__delete*" {
		t.Fatalf("parsed %+v", p)
	}
	tool := &countersign.Request{Kind: countersign.KindTool, Action: "mcp__fs__delete_file"}
	if !p.Matches(tool) {
		t.Error("the tool glob does not match mcp__fs__delete_file")
	}
	if p.Matches(&countersign.Request{Kind: countersign.KindTool, Action: "mcp__fs__read"}) {
		t.Error("the tool glob matches mcp__fs__read")
	}
	if none, _ := approval.ParseStepUp("none"); none.Active() {
		t.Error(`"none" is active`)
	}
	for _, bad := range []string{"kind=disk", "colour=red", "kind"} {
		if _, err := approval.ParseStepUp(bad); err == nil {
			t.Errorf("ParseStepUp(%q) passed", bad)
		}
	}
}

// TestPasskeyOnlyPassword: an approver without a password is refused as a
// wrong password is, with the same message, whatever is typed.
func TestPasskeyOnlyPassword(t *testing.T) {
	e := newEnv(t, approval.Config{})
	if _, err := e.store.SetPassword(e.ctx, e.alice.ApproverID, "", false, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	s := &approval.Sessions{Store: e.store, Clock: e.clock}
	_, _, wrong := s.SignIn(e.ctx, "bob", "not the password", "c", "ua")
	for _, pw := range []string{"", "a long test password", "countersign-no-such-approver"} {
		_, _, err := s.SignIn(e.ctx, "alice", pw, "c", "ua")
		if countersign.ErrorCode(err) != countersign.EUNAUTHORIZED || countersign.ErrorMessage(err) != countersign.ErrorMessage(wrong) {
			t.Fatalf("SignIn of a passkey-only approver with %q: %v, want %v", pw, err, wrong)
		}
	}
}
