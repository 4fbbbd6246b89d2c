package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

var _ countersign.HistoryPruner = (*DB)(nil)

// pruneSelection is the finished requests to prune, oldest first, found
// among the finished ones alone (requests_done_created). Finished is
// final, so every statement of the transaction selects the same rows.
const pruneSelection = `SELECT id FROM requests
	WHERE status NOT IN ('pending', 'approved') AND created_at < $1 ORDER BY created_at LIMIT $2`

// PruneRequests removes old finished requests with what refers to them;
// see countersign.HistoryPruner.
func (db *DB) PruneRequests(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := db.update(ctx, func(tx pgx.Tx) error {
		for _, q := range []string{
			`DELETE FROM links WHERE request_id IN (` + pruneSelection + `)`,
			`DELETE FROM auto_approve_windows WHERE request_id IN (` + pruneSelection + `)`,
			`DELETE FROM coverages WHERE approval_id IN (` + pruneSelection + `)`,
			`DELETE FROM coverages WHERE request_id IN (` + pruneSelection + `)`,
			`DELETE FROM outbox WHERE request_id IN (` + pruneSelection + `)`,
		} {
			if _, err := tx.Exec(ctx, q, nanos(before), limit); err != nil {
				return fmt.Errorf("prune requests: %w", err)
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM requests WHERE id IN (`+pruneSelection+`)`, nanos(before), limit)
		if err != nil {
			return fmt.Errorf("prune requests: %w", err)
		}
		n = int(tag.RowsAffected())
		return nil
	})
	return n, err
}
