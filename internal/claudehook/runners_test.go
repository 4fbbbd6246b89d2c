package claudehook

import (
	"testing"

	"github.com/countersign/countersign/internal/bashscope"
)

// TestRunnersKnownToServer: every command the hook follows into another
// command (its wrappers, shells and interpreters, and those it handles
// itself) is one the server's judgement of an approver's edited Bash line
// counts as running others (bashscope.Runner), so that a delete behind it
// makes the edit protected there too.
func TestRunnersKnownToServer(t *testing.T) {
	t.Parallel()
	names := []string{"busybox", "watch", "ssh", "su", "xargs", "eval", "source", ".", "trap"}
	for name := range wrappers {
		names = append(names, name)
	}
	names = append(append(names, shells...), interpreters...)
	for _, name := range names {
		if !bashscope.Runner(name) {
			t.Errorf("%s runs another command for the hook, but not for the server's judgement of an edit", name)
		}
	}
}
