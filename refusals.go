package countersign

import (
	"strings"
	"time"
)

// The refusals of this file are the words a Store answers with. Every
// backend returns them from here, so that a user reads the same message
// whichever database the server runs on; the conformance suite checks
// them word for word.

// NotFound is the ENOTFOUND of a thing that does not exist, or not for the
// caller: "request", "approver or account".
func NotFound(what string) *Error {
	return Errorf(ENOTFOUND, "%s not found", what)
}

// ErrAccountExists is the conflict of a new account whose name is taken.
func ErrAccountExists(name string) *Error {
	return Errorf(ECONFLICT, "account %q already exists", name)
}

// ErrApproverExists is the conflict of a new approver whose username is
// taken.
func ErrApproverExists(username string) *Error {
	return Errorf(ECONFLICT, "approver %q already exists", username)
}

// ErrKeyNameTaken is the conflict of a new agent key whose name its
// account already gave a key: names tell keys apart in lists and logs.
func ErrKeyNameTaken(name string) *Error {
	return Errorf(ECONFLICT, "the account already has a key named %q", name)
}

// ErrChannelNameTaken is the conflict of a channel whose name its account
// already gave another.
func ErrChannelNameTaken(name string) *Error {
	return Errorf(ECONFLICT, "the account already has a channel named %q", name)
}

// ErrUnknownChannelType is the refusal of a channel of no known type.
func ErrUnknownChannelType(t ChannelType) *Error {
	return Errorf(EINVALID, "unknown channel type %q", t)
}

// ErrUnknownStatus is the refusal of a request of no known status.
func ErrUnknownStatus(s Status) *Error {
	return Errorf(EINVALID, "unknown status %q", s)
}

// ErrExists is the conflict of a new thing whose id is taken: "request",
// "client", "approver token", "auto-approve window".
func ErrExists(what string) *Error {
	return Errorf(ECONFLICT, "%s already exists", what)
}

// ErrOutboxItemExists is the conflict of an outbox item whose id is taken.
func ErrOutboxItemExists(id string) *Error {
	return Errorf(ECONFLICT, "outbox item %s already exists", id)
}

// ErrSeedIDTaken is the conflict of a new request whose seed request_id
// another request has.
func ErrSeedIDTaken() *Error {
	return Errorf(ECONFLICT, "another request already has this request_id")
}

// ErrAlreadyRevoked is the conflict of revoking what is revoked: "agent
// key", "approver token", "the grant".
func ErrAlreadyRevoked(what string) *Error {
	return Errorf(ECONFLICT, "%s is already revoked", what)
}

// ErrClaimLost is the conflict of finishing an outbox item that another
// claim now holds: its lease ran out and it was claimed again, and only
// the newer claim may say how the delivery went.
func ErrClaimLost() *Error {
	return Errorf(ECONFLICT, "the outbox item is no longer held by this claim")
}

// ErrClaimLimits is the refusal of an outbox claim of no items or no lease.
func ErrClaimLimits() *Error {
	return Errorf(EINVALID, "a claim needs a positive limit and lease")
}

// ErrCoverageClaimed is the conflict of an approval that already covered a
// delete: an approval covers one.
func ErrCoverageClaimed() *Error {
	return Errorf(ECONFLICT, "this approval already covered a delete")
}

// ErrListNeedsAccount is the refusal of a request list of no account:
// requests are never listed across accounts.
func ErrListNeedsAccount() *Error {
	return Errorf(EINVALID, "an account is required to list requests")
}

// ErrNoApprovedMatch is the ENOTFOUND of a consumption that no live
// approval of the key matches.
func ErrNoApprovedMatch() *Error {
	return Errorf(ENOTFOUND, "no approved request matches")
}

// ErrNoSuchAccount is the ENOTFOUND of switching a session to an account
// that does not exist or that its approver is not a member of: the two
// are one answer.
func ErrNoSuchAccount() *Error {
	return Errorf(ENOTFOUND, "no such account")
}

// ErrNotMember is the ENOTFOUND of removing a membership the approver
// does not have.
func ErrNotMember() *Error {
	return Errorf(ENOTFOUND, "the approver is not a member of that account")
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

// ErrPasskeyTaken is the conflict of a passkey whose credential or name
// the approver already registered.
func ErrPasskeyTaken() *Error {
	return Errorf(ECONFLICT, "this passkey, or a passkey of this name, is already registered")
}

// ErrPasskeyReplayed is the conflict of an assertion whose signature
// counter did not advance.
func ErrPasskeyReplayed() *Error {
	return Errorf(ECONFLICT, "the passkey's signature counter did not advance: the assertion was replayed or the passkey was copied")
}

// ErrNoPasskey is the ENOTFOUND of removing a passkey by an id or name
// the approver has none of.
func ErrNoPasskey(idOrName string) *Error {
	return Errorf(ENOTFOUND, "no passkey %q", idOrName)
}

// ErrLastPasskey is the conflict of removing the last passkey of an
// approver who has no password: it would lock the approver out.
func ErrLastPasskey() *Error {
	return Errorf(ECONFLICT, "this is the only passkey of an approver without a password: removing it would lock the approver out")
}

// ErrNoPasskeyToSignIn is the conflict of clearing the password of an
// approver without a passkey: it would lock the approver out.
func ErrNoPasskeyToSignIn() *Error {
	return Errorf(ECONFLICT, "the approver has no passkey: without a password it could never sign in")
}

// ErrClientGone is the ENOTFOUND of a grant for an OAuth client that is
// no longer registered: never used, it expired or made room for another
// while its consent page was open.
var ErrClientGone = &Error{Code: ENOTFOUND, Message: "the application is no longer registered with this server"}

// ErrNoCeremony is the ENOTFOUND of a passkey ceremony that was never
// begun, or was taken already.
func ErrNoCeremony() *Error {
	return Errorf(ENOTFOUND, "no such ceremony")
}

// ErrCeremonyExpired is the ENOTFOUND of a passkey ceremony past its
// expiry.
func ErrCeremonyExpired() *Error {
	return Errorf(ENOTFOUND, "the ceremony expired")
}

// ErrTargetNotEmpty is the conflict of copying into a store that holds
// data already (full names what it holds): a copy never merges.
func ErrTargetNotEmpty(full []string) *Error {
	return Errorf(ECONFLICT, "the target store is not empty (it holds %s); copy only into a new, empty store", strings.Join(full, ", "))
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
