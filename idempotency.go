package countersign

import (
	"context"
	"time"
)

// IdempotencyWindow is how long a change made with an Idempotency-Key is
// remembered: a retry with the same key within it gets the first answer.
const IdempotencyWindow = 24 * time.Hour

// Idempotency names a change asked for with an Idempotency-Key: by whom,
// with which key, what change, and a fingerprint of what was asked.
type Idempotency struct {
	Principal   string // "key:<id>" for an agent key, "approver:<id>" for an approver
	Key         string
	Op          string // IdemCreate, IdemDecision, IdemConsume
	Fingerprint string // SHA-256 of the change's target and body
}

// The changes an Idempotency-Key is taken on.
const (
	IdemCreate   = "create"
	IdemDecision = "decision"
	IdemConsume  = "consume"
)

// Records reports whether a transition to to is the change op stands for,
// so that a store records the key on that change and on no other made for
// the same call (a lazy expiry on the way, say).
func (i *Idempotency) Records(to Status) bool {
	switch i.Op {
	case IdemConsume:
		return to == StatusConsumed
	case IdemDecision:
		return to == StatusApproved || to == StatusDenied || to == StatusResponded || to == StatusStopped
	}
	return false
}

// IdempotentResult is a change made with an Idempotency-Key as it was first
// answered: the request as it was then.
type IdempotentResult struct {
	Idempotency
	RequestID string
	Created   bool // a creation that made a new request, not one that found its twin
	// Request is the request as the change left it: read again, with the
	// state the change gave it (status, expiry, decision, consumption).
	Request *Request
	At      time.Time
}

type idemKey struct{}

// WithIdempotency returns ctx carrying i: a store records i in the
// transaction of the change it stands for (see Records), so that the
// change and its record are committed together or not at all.
func WithIdempotency(ctx context.Context, i *Idempotency) context.Context {
	return context.WithValue(ctx, idemKey{}, i)
}

// IdempotencyFrom returns the Idempotency ctx carries, or nil.
func IdempotencyFrom(ctx context.Context) *Idempotency {
	i, _ := ctx.Value(idemKey{}).(*Idempotency)
	return i
}

// IdempotencyStore is implemented by a store that records changes made
// with an Idempotency-Key. Recording a key a second time within
// IdempotencyWindow fails with ErrIdempotencyKeyUsed, and the change with
// it; a record older than that, not pruned yet, is replaced.
type IdempotencyStore interface {
	// Idempotent returns the change recorded for the principal's key at
	// or after since. Errors: ENOTFOUND.
	Idempotent(ctx context.Context, principal, key string, since time.Time) (*IdempotentResult, error)
	// PruneIdempotency forgets the keys recorded before before.
	PruneIdempotency(ctx context.Context, before time.Time) (int, error)
}

// ErrIdempotencyKeyUsed is the error of a change whose Idempotency-Key was
// recorded meanwhile by another call.
func ErrIdempotencyKeyUsed() error {
	return Errorf(ECONFLICT, "this Idempotency-Key is in use by another call; retry it to get its answer")
}
