package claudehook

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestBudget checks that every bound of the analysis denies, with the
// reason, instead of running on: the hook must answer before its deadline
// whatever the command holds.
func TestBudget(t *testing.T) {
	w := newWorld(t)
	p := w.policy()
	deep := strings.Repeat("$(", 100) + strings.Repeat(")", 100)
	tests := []struct {
		name, cmd, reason string
	}{
		{"long", "echo '" + strings.Repeat("x", maxCommandBytes) + "'", "KiB long"},
		{"deep", "echo " + deep, "nest more than 64"},
		{"deep in a quoted script", "bash -c 'echo " + deep + "'", "nest more than 64"},
		{"deep in eval", `eval "echo $(printf x)" && sh -c 'sh -c "echo ` + strings.Repeat("{ ", 70) + `"'`, "nest more than 64"},
		{"deep behind quoted brackets", "echo " + strings.Repeat(`$(echo ')' `, 100) + strings.Repeat(")", 100), "nest more than 64"},
		{"deep behind a quote", `echo "it's" ` + deep, "nest more than 64"},
		{"deep compound commands", strings.Repeat("if true; then ", 70) + "ls" + strings.Repeat("; fi", 70), "nest more than 64"},
		{"many commands", strings.Repeat("true;", maxCommands+1), "more than 2000 commands"},
		{"many deletes", strings.Repeat("rm -f a.txt;", maxDeletes+1), "more than 64 deletes"},
		{"many find deletes", strings.Repeat("find build -delete;", maxDeletes+1), "more than 64 deletes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := w.bash(p, tt.cmd)
			if v.Action != Deny || !v.Unchecked || !strings.Contains(strings.Join(v.Reasons, "; "), tt.reason) {
				t.Errorf("got %v %v (unchecked %v), want deny for %q", v.Action, v.Reasons, v.Unchecked, tt.reason)
			}
		})
	}
	// Just under the bounds, the analysis finishes and judges.
	if v := w.bash(p, "echo "+strings.Repeat("$(", 60)+strings.Repeat(")", 60)); v.Unchecked {
		t.Errorf("60 levels: %v", v.Reasons)
	}
	if v := w.bash(p, strings.Repeat("ls && ", 1000)+"ls"); v.Unchecked {
		t.Errorf("a chain of 1,000 commands: %v", v.Reasons)
	}
	if v := w.bash(p, strings.Repeat("rm -rf build;", maxDeletes)); v.Unchecked || v.Action != Ask {
		t.Errorf("%d deletes: %v %v", maxDeletes, v.Action, v.Reasons)
	}
}

// TestBudgetDeadline checks that an analysis whose time is up denies.
func TestBudgetDeadline(t *testing.T) {
	w := newWorld(t)
	p := w.policy()
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	v := p.Decide(ctx, &Call{Tool: "Bash", Command: "rm -rf build", Cwd: w.project, Project: w.project})
	if v.Action != Deny || !v.Unchecked || !strings.Contains(v.Reasons[0], "deadline") {
		t.Errorf("got %v %v", v.Action, v.Reasons)
	}
}
