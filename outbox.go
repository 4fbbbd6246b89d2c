package countersign

import (
	"context"
	"encoding/json"
	"time"
)

// ChannelType says how a notification channel delivers.
type ChannelType string

// The kinds of channel.
const (
	ChannelWebhook ChannelType = "webhook" // a signed JSON POST (an n8n Webhook node takes it as it is)
	ChannelEmail   ChannelType = "email"   // an e-mail over SMTP
	ChannelNtfy    ChannelType = "ntfy"    // a push message to an ntfy topic
)

// Valid reports whether t is one of the known channel types.
func (t ChannelType) Valid() bool {
	switch t {
	case ChannelWebhook, ChannelEmail, ChannelNtfy:
		return true
	}
	return false
}

// ErrUnknownChannelType is the refusal of a channel of no known type.
func ErrUnknownChannelType(t ChannelType) *Error {
	return Errorf(EINVALID, "unknown channel type %q", t)
}

// Channel is one way an account's approvers hear about its requests. An
// account has any number of them.
type Channel struct {
	ID        string
	AccountID string
	Name      string // unique within the account
	Type      ChannelType
	// Config holds the channel's settings as a JSON object (URL, SMTP
	// server and addresses, ntfy server and topic). It never holds a
	// secret. The store keeps it as it is.
	Config json.RawMessage
	// Secret is the channel's secret (webhook signing key, SMTP password,
	// ntfy access token) sealed under a server key; empty for none. The
	// store keeps it as it is.
	Secret    []byte
	CreatedAt time.Time
}

// ErrChannelNameTaken is the conflict of a channel whose name its account
// already gave another.
func ErrChannelNameTaken(name string) *Error {
	return Errorf(ECONFLICT, "the account already has a channel named %q", name)
}

// Outbox events: what a notification is about.
const (
	EventCreated   = "created"   // a new request waits for a decision
	EventDecided   = "decided"   // a human decided it (or answered, or stopped the session)
	EventExpired   = "expired"   // it expired undecided
	EventCancelled = "cancelled" // the agent gave up
)

// OutboxState is where a notification is in its delivery.
type OutboxState string

// The states of an outbox item. pending moves to sent or, after its last
// attempt, to failed.
const (
	OutboxPending OutboxState = "pending" // waiting for its first or next attempt
	OutboxSent    OutboxState = "sent"    // delivered, or no longer needed
	OutboxFailed  OutboxState = "failed"  // given up after its last attempt
)

