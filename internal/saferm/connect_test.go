package saferm_test

import (
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/saferm"
)

// connect asks the test's server over HTTP, as the countersign binary
// does: accepting an approver's edit, which the caller runs.
func connect(serverURL, credential string) saferm.Server {
	c := client.New(serverURL, credential)
	c.AcceptEdits = true
	return c
}
