package countersign

import "encoding/json"

// Why a grant was revoked other than by its own revocation, as its audit
// entry says: the grant ends with the approver who allowed it, and with its
// key.
const (
	RevokedApproverRemoved = "approver removed"
	RevokedPasswordReset   = "password reset"
	RevokedKeyRevoked      = "key revoked"
)

// AuditGrantRevoked is the audit event of a grant revoked for reason. It
// names the grant and the reason, never a token.
const AuditGrantRevoked = "grant_revoked"

// GrantRevokedEvent is the audit entry a store writes, in the transaction
// that revokes it, for a grant revoked for reason.
func GrantRevokedEvent(grantID, reason string) AuditEvent {
	b, _ := json.Marshal(struct {
		Grant  string `json:"grant"`
		Reason string `json:"reason"`
	}{grantID, reason})
	return AuditEvent{Event: AuditGrantRevoked, Actor: "system", Detail: string(b)}
}

// ErrGrantNotMember is the refusal of a grant allowed by an approver who
// is no longer a member of its account.
func ErrGrantNotMember() *Error {
	return Errorf(EFORBIDDEN, "the approver is not a member of that account")
}