// OutboxItem is one notification of one channel, kept until it is
// delivered so that a restart or a receiver that is down loses nothing.
type OutboxItem struct {
	ID        string
	AccountID string
	ChannelID string
	RequestID string // the request it is about
	Event     string // EventCreated, EventDecided, …
	// Payload is what the sender needs beside the request, sealed under a
	// server key (it can hold the tokens of one-time links). The store
	// keeps it as it is, and drops it once the item is sent or failed.
	Payload       []byte
	State         OutboxState
	Attempts      int       // attempts claimed so far, the current one included
	CreatedAt     time.Time //
	NextAttemptAt time.Time // due when at or before now
	LastAttemptAt time.Time // when it was last claimed
	LeaseUntil    time.Time // claimed by a sender until then
	// Claim is the token of the sender that holds the lease; MarkSent and
	// MarkFailed must present it.
	Claim     string
	LastError string    // the error of the last failed attempt, kept after a later success
	FailedAt  time.Time // when the last attempt failed
	DoneAt    time.Time // when it was sent or given up
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

// ErrOutboxItemExists is the conflict of an outbox item whose id is taken.
func ErrOutboxItemExists(id string) *Error {
	return Errorf(ECONFLICT, "outbox item %s already exists", id)
}

// CheckClaim refuses an outbox claim of no items or no lease. Errors:
// EINVALID.
func CheckClaim(limit int, lease time.Duration) error {
	if limit <= 0 || lease <= 0 {
		return ErrClaimLimits()
	}
	return nil
}

// ErrClaimLimits is the refusal of an outbox claim of no items or no lease.
func ErrClaimLimits() *Error {
	return Errorf(EINVALID, "a claim needs a positive limit and lease")
}

// ErrClaimLost is the conflict of finishing an outbox item that another
// claim now holds: its lease ran out and it was claimed again, and only
// the newer claim may say how the delivery went.
func ErrClaimLost() *Error {
	return Errorf(ECONFLICT, "the outbox item is no longer held by this claim")
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

// ChannelStatus is how a channel's deliveries are going.
type ChannelStatus struct {
	Channel *Channel
	Pending int // waiting for a first attempt or a retry
	// Retrying counts the pending items that failed at least once.
	Retrying      int
	Sent          int
	Failed        int       // given up
	LastSentAt    time.Time // zero: nothing sent yet
	NextAttemptAt time.Time // the soonest pending item; zero: none
	// LastError is the error of the item that failed last, with when it
	// failed; empty when none ever failed.
	LastError   string
	LastErrorAt time.Time
}

// OutboxStore keeps notification channels and the outbox of notifications
// to deliver. It is part of Store.
//
// The outbox is a durable queue: an item of a new request is stored in the
// request's own transaction, a follow-up is enqueued later, and senders —
// possibly several processes sharing the store — lease due items with
// ClaimDue, so that no item is handed to two senders at once, then report
// with MarkSent or MarkFailed.
//
// Store.CreateRequest stores the items of Request.Outbox as Enqueue does,
// in the same transaction as the request and its Links, with RequestID set
// to the request's id and AccountID to its account (what the items say
// there is ignored). When CreateRequest returns an identical live request
// instead of a new one, or fails, none of them is stored.
type OutboxStore interface {
	// CreateChannel adds a channel; an empty ID gets one. Errors:
	// ECONFLICT when the account has a channel of that name, ENOTFOUND for
	// an unknown account.
	CreateChannel(ctx context.Context, c *Channel) error
	// UpdateChannel replaces the type, config and secret of the channel
	// c.ID of account c.AccountID; its name, creation time and outbox stay.
	// Errors: ENOTFOUND.
	UpdateChannel(ctx context.Context, c *Channel) error
	// Channel returns a channel by id. Errors: ENOTFOUND.
	Channel(ctx context.Context, id string) (*Channel, error)
	// Channels lists the channels of an account by name, or of every
	// account (by account id, then name) when accountID is empty.
	Channels(ctx context.Context, accountID string) ([]*Channel, error)
	// RemoveChannel removes a channel of the account, by id or name, with
	// every outbox item of it. Errors: ENOTFOUND.
	RemoveChannel(ctx context.Context, accountID, idOrName string) error

	// Enqueue adds pending items. An empty ID gets one, a zero CreatedAt
	// becomes now and a zero NextAttemptAt becomes CreatedAt; State,
	// Attempts and the lease are ignored. An item whose channel does not
	// exist or is not of the item's account is left out without error: a
	// removed channel has nobody left to tell.
	Enqueue(ctx context.Context, items []OutboxItem, now time.Time) error
	// ClaimDue leases at most limit pending items whose NextAttemptAt is at
	// or before now and that no sender holds (LeaseUntil at or before now),
	// the soonest due first (then by id). Each claimed item gets
	// LeaseUntil = now+lease, LastAttemptAt = now, Attempts+1 and one new
	// Claim token for the whole call, and is returned so. It is one
	// statement (SQLite: inside one write transaction; PostgreSQL: UPDATE …
	// WHERE id IN (SELECT … FOR UPDATE SKIP LOCKED LIMIT n) RETURNING …),
	// so that of concurrent callers each item goes to exactly one. An item
	// whose sender died is claimed again once its lease has passed.
	ClaimDue(ctx context.Context, now time.Time, limit int, lease time.Duration) ([]*OutboxItem, error)
	// MarkSent records that a claimed item was delivered (or is no longer
	// needed) at now: it becomes sent, its lease and payload are dropped.
	// LastError and FailedAt stay. Errors: ENOTFOUND for an unknown item,
	// ECONFLICT when claim no longer holds it (its lease was taken over, or
	// it is done).
	MarkSent(ctx context.Context, id, claim string, now time.Time) error
	// MarkFailed records that an attempt of a claimed item failed at now
	// with errText: the item is due again at next, or, when next is zero,
	// becomes failed (given up) and drops its payload. Its lease is
	// dropped either way. Errors: ENOTFOUND, ECONFLICT as for MarkSent.
	MarkFailed(ctx context.Context, id, claim string, now, next time.Time, errText string) error
	// OutboxStatus returns the delivery status of each channel of an
	// account by name, or of every account when accountID is empty.
	OutboxStatus(ctx context.Context, accountID string) ([]*ChannelStatus, error)
	// PurgeOutbox removes sent and failed items done before the time and
	// returns how many it removed. Pending items always stay.
	PurgeOutbox(ctx context.Context, before time.Time) (int, error)
}
