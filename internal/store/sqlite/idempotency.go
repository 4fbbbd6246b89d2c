package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

var _ countersign.IdempotencyStore = (*DB)(nil)

// recordIdempotent records, in the change's transaction, the key ctx
// carries (countersign.WithIdempotency) with the state r was left in.
// A key recorded already, within countersign.IdempotencyWindow, fails the
// change; a record older than that, not pruned yet, is replaced, since the
// key's retry no longer finds it.
func recordIdempotent(ctx context.Context, tx querier, r *countersign.Request, created bool, now time.Time) error {
	i := countersign.IdempotencyFrom(ctx)
	if i == nil {
		return nil
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO idempotency (principal, key, op, fingerprint, request_id, created,
		status, expires_at, decided_at, decided_by, reason, auto_approve_until, consumed_at, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (principal, key) DO UPDATE SET op = excluded.op, fingerprint = excluded.fingerprint,
		request_id = excluded.request_id, created = excluded.created, status = excluded.status, expires_at = excluded.expires_at,
		decided_at = excluded.decided_at, decided_by = excluded.decided_by, reason = excluded.reason,
		auto_approve_until = excluded.auto_approve_until, consumed_at = excluded.consumed_at, created_at = excluded.created_at
		WHERE idempotency.created_at < ?`,
		i.Principal, i.Key, i.Op, i.Fingerprint, r.ID, created, r.Status, nanos(r.ExpiresAt), nanos(r.DecidedAt),
		r.DecidedBy, r.Reason, nanos(r.AutoApproveUntil), nanos(r.ConsumedAt), nanos(now), nanos(now.Add(-countersign.IdempotencyWindow)))
	if err != nil {
		return fmt.Errorf("record the idempotency key: %w", err)
	}
	// A live record of the key leaves the row as it was: no row changed.
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("record the idempotency key: %w", err)
	} else if n == 0 {
		return countersign.ErrIdempotencyKeyUsed()
	}
	return nil
}

// Idempotent returns the change recorded for the principal's key, with
// the request as the change left it. Errors: ENOTFOUND.
func (db *DB) Idempotent(ctx context.Context, principal, key string, since time.Time) (*countersign.IdempotentResult, error) {
	var res countersign.IdempotentResult
	var st countersign.Request
	var expires, decided, until, consumed, at int64
	err := db.read.QueryRowContext(ctx, `SELECT principal, key, op, fingerprint, request_id, created, status,
		expires_at, decided_at, decided_by, reason, auto_approve_until, consumed_at, created_at
		FROM idempotency WHERE principal = ? AND key = ? AND created_at >= ?`, principal, key, nanos(since)).
		Scan(&res.Principal, &res.Key, &res.Op, &res.Fingerprint, &res.RequestID, &res.Created, &st.Status,
			&expires, &decided, &st.DecidedBy, &st.Reason, &until, &consumed, &at)
	if err == sql.ErrNoRows {
		return nil, countersign.NotFound("idempotency key")
	} else if err != nil {
		return nil, fmt.Errorf("read the idempotency key: %w", err)
	}
	r, err := getRequest(ctx, db.read, res.RequestID)
	if err != nil {
		return nil, err
	}
	r.Status, r.DecidedBy, r.Reason = st.Status, st.DecidedBy, st.Reason
	r.ExpiresAt, r.DecidedAt, r.AutoApproveUntil, r.ConsumedAt = fromNanos(expires), fromNanos(decided), fromNanos(until), fromNanos(consumed)
	res.Request, res.At = r, fromNanos(at)
	return &res, nil
}

// PruneIdempotency forgets the keys recorded before before.
func (db *DB) PruneIdempotency(ctx context.Context, before time.Time) (int, error) {
	var n int64
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE created_at < ?`, nanos(before))
		if err != nil {
			return fmt.Errorf("prune idempotency keys: %w", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
