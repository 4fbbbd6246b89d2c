package saferm

import (
	"testing"

	"github.com/countersign/countersign/internal/bashscope"
)

// TestCoverLineNamesTheWrappersVariables: the line a hook approval puts
// before a command sets the variables the wrapper reads.
func TestCoverLineNamesTheWrappersVariables(t *testing.T) {
	got := bashscope.CoverLine("req_1", "s 1", "")
	if want := "export " + EnvApproval + "=req_1 " + EnvSession + "='s 1'\n"; got != want {
		t.Errorf("CoverLine = %q, want %q", got, want)
	}
	got = bashscope.CoverLine("req_1", "s 1", "codex")
	if want := "export " + EnvApproval + "=req_1 " + EnvSession + "='s 1' " + EnvAgent + "=codex\n"; got != want {
		t.Errorf("CoverLine of codex = %q, want %q", got, want)
	}
}
