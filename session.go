package countersign

import (
	"context"
	"time"
)

// Session is a browser's proof that an approver signed in. The cookie holds
// a random id; only its SHA-256 hash is stored, so a stolen database opens
// no session.
type Session struct {
	Hash       string
	ApproverID string
	// AccountID is the account whose inbox the session shows; the approver
	// must still be a member of it, or the session is gone.
	AccountID string
	// Role is the approver's role in that account, read with the session
	// from the membership (not stored with the session).
	Role       Role
	CreatedAt  time.Time
	ExpiresAt  time.Time
	LastSeenAt time.Time
	UserAgent  string
	Client     string // the client address at sign-in
	// GrantID is the grant whose consent signed the browser in; revoking
	// the grant ends the session. Empty for a sign-in.
	GrantID string
}

// ErrNoSuchAccount is the ENOTFOUND of switching a session to an account
// that does not exist or that its approver is not a member of: the two
// are one answer.
func ErrNoSuchAccount() *Error {
	return Errorf(ENOTFOUND, "no such account")
}

// SessionStore keeps browser sessions and the server's keys. It is part of
// Store.
type SessionStore interface {
	// CreateSession stores a session. Errors: ENOTFOUND for an unknown
	// approver or account.
	CreateSession(ctx context.Context, s *Session) error
	// SessionByHash returns a session that has not expired at now, whose
	// approver is still a member of its account, with that approver.
	// Errors: ENOTFOUND.
	SessionByHash(ctx context.Context, hash string, now time.Time) (*Session, *Approver, error)
	// TouchSession records that a session was used at now.
	TouchSession(ctx context.Context, hash string, now time.Time) error
	// Sessions lists an approver's sessions that have not expired at now,
	// newest first.
	Sessions(ctx context.Context, approverID string, now time.Time) ([]*Session, error)
	// SwitchSessionAccount makes a session show another account of its
	// approver. Errors: ENOTFOUND when the session is gone or the approver
	// is not a member of the account.
	SwitchSessionAccount(ctx context.Context, hash, accountID string) error
	// DeleteSession ends one session; ending a gone session is no error.
	DeleteSession(ctx context.Context, hash string) error
	// DeleteSessions ends every session of an approver and returns how many
	// it ended.
	DeleteSessions(ctx context.Context, approverID string) (int, error)

	// SetPassword replaces an approver's password hash and ends its
	// sessions. Unless keepGrants, it revokes at at, in the same
	// transaction, every live grant the approver allowed, in every
	// account, as RevokeGrant does, with an audit entry each
	// (RevokedPasswordReset). It returns the ids of the grants it revoked.
	// Errors: ENOTFOUND.
	SetPassword(ctx context.Context, approverID, passwordHash string, keepGrants bool, at time.Time) (revoked []string, err error)
	// ClearPassword makes an approver passkey-only: as SetPassword with an
	// empty hash, but only while the approver has a passkey, checked in
	// the same statement, so that a passkey removed at the same moment
	// (RemovePasskey, keepLast) cannot leave it with no way to sign in.
	// Errors: ENOTFOUND, ECONFLICT (ErrNoPasskeyToSignIn).
	ClearPassword(ctx context.Context, approverID string, keepGrants bool, at time.Time) (revoked []string, err error)
	// RemoveMembership takes an approver out of an account, ending its
	// sessions and revoking its tokens there, and, in the same
	// transaction, every live grant it allowed there, as RevokeGrant does,
	// with an audit entry each (RevokedApproverRemoved). It returns the ids
	// of the grants it revoked. Errors: ENOTFOUND.
	RemoveMembership(ctx context.Context, approverID, accountID string, at time.Time) (revoked []string, err error)
	// RemoveMembershipKeepingAdmin is RemoveMembership refused, changing
	// nothing, when the approver is the account's only admin. The check
	// and the change are one step: of two admins removing each other at
	// once, one is refused. Errors: ENOTFOUND, ErrLastAdmin.
	RemoveMembershipKeepingAdmin(ctx context.Context, approverID, accountID string, at time.Time) (revoked []string, err error)
	// RemoveApprover removes an approver with its memberships, sessions,
	// tokens and passkeys, and revokes at at, in the same transaction,
	// every live grant it allowed, as RemoveMembership does. It returns the
	// ids of the grants it revoked. Errors: ENOTFOUND.
	RemoveApprover(ctx context.Context, approverID string, at time.Time) (revoked []string, err error)
	// MembershipAccounts returns the accounts an approver belongs to, by
	// name.
	MembershipAccounts(ctx context.Context, approverID string) ([]*Account, error)

	// ServerKey returns the server's key of that name, drawing and storing
	// size random bytes the first time, so that every replica uses the
	// same one.
	ServerKey(ctx context.Context, name string, size int) ([]byte, error)
}
