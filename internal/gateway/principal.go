package gateway

import "github.com/countersign/countersign"

// Principal is who calls through the gateway: an agent key of an account.
// Over stdio with a server, the gateway holds one key whose id only the
// server knows, and ID stands in for it.
type Principal struct {
	ID      string
	Account string
	KeyName string
	agent   countersign.Agent
}

// PrincipalOf is the principal of an agent key the server authenticated.
func PrincipalOf(a countersign.Agent) Principal {
	return Principal{ID: a.KeyID, Account: a.AccountID, KeyName: a.KeyName, agent: a}
}

// Agent is the agent key of the principal, as the server authenticated
// it; the zero Agent for the stand-in of a key only a server knows.
func (p Principal) Agent() countersign.Agent { return p.agent }
