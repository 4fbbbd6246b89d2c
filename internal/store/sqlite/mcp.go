package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// ConsumeApproved consumes the approved, unexpired request of keyID with the
// binding, oldest decision first, and writes ev; see countersign.Store. The
// UPDATE names its row by a subquery and checks the status again, so it is
// one conditional statement: of two callers, exactly one gets the approval.
// Errors: ENOTFOUND when no request matches.
func (db *DB) ConsumeApproved(ctx context.Context, keyID string, kind countersign.Kind, action, argsHash, previewHash string, tier countersign.Tier, now time.Time, ev countersign.AuditEvent) (*countersign.Request, error) {
	var got *countersign.Request
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		var id string
		err := tx.QueryRowContext(ctx, `
			UPDATE requests SET status = 'consumed', consumed_at = ?
			WHERE status = 'approved' AND expires_at > ? AND id = (
				SELECT id FROM requests INDEXED BY requests_live_binding
				WHERE key_id = ? AND kind = ? AND action = ? AND args_hash = ? AND preview_hash = ? AND tier = ?
				  AND seed_id = '' AND status IN ('pending', 'approved') AND status = 'approved' AND expires_at > ?
				ORDER BY decided_at, created_at, id LIMIT 1)
			RETURNING id`,
			nanos(now), nanos(now), keyID, kind, action, argsHash, previewHash, tier, nanos(now)).Scan(&id)
		if err == sql.ErrNoRows {
			return countersign.ErrNoApprovedMatch()
		} else if err != nil {
			return fmt.Errorf("consume approved request: %w", err)
		}
		if got, err = getRequest(ctx, tx, id); err != nil {
			return err
		}
		return appendAudit(ctx, tx, now, got.AccountID, got.ID, ev)
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}
