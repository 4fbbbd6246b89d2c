package approval

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/bashscope"
)

// maxCallID bounds an agent's id of a tool call.
const maxCallID = 200

// ReportRan records what a coding agent's hook reports it ran for one of
// its calls, once the call is done, against the approval the call
// consumed: the consumed request of the agent's key whose context names
// the same agent, session and call id. The call as it ran is compared
// with the approval's binding (the tool, and the hash of its canonical
// arguments), the cover line the hook put before an approved Bash command
// taken off when it is exactly the one this approval gave; the first
// report of a request writes ran_as_approved or ran_other_than_approved
// to the audit log, and a later one changes nothing. It returns the
// request with what ran. A call no request was made for (allowed without
// asking) is not found. Errors: EINVALID, ENOTFOUND.
func (s *Service) ReportRan(ctx context.Context, agent countersign.Agent, in countersign.RanReport) (*countersign.Request, error) {
	args, err := checkRan(in)
	if err != nil {
		return nil, err
	}
	r, err := s.store.RequestByCall(ctx, agent.KeyID, countersign.AgentSession(in.Agent, in.SessionID), in.CallID)
	if err != nil {
		return nil, sameNotFound(err)
	}
	if r.AccountID != agent.AccountID || r.Context.Agent != in.Agent {
		return nil, notFound()
	}
	if r.Ran.Reported() {
		return r, nil
	}
	args, err = Canonical(uncovered(r, in, args))
	if err != nil {
		return nil, argumentsError(err)
	}
	ran := countersign.Ran{At: s.clock.Now(), Action: in.Action, ArgsHash: Hash(args)}
	ev := ranEvent(agent, r, ran)
	got, err := s.store.RecordRan(ctx, r.ID, ran, ev)
	if countersign.ErrorCode(err) == countersign.ECONFLICT {
		// Another report came first: it stands.
		return s.store.Request(ctx, r.ID)
	} else if err != nil {
		return nil, err
	}
	s.hub.Notify(got.ID)
	s.hub.Notify(AccountTopic(got.AccountID))
	if got.RanOther() {
		s.log.Warn("what ran is not what was approved", "request", got.ID, "reference", got.Reference, "account", got.AccountID,
			"key", got.KeyID, "action", got.Action, "ran_action", ran.Action)
	}
	return got, nil
}

// checkRan validates a report of what ran and returns its arguments in
// canonical form. The texts are bounded as a request's are: a report
// names the call as its request did.
func checkRan(in countersign.RanReport) (json.RawMessage, error) {
	if err := humanText("call_id", in.CallID, maxCallID, true, false); err != nil {
		return nil, err
	}
	if err := humanText("session_id", in.SessionID, maxContext, false, false); err != nil {
		return nil, err
	}
	if err := countersign.CheckAgent(countersign.RequestContext{Agent: in.Agent, SessionID: in.SessionID}); err != nil {
		return nil, err
	}
	if err := humanText("action", in.Action, maxAction, true, false); err != nil {
		return nil, err
	}
	return boundedArguments(in.Arguments)
}

// uncovered returns the arguments of a Bash call as it ran without the
// cover line the hook put before the command of the approval r
// (bashscope.CoverLine), when the approval gave one: exactly that line,
// for this approval and the session the hook named. Anything else before
// the command is a change, and stays.
func uncovered(r *countersign.Request, in countersign.RanReport, args json.RawMessage) json.RawMessage {
	// An edited approval's scope is the server's judgement of the edit,
	// which the hook's own (it expands globs on the agent's files) may
	// exceed: its cover line is looked for whatever the scope says.
	if r.Action != "Bash" || in.Action != "Bash" || !(coverable(r) || r.Original != nil) || in.SessionID == "" {
		return args
	}
	var fields map[string]json.RawMessage
	var cmd string
	if json.Unmarshal(args, &fields) != nil || json.Unmarshal(fields["command"], &cmd) != nil {
		return args
	}
	rest, ok := strings.CutPrefix(cmd, bashscope.CoverLine(r.ID, in.SessionID, r.Context.Agent))
	if !ok {
		return args
	}
	raw, err := json.Marshal(rest)
	if err != nil {
		return args
	}
	fields["command"] = raw
	out, err := json.Marshal(fields)
	if err != nil {
		return args
	}
	return out
}

// coverable reports whether the hook gives an approval of r a cover line:
// a Bash call whose deletes run through the rm wrapper (the scope names
// rm and the paths it deletes).
func coverable(r *countersign.Request) bool {
	return r.Scope != nil && len(r.Scope.Paths) > 0 && slices.Contains(r.Scope.Commands, "rm")
}

// ranEvent is the audit entry of a report: whether what ran is what was
// approved, with both bindings.
func ranEvent(agent countersign.Agent, r *countersign.Request, ran countersign.Ran) countersign.AuditEvent {
	ev := countersign.AuditEvent{Event: countersign.AuditRanAsApproved, Actor: "key:" + agent.KeyID}
	if ran.Action != r.Action || ran.ArgsHash != r.ArgsHash {
		ev.Event = countersign.AuditRanOtherThanApproved
	}
	d, _ := json.Marshal(map[string]string{
		"call_id": r.Context.CallID, "approved_action": r.Action, "approved_args_hash": r.ArgsHash,
		"ran_action": ran.Action, "ran_args_hash": ran.ArgsHash,
	})
	ev.Detail = string(d)
	return ev
}
