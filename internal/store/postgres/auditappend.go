package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// AppendAudit appends ev as an entry of the account that belongs to no
// request, after the head of the chain like every other entry (keyed when
// the store is sealed); see countersign.Store. Errors: EINVALID,
// ENOTFOUND for an unknown account.
func (db *DB) AppendAudit(ctx context.Context, accountID string, now time.Time, ev countersign.AuditEvent) error {
	if err := countersign.CheckAuditEvent(accountID, ev); err != nil {
		return err
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM accounts WHERE id = $1`, accountID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return countersign.Errorf(countersign.ENOTFOUND, "no such account")
		} else if err != nil {
			return fmt.Errorf("append audit entry: %w", err)
		}
		return db.appendAudit(ctx, tx, now, auditItem{accountID: accountID, ev: ev})
	})
}
