package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

var _ countersign.IdempotencyStore = (*DB)(nil)

// queueIdempotent queues, in the change's batch, the record of the key i
// with the state r was left in; its result is read with idempotentResult.
// A record of the key older than countersign.IdempotencyWindow, not pruned
// yet, is deleted first, since the key's retry no longer finds it; a live
// one makes the INSERT fail, and the change with it.
func queueIdempotent(b *pgx.Batch, i *countersign.Idempotency, r *countersign.Request, created bool, now time.Time) {
	b.Queue(`DELETE FROM idempotency WHERE principal = $1 AND key = $2 AND created_at < $3`,
		i.Principal, i.Key, nanos(now.Add(-countersign.IdempotencyWindow)))
	b.Queue(`INSERT INTO idempotency (principal, key, op, fingerprint, request_id, created,
		status, expires_at, decided_at, decided_by, reason, auto_approve_until, consumed_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		i.Principal, i.Key, i.Op, i.Fingerprint, r.ID, created, string(r.Status), nanos(r.ExpiresAt), nanos(r.DecidedAt),
		r.DecidedBy, r.Reason, nanos(r.AutoApproveUntil), nanos(r.ConsumedAt), nanos(now))
}

// idempotentResult reads the outcome of queueIdempotent: a key recorded
// already, within the window, fails the change.
func idempotentResult(br pgx.BatchResults) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("replace an old idempotency key: %w", badText(err))
	}
	if _, err := br.Exec(); isUnique(err) {
		return countersign.ErrIdempotencyKeyUsed()
	} else if err != nil {
		return fmt.Errorf("record the idempotency key: %w", badText(err))
	}
	return nil
}

// recordTwin records the key of a creation that found its twin, and
// commits: the twin itself changes nothing.
func recordTwin(p *pipe, twin *countersign.Request, now time.Time) error {
	i := countersign.IdempotencyFrom(p.ctx)
	if i == nil || i.Op != countersign.IdemCreate {
		return nil
	}
	b := &pgx.Batch{}
	queueIdempotent(b, i, twin, false, now)
	br := p.sendCommit(b)
	if err := idempotentResult(br); err != nil {
		return err
	}
	return commitResult(br)
}

// Idempotent returns the change recorded for the principal's key, with
// the request as the change left it. Errors: ENOTFOUND.
func (db *DB) Idempotent(ctx context.Context, principal, key string, since time.Time) (*countersign.IdempotentResult, error) {
	if hasNUL(principal, key) {
		return nil, countersign.NotFound("idempotency key")
	}
	var res countersign.IdempotentResult
	var status string
	var decidedBy, reason string
	var expires, decided, until, consumed, at int64
	err := db.read(ctx, func(q querier) error {
		return q.QueryRow(ctx, `SELECT principal, key, op, fingerprint, request_id, created, status,
			expires_at, decided_at, decided_by, reason, auto_approve_until, consumed_at, created_at
			FROM idempotency WHERE principal = $1 AND key = $2 AND created_at >= $3`, principal, key, nanos(since)).
			Scan(&res.Principal, &res.Key, &res.Op, &res.Fingerprint, &res.RequestID, &res.Created, &status,
				&expires, &decided, &decidedBy, &reason, &until, &consumed, &at)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.NotFound("idempotency key")
	} else if err != nil {
		return nil, fmt.Errorf("read the idempotency key: %w", err)
	}
	r, err := db.Request(ctx, res.RequestID)
	if err != nil {
		return nil, err
	}
	r.Status, r.DecidedBy, r.Reason = countersign.Status(status), decidedBy, reason
	r.ExpiresAt, r.DecidedAt, r.AutoApproveUntil, r.ConsumedAt = fromNanos(expires), fromNanos(decided), fromNanos(until), fromNanos(consumed)
	res.Request, res.At = r, fromNanos(at)
	return &res, nil
}

// PruneIdempotency forgets the keys recorded before before.
func (db *DB) PruneIdempotency(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := db.update(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM idempotency WHERE created_at < $1`, nanos(before))
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}
