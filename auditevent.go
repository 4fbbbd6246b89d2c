package countersign

import (
	"encoding/json"
	"strings"
)

// Bounds of an audit event appended on its own (Store.AppendAudit): the
// entries are short facts, never a payload.
const (
	MaxAuditEvent  = 64
	MaxAuditActor  = 200
	MaxAuditDetail = 4 << 10
)

// AuditEvent is what happened, to be written to the audit log.
type AuditEvent struct {
	Event  string // created, auto_approved, approved, denied, responded, stopped, consumed, cancelled, expired
	Actor  string // "key:<id>", "approver:<username>", "system"
	Detail string // a short JSON object with the binding or the reason
}

// CheckAuditEvent checks an event appended on its own before a store
// writes it: an account, a short event name and actor, and a detail that
// is one small JSON object. No field holds a NUL, which PostgreSQL's text
// refuses and which could make two entries read alike. EINVALID otherwise.
func CheckAuditEvent(accountID string, ev AuditEvent) error {
	switch {
	case accountID == "":
		return Errorf(EINVALID, "an audit entry needs an account")
	case ev.Event == "" || len(ev.Event) > MaxAuditEvent:
		return Errorf(EINVALID, "an audit entry's event must be 1 to %d bytes", MaxAuditEvent)
	case ev.Actor == "" || len(ev.Actor) > MaxAuditActor:
		return Errorf(EINVALID, "an audit entry's actor must be 1 to %d bytes", MaxAuditActor)
	case len(ev.Detail) > MaxAuditDetail:
		return Errorf(EINVALID, "an audit entry's detail must be at most %d bytes", MaxAuditDetail)
	case strings.ContainsRune(accountID+ev.Event+ev.Actor+ev.Detail, 0):
		return Errorf(EINVALID, "an audit entry must not hold a NUL")
	}
	var obj map[string]json.RawMessage
	if !strings.HasPrefix(ev.Detail, "{") || json.Unmarshal([]byte(ev.Detail), &obj) != nil {
		return Errorf(EINVALID, "an audit entry's detail must be a JSON object")
	}
	return nil
}
