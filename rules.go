package countersign

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// The rules of this file are those every Store backend applies the same
// way. Each backend keeps its own SQL and its own concurrency (the SQLite
// writer, the PostgreSQL batches); what a request may become, and what a
// refusal says, is written once here so that the backends cannot drift.

// Validate reports whether t can be tried at all: it needs a known target
// and a source, and only an approval opens a window. Errors: EINVALID.
func (t Transition) Validate() error {
	if len(t.From) == 0 || !t.To.Valid() {
		return Errorf(EINVALID, "a transition needs a known target and at least one source status")
	}
	if t.Window != nil && t.To != StatusApproved {
		return Errorf(EINVALID, "only an approval opens an auto-approve window")
	}
	return nil
}

// IsDecision reports whether s is what a human's decision leads to: a
// transition to it records when, by whom and why.
func (s Status) IsDecision() bool {
	switch s {
	case StatusApproved, StatusDenied, StatusResponded, StatusStopped:
		return true
	}
	return false
}

// EndsSession reports whether t, applied to a request of the agent
// session sessionID, stops that session: a stop closes the session's
// auto-approve windows and ends its unused approvals. A request of no
// session stops only itself.
func (t Transition) EndsSession(sessionID string) bool {
	return t.To == StatusStopped && sessionID != ""
}

// RefuseTransition explains why t changed nothing, given r, the request as
// it is now: another key's or account's request does not exist for the
// caller (ENOTFOUND); any other request is in a state that does not allow
// the change (ECONFLICT).
func RefuseTransition(t Transition, r *Request) error {
	if (t.KeyID != "" && r.KeyID != t.KeyID) || (t.AccountID != "" && r.AccountID != t.AccountID) {
		return ErrRequestNotFound()
	}
	switch {
	case r.Status == StatusExpired, r.Expired(t.Now):
		return Errorf(ECONFLICT, "request has expired")
	case r.Status == StatusPending:
		return Errorf(ECONFLICT, "request is still pending")
	}
	return Errorf(ECONFLICT, "request is already %s", r.Status)
}

// ErrRequestNotFound is the refusal of a request that does not exist, or
// not for the caller: the two are one answer so that ids of other keys and
// accounts reveal nothing.
func ErrRequestNotFound() *Error {
	return Errorf(ENOTFOUND, "request not found")
}

// StoppedReason is the reason an approval ended by a stop of its session
// carries.
const StoppedReason = "the human stopped this agent session"

// StoppedDetail is the audit detail of an approval the stop stopID ended.
func StoppedDetail(stopID string) string {
	b, _ := json.Marshal(map[string]string{"stopped_with": stopID})
	return string(b)
}

// PendingLimit is the number of waiting requests at which the account of
// r may not add r, 0 for none: only a pending request waits for a human,
// and maxPending <= 0 means no limit.
func PendingLimit(r *Request, maxPending int) int {
	if r.Status == StatusPending && maxPending > 0 {
		return maxPending
	}
	return 0
}

// PendingLimitError is the ELIMIT of an account that has n requests
// waiting, the soonest of which expires at soonest (zero for none known).
// RetryAfter is when that one expires and so frees a place.
func PendingLimitError(n int, soonest, now time.Time) error {
	return &Error{
		Code: ELIMIT,
		Message: fmt.Sprintf("this account already has %d requests waiting for a decision; "+
			"decide or cancel one, or wait for one to expire, then ask again", n),
		RetryAfter: soonest.Sub(now),
	}
}

