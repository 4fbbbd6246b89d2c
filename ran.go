package countersign

import (
	"encoding/json"
	"time"
)

// Ran is what a coding agent's hook reported it ran under an approval,
// after the call was done: the tool and the hash of its arguments, in
// the request's own binding (the cover line the hook put before an
// approved Bash command taken off), and when the report came.
type Ran struct {
	At       time.Time
	Action   string
	ArgsHash string
}

// Reported reports whether the agent reported what ran.
func (r Ran) Reported() bool { return !r.At.IsZero() }

// RanOther reports whether the agent reported that what ran is not what
// the request's approval was for: another tool, or other arguments (a
// hook or a plugin after countersign's rewrote the call).
func (r *Request) RanOther() bool {
	return r.Ran.Reported() && (r.Ran.Action != r.Action || r.Ran.ArgsHash != r.ArgsHash)
}

// RanReport is what a coding agent's hook reports after a tool call ran:
// the agent's id of the call, the session and agent it ran in (as the
// request's context named them when the hook asked), and the call as it
// ran.
type RanReport struct {
	CallID    string
	SessionID string
	Agent     string
	Action    string
	Arguments json.RawMessage
}

// The audit events of a report of what ran: once per request, the first
// report decides which.
const (
	AuditRanAsApproved        = "ran_as_approved"
	AuditRanOtherThanApproved = "ran_other_than_approved"
)
