package countersign

import "time"

// Coverage records that an approval of the Claude Code hook covered one
// delete of the rm wrapper. An approval covers at most one.
type Coverage struct {
	ApprovalID string // the hook's approved request
	RequestID  string // the wrapper's request it covered
	CreatedAt  time.Time
}

// ApprovedByCoverage reports whether r is stored approved because an
// approval of the Claude Code hook covered it: the store then checks, as
// it inserts r, that r's claim on that approval was made and that no stop
// of the session has come since (ErrSessionStopped).
func (r *Request) ApprovedByCoverage() bool {
	return r.Status == StatusApproved && r.DecidedBy == DecidedByCoverage
}

// ErrSessionStopped is the conflict of a delete whose covering approval a
// stop of its session ended while the delete was asked.
func ErrSessionStopped() *Error {
	return Errorf(ECONFLICT, "the agent session was stopped while the request was made; ask again")
}

// ErrCoverageClaimed is the conflict of an approval that already covered a
// delete: an approval covers one.
func ErrCoverageClaimed() *Error {
	return Errorf(ECONFLICT, "this approval already covered a delete")
}
