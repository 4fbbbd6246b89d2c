package approval

import (
	"context"

	"github.com/countersign/countersign"
)

// DecidedByElicitation is the DecidedBy of a request decided by the answer
// of an MCP client to the gateway's form elicitation: where the operator
// marked the key's client as answered by a person (elicitation_decides).
const DecidedByElicitation = "elicitation"

// DecideByElicitation records the answer of the agent's MCP client to the
// form elicitation about its own request id as the decision: Accept
// approves, anything else denies. The caller checks that the operator lets
// this key's answers decide; here the request must be the key's own, of
// kind mcp, and pending, and an approval that needs a passkey is refused
// with ErrPasskeyNeeded: a step-up is never answered by a client.
// Errors: ENOTFOUND, ECONFLICT, EFORBIDDEN.
func (s *Service) DecideByElicitation(ctx context.Context, agent countersign.Agent, id string, approve bool) (*countersign.Request, error) {
	r, err := s.Get(ctx, agent, id)
	if err != nil {
		return nil, err
	}
	if r.Kind != countersign.KindMCP {
		return nil, countersign.Errorf(countersign.EFORBIDDEN, "only an MCP call is decided by its client's answer")
	}
	if err := s.checkTeams(ctx); err != nil {
		return nil, err
	}
	if rule := s.cfg.Teams.Rule(r); rule != nil && (rule.Routed() || rule.Votes()) {
		return nil, ErrNeedsApprover(rule)
	}
	d := countersign.DecisionInput{Decision: countersign.DecisionDeny}
	if approve {
		d.Decision = countersign.DecisionApprove
		if s.cfg.StepUp.Requires(r, d) {
			return nil, ErrPasskeyNeeded
		}
	}
	to, _ := d.Decision.Status()
	ap := countersign.ApproverPrincipal{Username: DecidedByElicitation, AccountID: r.AccountID, Role: countersign.RoleApprover}
	return s.decide(ctx, ap, r.ID, to, d, r, &agent)
}

// ElicitationDecides reports whether an Accept of the agent's client could
// approve its request id, were the key allowed to decide: the request is
// its own, pending, and needs no passkey.
func (s *Service) ElicitationDecides(ctx context.Context, agent countersign.Agent, id string) bool {
	r, err := s.Get(ctx, agent, id)
	if err != nil || r.Status != countersign.StatusPending || r.Kind != countersign.KindMCP {
		return false
	}
	if rule := s.cfg.Teams.Rule(r); rule != nil && (rule.Routed() || rule.Votes()) {
		return false
	}
	if s.checkTeams(ctx) != nil {
		return false
	}
	return !s.cfg.StepUp.Requires(r, countersign.DecisionInput{Decision: countersign.DecisionApprove})
}
