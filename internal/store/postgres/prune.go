package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

var _ countersign.HistoryPruner = (*DB)(nil)

// pruneSelection finds the finished requests to prune, oldest first, among
// the finished ones alone (requests_done_created), less those an
// Idempotency-Key's record refers to (its retry is answered with the
// request), and locks them. It is
// run once: under READ COMMITTED each statement sees what committed before
// it, so a selection run again could name other requests (one finished
// meanwhile, or another of equal age), and a DELETE of requests would then
// meet what still refers to one. The id orders equal ages, and the lock
// keeps anything new from referring to a selected request.
const pruneSelection = `SELECT id FROM requests
	WHERE status NOT IN ('pending', 'approved') AND created_at < $1
	AND NOT EXISTS (SELECT 1 FROM idempotency i WHERE i.request_id = requests.id)
	ORDER BY created_at, id LIMIT $2 FOR UPDATE OF requests`

// PruneRequests removes old finished requests with what refers to them;
// see countersign.HistoryPruner.
func (db *DB) PruneRequests(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	var n int
	err := db.update(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, pruneSelection, nanos(before), limit)
		if err != nil {
			return fmt.Errorf("prune requests: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("prune requests: %w", err)
		}
		if len(ids) == 0 {
			n = 0
			return nil
		}
		for _, q := range []string{
			`DELETE FROM links WHERE request_id = ANY($1)`,
			`DELETE FROM votes WHERE request_id = ANY($1)`,
			`DELETE FROM auto_approve_windows WHERE request_id = ANY($1)`,
			`DELETE FROM coverages WHERE approval_id = ANY($1)`,
			`DELETE FROM coverages WHERE request_id = ANY($1)`,
			// The outbox's request_id has the database's collation,
			// its index (outbox_request) "C".
			`DELETE FROM outbox WHERE request_id COLLATE "C" = ANY($1)`,
		} {
			if _, err := tx.Exec(ctx, q, ids); err != nil {
				return fmt.Errorf("prune requests: %w", err)
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM requests WHERE id = ANY($1)`, ids)
		if err != nil {
			return fmt.Errorf("prune requests: %w", err)
		}
		n = int(tag.RowsAffected())
		return nil
	})
	return n, err
}
