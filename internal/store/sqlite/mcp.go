package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// Which approvals of a key a retry takes: those whose binding is the
// call's, and, only when none is, those an approver edited whose
// original is the call's. Both read the key's live requests alone
// (requests_live_binding); the second only its edited ones, whose
// original text holds the hashes (countersign.EncodeOriginal). Their
// parameters are the same: key, kind, action, argument hash, preview
// hash, tier, now.
const (
	approvedByBinding = `key_id = ? AND kind = ? AND action = ? AND args_hash = ? AND preview_hash = ? AND tier = ?
		AND seed_id = '' AND status IN ('pending', 'approved') AND status = 'approved' AND expires_at > ?`
	approvedByOriginal = `key_id = ? AND kind = ? AND action = ?
		AND original <> '' AND json_extract(nullif(original, ''), '$.ArgsHash') = ?
		AND json_extract(nullif(original, ''), '$.PreviewHash') = ? AND tier = ?
		AND seed_id = '' AND status IN ('pending', 'approved') AND status = 'approved' AND expires_at > ?`
)

// ConsumeApproved consumes the approved, unexpired request of keyID with the
// binding, oldest decision first, or else, for a caller that accepts
// edits, the edited one whose original has it, and writes ev; see
// countersign.Store. Each UPDATE names its row by a subquery and checks
// the status again, so it is one conditional statement, and both run in
// one transaction of the single writer: of two callers, exactly one gets
// the approval. Errors: ENOTFOUND when no request matches, ECONFLICT
// (ErrEditNotAccepted).
func (db *DB) ConsumeApproved(ctx context.Context, keyID string, kind countersign.Kind, action, argsHash, previewHash string, tier countersign.Tier, acceptEdits bool, now time.Time, ev countersign.AuditEvent) (*countersign.Request, error) {
	var got *countersign.Request
	match := []any{keyID, kind, action, argsHash, previewHash, tier, nanos(now)}
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		id, err := consumeWhere(ctx, tx, approvedByBinding, now, match)
		if err == sql.ErrNoRows {
			id, err = consumeEdited(ctx, tx, acceptEdits, now, match)
		}
		if err == sql.ErrNoRows {
			return countersign.ErrNoApprovedMatch()
		} else if err != nil {
			return err
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

// consumeEdited consumes the first approval whose original has the
// binding of match, for a caller that runs edits; for any other, such an
// approval is ErrEditNotAccepted and stays. sql.ErrNoRows: there is none.
func consumeEdited(ctx context.Context, tx querier, acceptEdits bool, now time.Time, match []any) (string, error) {
	if acceptEdits {
		return consumeWhere(ctx, tx, approvedByOriginal, now, match)
	}
	var edited bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM requests INDEXED BY requests_live_binding WHERE `+
		approvedByOriginal+`)`, match...).Scan(&edited); err != nil {
		return "", fmt.Errorf("look for an edited approval: %w", err)
	}
	if edited {
		return "", countersign.ErrEditNotAccepted()
	}
	return "", sql.ErrNoRows
}

// consumeWhere consumes the approval where picks, the one decided first
// (then created first, then by id), and returns its id; sql.ErrNoRows
// when there is none.
func consumeWhere(ctx context.Context, tx querier, where string, now time.Time, match []any) (string, error) {
	var id string
	err := tx.QueryRowContext(ctx, `
		UPDATE requests SET status = 'consumed', consumed_at = ?
		WHERE status = 'approved' AND expires_at > ? AND id = (
			SELECT id FROM requests INDEXED BY requests_live_binding WHERE `+where+`
			ORDER BY decided_at, created_at, id LIMIT 1)
		RETURNING id`,
		append([]any{nanos(now), nanos(now)}, match...)...).Scan(&id)
	if err != nil && err != sql.ErrNoRows {
		return "", fmt.Errorf("consume approved request: %w", err)
	}
	return id, err
}
