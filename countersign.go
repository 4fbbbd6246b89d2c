// Package countersign holds the domain of the approval gateway: accounts,
// agent keys, approvers, requests and their lifecycle states, the store
// interface every backend implements, and the error catalogue. Of the
// application it imports only internal/seal, which imports nothing of it,
// so every other package can depend on it.
//
// Each type's file also holds the rules every Store backend applies the
// same way to it (what a request may become, when an OAuth token may be
// redeemed) and the refusals a Store answers with about it. Each backend
// keeps its own SQL and its own concurrency; the rules and the words are
// written once here, so that the backends cannot drift and a user reads
// the same message whichever database the server runs on. The conformance
// suite checks the refusals word for word.
package countersign

import (
	"time"
)

// Clock tells the time. Every rule takes time from one injectable clock so
// that tests move it instead of sleeping.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// Account is a namespace: a person or a team. Everything belongs to exactly
// one account and nothing crosses accounts.
type Account struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// ErrAccountExists is the conflict of a new account whose name is taken.
func ErrAccountExists(name string) *Error {
	return Errorf(ECONFLICT, "account %q already exists", name)
}

// AgentKey is the credential one agent uses. Only the SHA-256 hash of the
// secret is stored.
type AgentKey struct {
	ID        string
	AccountID string
	Name      string
	Hash      string // hex SHA-256 of the secret
	Hint      string // the first characters of the secret, for display
	CreatedAt time.Time
	RevokedAt time.Time // zero while the key is valid
	// SeedSecret, for the key designated for the seed-compatible routes, is
	// the key sealed under a server key: those routes check an HMAC made
	// with the key itself, so the server must be able to recover it.
	SeedSecret []byte
	// CreatedBy is the id of the approver who made the key through the
	// account API; empty for a key the operator made. Only stored: a
	// rule that keeps a key's maker from voting on its requests reads it
	// in the store.
	CreatedBy string
}

// Revoked reports whether the key was revoked.
func (k *AgentKey) Revoked() bool { return !k.RevokedAt.IsZero() }

// ErrKeyNameTaken is the conflict of a new agent key whose name its
// account already gave a key: names tell keys apart in lists and logs.
func ErrKeyNameTaken(name string) *Error {
	return Errorf(ECONFLICT, "the account already has a key named %q", name)
}

// Approver is a human who can decide the requests of the accounts it belongs
// to.
type Approver struct {
	ID           string
	Username     string
	PasswordHash string // argon2id, PHC string format
	CreatedAt    time.Time
}

// ErrApproverExists is the conflict of a new approver whose username is
// taken.
func ErrApproverExists(username string) *Error {
	return Errorf(ECONFLICT, "approver %q already exists", username)
}

// Membership says that an approver belongs to an account, and with which
// role.
type Membership struct {
	ApproverID string
	AccountID  string
	Role       Role
	CreatedAt  time.Time
}

// ImportedRole is the role of an exported membership: one exported
// before roles has none, and keeps all it could do then, as the
// migration to roles gives every membership.
func (m *Membership) ImportedRole() Role {
	if m.Role == "" {
		return RoleAdmin
	}
	return m.Role
}

// Role is what an approver may do in one of their accounts.
type Role string

const (
	// RoleViewer sees the account's inbox and decides nothing.
	RoleViewer Role = "viewer"
	// RoleApprover decides the account's requests.
	RoleApprover Role = "approver"
	// RoleAdmin decides, and manages the account's agent keys, approvers,
	// grants and notification channels.
	RoleAdmin Role = "admin"
)

// Roles are the roles, least first.
var Roles = []Role{RoleViewer, RoleApprover, RoleAdmin}

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleViewer, RoleApprover, RoleAdmin:
		return r, nil
	}
	return "", Errorf(EINVALID, "a role is viewer, approver or admin, not %q", s)
}

// Decides reports whether the role may decide requests.
func (r Role) Decides() bool { return r == RoleApprover || r == RoleAdmin }

// Administers reports whether the role may manage the account.
func (r Role) Administers() bool { return r == RoleAdmin }

// Member is an approver of an account, as an account's list shows it.
type Member struct {
	ApproverID string
	Username   string
	Role       Role
	CreatedAt  time.Time
}

// ErrNotMember is the ENOTFOUND of removing a membership the approver
// does not have.
func ErrNotMember() *Error {
	return Errorf(ENOTFOUND, "the approver is not a member of that account")
}

// ErrNotAdmin is the refusal of a change to an account's clients, keys,
// approvers, grants or channels by an approver who is not an admin of it.
func ErrNotAdmin() *Error {
	return Errorf(EFORBIDDEN, "Only an admin of the account may connect a client or change its keys, approvers, grants and channels; ask an admin of the account.")
}

// ErrLastAdmin is the conflict of a change that would leave an account
// without an admin: demoting or removing its only one.
func ErrLastAdmin() *Error {
	return Errorf(ECONFLICT, "that is the account's last admin: make another approver an admin first")
}

// ApproverToken is an API credential of an approver, scoped to one account.
// Only the SHA-256 hash of the secret is stored.
type ApproverToken struct {
	ID         string
	ApproverID string
	AccountID  string
	// Role is the approver's role in the account, read with the token
	// from the membership (not stored with the token).
	Role      Role
	Name      string
	Hash      string
	Hint      string
	CreatedAt time.Time
	RevokedAt time.Time
}

// Revoked reports whether the token was revoked.
func (t *ApproverToken) Revoked() bool { return !t.RevokedAt.IsZero() }

// Agent is the principal behind an agent key, as the server saw it.
type Agent struct {
	KeyID     string
	AccountID string
	KeyName   string
	// GrantID is set when the key is a grant's (an OAuth access token):
	// then GrantTiers are the only tiers of tools it may use.
	GrantID    string
	GrantTiers []string
}

// ApproverPrincipal is an approver acting for one account.
type ApproverPrincipal struct {
	ApproverID string
	Username   string
	AccountID  string
	// Role is the approver's role in the account. The service's own
	// deciders (a decision link, the client's elicitation, the gateway's
	// local page) act as RoleApprover.
	Role Role
}
