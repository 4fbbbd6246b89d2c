package cli

import (
	"os"
	"testing"
	_ "unsafe" // go:linkname

	_ "github.com/countersign/countersign/internal/identity"
)

// argonCost is identity's cost of new password hashes, which a build sets
// with -ldflags -X; go test cannot, so TestMain sets it here instead.
// With "test" a hash takes one pass over 64 KiB instead of three over
// 64 MiB, and every check of it as little: the tests here hash and check
// dozens of passwords. internal/identity's TestPasswordHashCost checks
// the release parameters.
//
//go:linkname argonCost github.com/countersign/countersign/internal/identity.argonCost
var argonCost string

func TestMain(m *testing.M) {
	argonCost = "test"
	os.Exit(m.Run())
}
