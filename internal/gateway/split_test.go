package gateway_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// TestMirrorApart: the mirror knows nothing of approvals. Neither it nor
// anything it imports is the approval service or the API's client: a call
// that needs a human goes to the confirmation (package confirm) through
// the Confirmer interface only.
func TestMirrorApart(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testutil.Missing(t, "the go command is not on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !slices.Contains(deps, "github.com/countersign/countersign/internal/gateway") {
		t.Fatalf("go list -deps listed %d packages, not the gateway's: %q", len(deps), deps)
	}
	const mod = "github.com/countersign/countersign/"
	for _, banned := range []string{mod + "internal/approval", mod + "client", mod + "client/api", mod + "internal/identity"} {
		if slices.Contains(deps, banned) {
			t.Errorf("the mirror depends on %s", banned)
		}
	}
}
