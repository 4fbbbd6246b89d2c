package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

var _ countersign.HistoryPruner = (*DB)(nil)

// pruneSelection is the finished requests to prune, oldest first, found
// among the finished ones alone (requests_done_created), less those an
// Idempotency-Key's record refers to: its retry is answered with the
// request. Each statement
// of the transaction runs it again, and each selects the same rows: the
// transaction is the only writer from its first statement to its commit
// (SQLite writes one at a time), and the index walk orders equal ages the
// same way every time.
const pruneSelection = `SELECT id FROM requests INDEXED BY requests_done_created
	WHERE status NOT IN ('pending', 'approved') AND created_at < ?1
	AND NOT EXISTS (SELECT 1 FROM idempotency i WHERE i.request_id = requests.id)
	ORDER BY created_at LIMIT ?2`

// PruneRequests removes old finished requests with what refers to them;
// see countersign.HistoryPruner. It goes through the cached path: a
// coverage is among what it removes.
func (db *DB) PruneRequests(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		for _, q := range []string{
			`DELETE FROM links WHERE request_id IN (` + pruneSelection + `)`,
			`DELETE FROM votes WHERE request_id IN (` + pruneSelection + `)`,
			`DELETE FROM auto_approve_windows WHERE request_id IN (` + pruneSelection + `)`,
			`DELETE FROM coverages WHERE approval_id IN (` + pruneSelection + `)`,
			`DELETE FROM coverages WHERE request_id IN (` + pruneSelection + `)`,
			`DELETE FROM outbox WHERE request_id IN (` + pruneSelection + `)`,
		} {
			if _, err := tx.ExecContext(ctx, q, nanos(before), limit); err != nil {
				return fmt.Errorf("prune requests: %w", err)
			}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM requests WHERE id IN (`+pruneSelection+`)`, nanos(before), limit)
		if err != nil {
			return fmt.Errorf("prune requests: %w", err)
		}
		rows, err := res.RowsAffected()
		n = int(rows)
		return err
	})
	return n, err
}
