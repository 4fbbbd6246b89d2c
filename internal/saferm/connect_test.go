package saferm_test

import (
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/saferm"
)

// connect asks the test's server over HTTP, as the countersign binary does.
func connect(serverURL, credential string) saferm.Server { return client.New(serverURL, credential) }
