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

// Which approvals of a key a retry takes: those whose binding is the
// call's, and, only when none is, those an approver edited whose
// original is the call's. Both read the key's live requests alone
// (requests_live_binding); the second only its edited ones, whose
// original text holds the hashes (countersign.EncodeOriginal). Their
// parameters are the same: now, key, kind, action, argument hash,
// preview hash, tier.
const (
	approvedByBinding = `key_id = $2 AND kind = $3 AND action = $4 AND args_hash = $5 AND preview_hash = $6 AND tier = $7
		AND seed_id = '' AND status = 'approved' AND expires_at > $1`
	approvedByOriginal = `key_id = $2 AND kind = $3 AND action = $4 AND status = 'approved' AND original <> ''
		AND (nullif(original, '')::jsonb ->> 'ArgsHash') = $5 AND (nullif(original, '')::jsonb ->> 'PreviewHash') = $6
		AND tier = $7 AND seed_id = '' AND expires_at > $1`
)

// ConsumeApproved consumes the approved, unexpired request of keyID with the
// binding, oldest decision first, or else, for a caller that accepts
// edits, the edited one whose original has it, and writes ev; see
// countersign.Store. The UPDATE names its row by a subquery and checks
// the status again, so of two callers exactly one gets a given approval.
// Callers of one key take turns (an advisory lock), so that the second
// sees what the first took and gets the next approval, if any, as with
// SQLite's single writer. Errors: ENOTFOUND when no request matches,
// ECONFLICT (ErrEditNotAccepted).
func (db *DB) ConsumeApproved(ctx context.Context, keyID string, kind countersign.Kind, action, argsHash, previewHash string, tier countersign.Tier, acceptEdits bool, now time.Time, ev countersign.AuditEvent) (*countersign.Request, error) {
	notFound := countersign.ErrNoApprovedMatch()
	if hasNUL(keyID, string(kind), action, argsHash, previewHash, string(tier)) {
		return nil, notFound
	}
	match := []any{nanos(now), keyID, string(kind), action, argsHash, previewHash, string(tier)}
	var got *countersign.Request
	err := db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, hashtext($2))`, int32(keyLock), keyID); err != nil {
			return fmt.Errorf("lock the agent key: %w", err)
		}
		r, err := consumeWhere(ctx, tx, approvedByBinding, match)
		if errors.Is(err, pgx.ErrNoRows) {
			r, err = consumeEdited(ctx, tx, acceptEdits, match)
		}
		if errors.Is(err, pgx.ErrNoRows) {
			return notFound
		} else if err != nil {
			return err
		}
		got = r
		batch := &pgx.Batch{}
		queueNotify(batch, db.payload(r.ID, r.AccountID, ""))
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("announce the consumption: %w", err)
		}
		return db.appendAudit(ctx, tx, now, auditItem{r.AccountID, r.ID, ev})
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

// consumeEdited consumes the first approval whose original has the
// binding of match, for a caller that runs edits; for any other, such an
// approval is ErrEditNotAccepted and stays. pgx.ErrNoRows: there is none.
func consumeEdited(ctx context.Context, tx pgx.Tx, acceptEdits bool, match []any) (*countersign.Request, error) {
	if acceptEdits {
		return consumeWhere(ctx, tx, approvedByOriginal, match)
	}
	var edited bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM requests WHERE `+approvedByOriginal+`)`, match...).Scan(&edited); err != nil {
		return nil, fmt.Errorf("look for an edited approval: %w", err)
	}
	if edited {
		return nil, countersign.ErrEditNotAccepted()
	}
	return nil, pgx.ErrNoRows
}

// consumeWhere consumes the approval where picks, the one decided first
// (then created first, then by id); pgx.ErrNoRows when there is none.
// A Transition of the same row by id (a consume or an expiry) can still
// win the row between the subquery and the update; then the next
// statement, with a fresh snapshot, looks again.
func consumeWhere(ctx context.Context, tx pgx.Tx, where string, match []any) (*countersign.Request, error) {
	for range 5 {
		r, err := scanRequest(tx.QueryRow(ctx, `
			UPDATE requests SET status = 'consumed', consumed_at = $1
			WHERE status = 'approved' AND expires_at > $1 AND id = (
				SELECT id FROM requests WHERE `+where+`
				ORDER BY decided_at, created_at, id LIMIT 1)
			RETURNING `+requestColumns, match...))
		if !errors.Is(err, pgx.ErrNoRows) {
			if err != nil {
				return nil, fmt.Errorf("consume approved request: %w", err)
			}
			return r, nil
		}
		var left bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM requests WHERE `+where+`)`, match...).Scan(&left); err != nil {
			return nil, fmt.Errorf("consume approved request: %w", err)
		}
		if !left {
			return nil, pgx.ErrNoRows
		}
	}
	return nil, pgx.ErrNoRows
}
