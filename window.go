package countersign

import "time"

// AutoApproveWindow lets requests of one agent key's session through without
// asking, until it closes. It never widens beyond its scope.
type AutoApproveWindow struct {
	ID        string
	AccountID string
	KeyID     string
	SessionID string
	Kind      Kind
	Action    string // empty for kinds that are not scoped to a tool
	Until     time.Time
	CreatedAt time.Time
	RequestID string // the approval that opened it
	// Scope is the shape of the approved request: the window covers only
	// requests within it (nil: a window from before scopes, which covers
	// only requests of tools that have no shape beyond their name).
	Scope *Scope
}

// OpenedBy returns w as the approval r opens it at now: the window takes
// its account, key and request from r where w leaves them empty, and may
// not name another, since a window never widens beyond the key that
// asked. A new window gets an id and its creation time. Errors: EINVALID.
func (w AutoApproveWindow) OpenedBy(r *Request, now time.Time) (AutoApproveWindow, error) {
	if (w.AccountID != "" && w.AccountID != r.AccountID) || (w.KeyID != "" && w.KeyID != r.KeyID) ||
		(w.RequestID != "" && w.RequestID != r.ID) {
		return w, Errorf(EINVALID, "an auto-approve window belongs to the request that opened it")
	}
	if w.ID == "" {
		w.ID = NewID("win_")
	}
	w.AccountID, w.KeyID, w.RequestID = r.AccountID, r.KeyID, r.ID
	if w.CreatedAt.IsZero() {
		w.CreatedAt = now
	}
	return w, nil
}

// ApprovedByWindow reports whether r is stored approved because an
// auto-approve window let it through: the store then checks, as it
// inserts r, that the window is as it was read and that no stop of the
// session ended it in between (ErrWindowClosed).
func (r *Request) ApprovedByWindow() bool {
	return r.Status == StatusApproved && r.DecidedBy == DecidedByAutoApprove
}

// ErrWindowClosed is the conflict of a request whose auto-approve window
// a stop of its session closed while the request was made.
func ErrWindowClosed() *Error {
	return Errorf(ECONFLICT, "the auto-approve window of this agent session closed while the request was made (the session was stopped); ask again")
}
