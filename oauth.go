package countersign

import (
	"context"
	"encoding/json"
	"time"
)

// OAuthClient is an OAuth client that registered itself (RFC 7591). Its
// name and redirect URIs are what the client declared: the consent page
// shows the name as self-declared.
type OAuthClient struct {
	ID string
	// SecretHash is the hex SHA-256 of a confidential client's secret;
	// empty for a public client.
	SecretHash   string
	Name         string
	RedirectURIs []string
	// AuthMethod is the token endpoint authentication method: none,
	// client_secret_post or client_secret_basic.
	AuthMethod string
	// RegisteredFrom is the client address that registered it (an IPv6
	// address by its /64), which the per-address limit counts.
	RegisteredFrom string
	// RegisteredNet is the network of that address that the per-network
	// limit counts: the /48 of an IPv6 address, "" for IPv4.
	RegisteredNet string
	CreatedAt     time.Time
	// LastUsedAt is when the client was last allowed on the consent page
	// or had a code or refresh token redeemed; zero for a client never
	// used, which expires within minutes and may be deleted to make room.
	LastUsedAt time.Time
}

// ClientLimits bound dynamic client registration. They count never-used
// clients only: a client an approver allowed is no flood.
type ClientLimits struct {
	// Max is the most clients the server keeps: at Max, the oldest
	// never-used clients are deleted to make room, and only a server
	// whose every client was used is full. PerAddress is the most
	// never-used clients one client address may hold, PerNetwork the most
	// one network may (0: no limit).
	Max, PerAddress, PerNetwork int
	// StaleBefore: clients never used and registered before it are deleted
	// first, so abandoned registrations make room.
	StaleBefore time.Time
}

// ErrClientsFull is the ELIMIT of registering an OAuth client when the
// server holds as many as it may.
func ErrClientsFull() *Error {
	return Errorf(ELIMIT, "the server holds as many registered clients as it may; try again later")
}

// ErrClientsFromAddress is the ELIMIT of registering an OAuth client from
// an address that registered as many as it may.
func ErrClientsFromAddress() *Error {
	return Errorf(ELIMIT, "this address registered as many clients as it may; use one of them, or wait until unused ones expire")
}

// ErrClientsFromNetwork is the ELIMIT of registering an OAuth client from
// a network (an IPv6 /48) whose addresses registered as many as it may.
func ErrClientsFromNetwork() *Error {
	return Errorf(ELIMIT, "this network registered as many clients as it may; use one of them, or wait until unused ones expire")
}

// Grant is the principal an OAuth client gets when an approver allows it
// on the consent page (ADR 0007). It owns an agent key (KeyID) that has no
// usable secret, so every rule that scopes approvals, windows and the audit
// by key holds for a grant unchanged; revoking the grant revokes the key.
type Grant struct {
	ID         string
	AccountID  string
	KeyID      string
	KeyName    string // the key's name, read with the grant
	ClientID   string
	ClientName string // as the client declared it
	ApproverID string
	// ApproverName is the username of the approver who allowed it, kept
	// even when that approver is removed later.
	ApproverName string
	// Tiers are the MCP tool tiers the grant may use ("read", "write",
	// "commit", "external"); commit and external still need a human's
	// confirmation per call.
	Tiers      []string
	CreatedAt  time.Time
	LastUsedAt time.Time
	RevokedAt  time.Time
}

// Revoked reports whether the grant was revoked.
func (g *Grant) Revoked() bool { return !g.RevokedAt.IsZero() }

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

// Kinds of OAuth token.
const (
	TokenCode    = "code"
	TokenAccess  = "access"
	TokenRefresh = "refresh"
)

// OAuthToken is an authorization code, access token or refresh token of a
// grant. Only the SHA-256 hash of the secret is stored.
type OAuthToken struct {
	Hash     string
	Kind     string // TokenCode, TokenAccess or TokenRefresh
	GrantID  string
	ClientID string
	// Resource is the resource (RFC 8707) the token is for: the server's
	// /mcp.
	Resource string
	// RedirectURI and Challenge (the PKCE S256 code challenge) bind a code.
	RedirectURI string
	Challenge   string
	CreatedAt   time.Time
	ExpiresAt   time.Time
	UsedAt      time.Time // a code or refresh token is used once
}

// Redeemable reports whether the OAuth token t may be redeemed at now
// with its grant g: once, before its expiry, while the grant stands.
// Errors: ECONFLICT (used), ENOTFOUND (expired, grant revoked).
func (t *OAuthToken) Redeemable(g *Grant, now time.Time) error {
	if !t.UsedAt.IsZero() {
		return ErrTokenUsed()
	}
	if !t.ExpiresAt.After(now) {
		return ErrTokenExpired()
	}
	if g.Revoked() {
		return ErrGrantRevoked()
	}
	return nil
}

