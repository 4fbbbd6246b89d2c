package approval_test

import (
	"slices"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// usedHookApproval creates the hook's request in, approves it once and
// consumes it, as the hook does before the line runs.
func (e *env) usedHookApproval(in countersign.CreateInput) *countersign.Request {
	e.t.Helper()
	h := e.create(e.keyA, in)
	e.decide(h.ID, countersign.DecisionApprove)
	if _, err := e.svc.Consume(e.ctx, e.keyA, h.ID); err != nil {
		e.t.Fatalf("consume: %v", err)
	}
	return h
}

// TestHookApprovalCoversOnlyItsDeletes: the paths a Bash request says its
// line deletes cover the wrapper's delete only when the line shown to the
// human deletes them; a request that names paths its line does not delete
// covers nothing, and the delete is asked.
func TestHookApprovalCoversOnlyItsDeletes(t *testing.T) {
	t.Parallel()
	rm := []string{"rm"}
	cases := []struct {
		name   string
		in     countersign.CreateInput
		covers bool
	}{
		{"rm -rf victim", bash("s1", "rm -rf victim", rm, []string{"/src/victim"}, recursive), true},
		{"rm -rf /src/victim", bash("s1", "rm -rf /src/victim", rm, []string{"/src/victim"}, recursive), true},
		{"cd and rm", bash("s1", "cd /src && rm -rf victim", []string{"cd", "rm"}, []string{"/src/victim"}, recursive), true},
		{"ls -la naming a path", bash("s1", "ls -la", []string{"ls"}, []string{"/src/victim"}, recursive), false},
		{"echo of an rm", bash("s1", "echo rm -rf victim", []string{"echo"}, []string{"/src/victim"}, recursive), false},
		{"rm of another tree", bash("s1", "rm -rf build", rm, []string{"/src/victim"}, recursive), false},
		{"rm from another directory", bash("s1", "cd /tmp && rm -rf victim", []string{"cd", "rm"}, []string{"/src/victim"}, recursive), false},
		{"rm of a computed path", bash("s1", "rm -rf $V", rm, []string{"/src/victim"}, recursive), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, approval.Config{MaxPending: 50})
			h := e.usedHookApproval(c.in)
			want := []string(nil)
			if c.covers {
				want = []string{"/src/victim"}
			}
			if got := approval.CoveredDeletes(h); !slices.Equal(got, want) {
				t.Errorf("CoveredDeletes = %q, want %q", got, want)
			}
			r := e.create(e.keyA, wrapperRm("s1", h.ID, 3, 100, "/src/victim"))
			covered := r.Status == countersign.StatusApproved && r.DecidedBy == countersign.DecidedByCoverage
			if covered != c.covers {
				t.Errorf("the wrapper's delete of /src/victim: %s by %q, covered=%v, want %v", r.Status, r.DecidedBy, covered, c.covers)
			}
		})
	}
}

// TestCoveredDeletesNeedsAHookCall: only a Bash call of an agent session
// covers a delete.
func TestCoveredDeletesNeedsAHookCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 50})
	noSession := bash("", "rm -rf victim", []string{"rm"}, []string{"/src/victim"}, recursive)
	write := e.toolCall("Write", "s1")
	write.Scope = &countersign.Scope{StatedScope: countersign.StatedScope{Paths: []string{"/src/victim"}}}
	for name, in := range map[string]countersign.CreateInput{"no session": noSession, "a Write call": write} {
		if got := approval.CoveredDeletes(e.create(e.keyA, in)); got != nil {
			t.Errorf("%s: CoveredDeletes = %q, want none", name, got)
		}
	}
}
