package identity_test

import (
	"go/build"
	"slices"
	"testing"
)

// TestApartFromApproval: identity and approval meet only in the root
// package's types (a step-up's proof is a countersign.Verification) and in
// the composition root that wires them; neither imports the other.
func TestApartFromApproval(t *testing.T) {
	const mod = "github.com/countersign/countersign/internal/"
	for dir, other := range map[string]string{".": mod + "approval", "../approval": mod + "identity"} {
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(p.Imports, other) {
			t.Errorf("package %s imports %s", p.Name, other)
		}
	}
}
