package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/countersign/countersign"
)

var _ countersign.StatsReporter = (*DB)(nil)

// StoreStats reports the engine's failed writes, log and checkpoints, and
// the oldest notification not delivered yet: the first entry of the
// partial index of pending items by age (outbox_pending_created), read
// at every scrape of /metrics.
func (db *DB) StoreStats(ctx context.Context) (countersign.StoreStats, error) {
	st := db.eng.Stats()
	out := countersign.StoreStats{
		WriteFailures: st.WriteFailures, LogBytes: st.LogBytes, MaxLogBytes: st.MaxLog,
		Checkpoints: st.Checkpoints, CheckpointTime: st.CheckpointTime,
	}
	// MIN of an index's column is a search for its first entry.
	var oldest sql.NullInt64
	if err := db.read.QueryRowContext(ctx, `SELECT MIN(created_at) FROM outbox WHERE state = 'pending'`).Scan(&oldest); err != nil {
		return out, fmt.Errorf("read the oldest undelivered notification: %w", err)
	}
	out.OldestUndelivered = fromNanos(oldest.Int64)
	return out, nil
}
