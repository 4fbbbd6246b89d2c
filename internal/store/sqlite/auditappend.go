package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// AppendAudit appends ev as an entry of the account that belongs to no
// request, through the writer like every other entry, so that it takes
// the next place in the keyed chain; see countersign.Store. Errors:
// EINVALID, ENOTFOUND for an unknown account.
func (db *DB) AppendAudit(ctx context.Context, accountID string, now time.Time, ev countersign.AuditEvent) error {
	if err := countersign.CheckAuditEvent(accountID, ev); err != nil {
		return err
	}
	return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM accounts WHERE id = ?`, accountID).Scan(&one)
		if err == sql.ErrNoRows {
			return countersign.Errorf(countersign.ENOTFOUND, "no such account")
		} else if err != nil {
			return fmt.Errorf("append audit entry: %w", err)
		}
		return appendAudit(ctx, tx, now, accountID, "", ev)
	})
}