// TwinTTLRange is the range of TTLs, in nanoseconds, that a pending
// request may have been asked with to be the twin of r: r's own within
// TwinTTLSlack either way.
func TwinTTLRange(r *Request, now time.Time) (lo, hi int64) {
	ttl := RequestTTL(r, now)
	return int64(ttl - TwinTTLSlack), int64(ttl + TwinTTLSlack)
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

// RefuseAttempt is the refusal of finishing a delivery attempt whose
// conditional update changed nothing: an item that does not exist is
// not found; any other is held by another claim (ErrClaimLost).
func RefuseAttempt(exists bool) error {
	if !exists {
		return NotFound("outbox item")
	}
	return ErrClaimLost()
}

// RefusePasskeyUse is the refusal of a passkey use whose conditional
// update changed nothing: a passkey that does not exist is not found; any
// other did not advance its signature counter (ErrPasskeyReplayed).
func RefusePasskeyUse(exists bool) error {
	if !exists {
		return NotFound("passkey")
	}
	return ErrPasskeyReplayed()
}

// AuditKeyedEvent is the audit event that marks where a chain of bare
// hashes became keyed, written when an existing store is sealed.
const AuditKeyedEvent = "audit_keyed"

// KeyedEvent is the audit event a store that is sealed appends when it
// already holds entries: it links the old chain to the keyed one, which
// begins at keyedFrom, so that the old part cannot be rewritten without
// the key either.
func KeyedEvent(keyedFrom int64) AuditEvent {
	return AuditEvent{Event: AuditKeyedEvent, Actor: "system", Detail: `{"keyed_from":` + strconv.FormatInt(keyedFrom, 10) + `}`}
}

// ErrCheckRemoved is the error of a store whose server keys are wrapped
// with the secret key but whose record of it is gone: sealing it again
// would wrap them twice and key a chain that may have been rewritten
// meanwhile.
var ErrCheckRemoved = errors.New("the store's server keys are sealed with this secret key but its record of the key (table secret_key) is gone; the database was tampered with or restored in part")

// SealServerKey wraps the server key name of a store being sealed. A key
// that the secret key already opens was sealed before: ErrCheckRemoved.
func (k *SecretKey) SealServerKey(name string, key []byte) ([]byte, error) {
	if _, err := k.UnwrapServerKey(name, key); err == nil {
		return nil, ErrCheckRemoved
	}
	return k.WrapServerKey(name, key), nil
}

// OpenServerKey returns the stored server key name as it is used: opened
// with k (stored as it is when k is nil) and size bytes long.
func OpenServerKey(k *SecretKey, name string, stored []byte, size int) ([]byte, error) {
	key := stored
	if k != nil {
		var err error
		if key, err = k.UnwrapServerKey(name, stored); err != nil {
			return nil, fmt.Errorf("server key %q: %w", name, err)
		}
	}
	if len(key) != size {
		return nil, fmt.Errorf("server key %q is %d bytes, not %d", name, len(key), size)
	}
	return key, nil
}

// CheckImport refuses a copy whose source is sealed with another secret
// key than k, the target's (none: any).
func CheckImport(k *SecretKey, c KeyCheck) error {
	if k == nil {
		return nil
	}
	if err := k.Verify(c); err != nil {
		return fmt.Errorf("import: the source store is sealed with another secret key than the target's: %w", err)
	}
	return nil
}

// Limits of a request list: a filter of no Limit gets
// DefaultRequestListLimit, and none gets more than MaxRequestListLimit.
const (
	DefaultRequestListLimit = 50
	MaxRequestListLimit     = 500
)

// Check refuses a filter of no account: requests are never listed across
// accounts. Errors: EINVALID.
func (f RequestFilter) Check() error {
	if f.AccountID == "" {
		return ErrListNeedsAccount()
	}
	return nil
}

// MatchesNothing reports whether f keeps no request whatever is stored:
// an empty, non-nil list of statuses.
func (f RequestFilter) MatchesNothing() bool {
	return f.Statuses != nil && len(f.Statuses) == 0
}

// PageSize is how many requests, at most, a list by f returns.
func (f RequestFilter) PageSize() int {
	if f.Limit <= 0 {
		return DefaultRequestListLimit
	}
	return min(f.Limit, MaxRequestListLimit)
}

// DefaultAuditPage is how many entries an audit log read returns when the
// caller names no limit (a limit <= 0).
const DefaultAuditPage = 1000

// AuditPageSize is how many entries an audit log read of limit returns.
func AuditPageSize(limit int) int {
	if limit <= 0 {
		return DefaultAuditPage
	}
	return limit
}

// OutboxItems is the outbox of the new request r as it is stored with it:
// every item about r, of r's account.
func (r *Request) OutboxItems() []OutboxItem {
	out := make([]OutboxItem, len(r.Outbox))
	for i, it := range r.Outbox {
		it.RequestID, it.AccountID = r.ID, r.AccountID
		out[i] = it
	}
	return out
}

// CheckClaim refuses an outbox claim of no items or no lease. Errors:
// EINVALID.
func CheckClaim(limit int, lease time.Duration) error {
	if limit <= 0 || lease <= 0 {
		return ErrClaimLimits()
	}
	return nil
}