// Presentable reports whether the access token t of the grant g opens
// the gateway at now: before its expiry, while the grant stands.
func (t *OAuthToken) Presentable(g *Grant, now time.Time) bool {
	return !g.Revoked() && t.ExpiresAt.After(now)
}

// ErrTokenUsed is the conflict of an OAuth code or refresh token redeemed
// a second time.
func ErrTokenUsed() *Error {
	return Errorf(ECONFLICT, "the token was already used")
}

// ErrUnknownToken is the ENOTFOUND of an OAuth token that was never
// issued, or was pruned.
func ErrUnknownToken() *Error {
	return Errorf(ENOTFOUND, "unknown token")
}

// ErrTokenExpired is the ENOTFOUND of an OAuth token past its expiry.
func ErrTokenExpired() *Error {
	return Errorf(ENOTFOUND, "the token expired")
}

// ErrGrantRevoked is the ENOTFOUND of an OAuth token whose grant was
// revoked: a revoked grant's tokens are dead.
func ErrGrantRevoked() *Error {
	return Errorf(ENOTFOUND, "the grant was revoked")
}

// OAuthStore keeps OAuth clients, grants and their tokens. It is part of
// Store.
type OAuthStore interface {
	// CreateOAuthClient stores a registered client. In the same
	// transaction it deletes the stale clients lim names, fails with
	// ELIMIT when the client's address or network already holds as many
	// never-used clients as lim allows, and, when the server holds Max
	// clients, deletes the oldest never-used ones to make room (ELIMIT
	// when there are none).
	CreateOAuthClient(ctx context.Context, c *OAuthClient, lim ClientLimits) error
	// OAuthClient returns a client. Errors: ENOTFOUND.
	OAuthClient(ctx context.Context, id string) (*OAuthClient, error)

	// CreateGrant stores a grant with its agent key, the browser session
	// the consent signed in (nil: none) and the authorization code it
	// issued, in one transaction, while the approver is an admin of the
	// account: a grant never outlives the membership that allowed it, nor
	// comes of a consent whose approver was demoted meanwhile.
	// It marks the client used, in the same transaction. Errors:
	// ENOTFOUND for an unknown account or approver, or (ErrClientGone) a
	// client no longer registered; EFORBIDDEN (ErrGrantNotMember) when the
	// approver is not a member, (ErrNotAdmin) when not an admin.
	CreateGrant(ctx context.Context, g *Grant, key *AgentKey, sess *Session, code *OAuthToken) error
	// Grant returns a grant by id, revoked or not. Errors: ENOTFOUND.
	Grant(ctx context.Context, id string) (*Grant, error)
	// Grants lists the grants of an account (all accounts when accountID
	// is empty), newest first.
	Grants(ctx context.Context, accountID string) ([]*Grant, error)
	// RevokeGrant revokes a grant of the account (any account when
	// accountID is empty) with its agent key, deletes its tokens and ends
	// the sessions its consent signed in. Errors: ENOTFOUND, ECONFLICT if
	// already revoked.
	RevokeGrant(ctx context.Context, accountID, id string, at time.Time) error
	// TouchGrant records that a grant was used at now.
	TouchGrant(ctx context.Context, id string, now time.Time) error

	// RedeemOAuthToken uses a code or refresh token once: of callers
	// racing with one token exactly one succeeds. The token must be of
	// kind, unused, unexpired at now and of a live grant, and check (when
	// not nil) must accept it; what check returns fails the call and
	// changes nothing. check runs before any other test, so that a token
	// presented by someone it was not issued to fails with check's error
	// whether or not it was used. In the same
	// transaction it stores issue, each given the token's grant, and marks
	// the token's client used. It returns the token and its grant. A token
	// already used (and accepted by check) fails with ECONFLICT and still
	// returns the token, so that the caller can revoke its grant. Errors:
	// ENOTFOUND, ECONFLICT.
	RedeemOAuthToken(ctx context.Context, hash, kind string, now time.Time, check func(*OAuthToken) error, issue []*OAuthToken) (*OAuthToken, *Grant, error)
	// AccessToken returns an access token unexpired at now with its live
	// grant; a revoked grant or key is not found. Errors: ENOTFOUND.
	AccessToken(ctx context.Context, hash string, now time.Time) (*OAuthToken, *Grant, error)
	// DeleteOAuthToken deletes a token of a client (RFC 7009 revocation).
	// Deleting a refresh token revokes its grant at at, as RevokeGrant
	// does: the client has let go of the grant, and the grant must not go
	// on being listed as live; the grant's id is returned then, and ""
	// otherwise. Deleting a gone token is no error.
	DeleteOAuthToken(ctx context.Context, hash, clientID string, at time.Time) (revoked string, err error)
}

// ErrClientGone is the ENOTFOUND of a grant for an OAuth client that is
// no longer registered: never used, it expired or made room for another
// while its consent page was open.
var ErrClientGone = &Error{Code: ENOTFOUND, Message: "the application is no longer registered with this server"}
