package server_test

import (
	"os"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// TestMain runs four parallel tests for each processor: they mostly wait
// on connections, deadlines and timers.
func TestMain(m *testing.M) {
	testutil.WaitingParallel(4)
	os.Exit(m.Run())
}
