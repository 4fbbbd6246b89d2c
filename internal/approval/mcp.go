package approval

import (
	"context"
	"encoding/json"

	"github.com/countersign/countersign"
)

// TakeApproval uses an approval without its id: it consumes an approved,
// unexpired request of the agent's own key whose binding (kind, action,
// argument hash, preview hash) and tier are the ones of in, in one conditional store
// step, and returns it. The MCP gateway calls it when a model retries a
// call that a human approved in the inbox: the model holds no request id,
// only the call, and the retry must take the approval once, and only with
// the same arguments and the same key.
//
// A request an approver edited before approving it binds the edited
// call, but the model retries the one it asked about (a gateway that
// restarted holds no id to ask for): when nothing has the call's binding,
// the approval whose original does is taken, and returned with the
// edited arguments to run, if ctx says the caller runs them
// (AcceptEdits); otherwise it is ErrEditNotAccepted and stays unused.
// Errors: EINVALID for arguments that are not JSON, ENOTFOUND when no
// approval matches, ECONFLICT (ErrEditNotAccepted).
func (s *Service) TakeApproval(ctx context.Context, agent countersign.Agent, in countersign.CreateInput) (*countersign.Request, error) {
	if in.Kind == "" {
		in.Kind = countersign.KindGeneric
	}
	if err := checkFacts(in); err != nil {
		return nil, err
	}
	b, err := Bind(in.Action, in.Arguments, in.Preview)
	if err != nil {
		return nil, argumentsError(err)
	}
	detail, _ := json.Marshal(map[string]string{
		"kind": string(in.Kind), "action": in.Action, "args_hash": b.ArgsHash,
		"preview_hash": b.PreviewHash, "via": "retry",
	})
	r, err := s.store.ConsumeApproved(ctx, agent.KeyID, in.Kind, in.Action, b.ArgsHash, b.PreviewHash, in.Tier, EditsAccepted(ctx), s.clock.Now(),
		countersign.AuditEvent{Event: "consumed", Actor: "key:" + agent.KeyID, Detail: string(detail)})
	if err != nil {
		return nil, sameNotFound(err)
	}
	s.hub.Notify(r.ID)
	s.hub.Notify(AccountTopic(r.AccountID))
	s.metrics.entered(r)
	s.log.Info("approval taken by a retry", "request", r.ID, "reference", r.Reference, "kind", r.Kind, "key", r.KeyID,
		"edited", r.Original != nil)
	return r, nil
}
