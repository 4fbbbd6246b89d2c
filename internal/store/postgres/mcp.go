package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// keyLock is the first key of the advisory lock ConsumeApproved takes on
// an agent key ("cskc" in ASCII); the second is the hash of the key id.
const keyLock = 0x6373_6b63

// ConsumeApproved consumes the approved, unexpired request of keyID with the
// binding, oldest decision first, and writes ev; see countersign.Store.
// The UPDATE names its row by a subquery and checks the status again, so of
// two callers exactly one gets a given approval. Callers of one key take
// turns (an advisory lock), so that the second sees what the first took
// and gets the next approval, if any, as with SQLite's single writer.
// Errors: ENOTFOUND when no request matches.
func (db *DB) ConsumeApproved(ctx context.Context, keyID string, kind countersign.Kind, action, argsHash, previewHash string, tier countersign.Tier, now time.Time, ev countersign.AuditEvent) (*countersign.Request, error) {
	notFound := countersign.ErrNoApprovedMatch()
	if hasNUL(keyID, string(kind), action, argsHash, previewHash, string(tier)) {
		return nil, notFound
	}
	var got *countersign.Request
	err := db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, hashtext($2))`, int32(keyLock), keyID); err != nil {
			return fmt.Errorf("lock the agent key: %w", err)
		}
		// A Transition of the same row by id (a consume or an expiry)
		// can still win the row between the subquery and the update;
		// then the next statement, with a fresh snapshot, looks again.
		for range 5 {
			r, err := scanRequest(tx.QueryRow(ctx, `
				UPDATE requests SET status = 'consumed', consumed_at = $1
				WHERE status = 'approved' AND expires_at > $1 AND id = (
					SELECT id FROM requests
					WHERE key_id = $2 AND kind = $3 AND action = $4 AND args_hash = $5 AND preview_hash = $6 AND tier = $7
					  AND seed_id = '' AND status = 'approved' AND expires_at > $1
					ORDER BY decided_at, created_at, id LIMIT 1)
				RETURNING `+requestColumns,
				nanos(now), keyID, string(kind), action, argsHash, previewHash, string(tier)))
			if errors.Is(err, pgx.ErrNoRows) {
				var left bool
				if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM requests
					WHERE key_id = $2 AND kind = $3 AND action = $4 AND args_hash = $5 AND preview_hash = $6 AND tier = $7
					  AND seed_id = '' AND status = 'approved' AND expires_at > $1)`,
					nanos(now), keyID, string(kind), action, argsHash, previewHash, string(tier)).Scan(&left); err != nil {
					return fmt.Errorf("consume approved request: %w", err)
				}
				if left {
					continue
				}
				return notFound
			} else if err != nil {
				return fmt.Errorf("consume approved request: %w", err)
			}
			got = r
			batch := &pgx.Batch{}
			queueNotify(batch, db.payload(r.ID, r.AccountID, ""))
			if err := tx.SendBatch(ctx, batch).Close(); err != nil {
				return fmt.Errorf("announce the consumption: %w", err)
			}
			return db.appendAudit(ctx, tx, now, auditItem{r.AccountID, r.ID, ev})
		}
		return notFound
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}
