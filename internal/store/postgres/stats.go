package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

var _ countersign.StatsReporter = (*DB)(nil)

// writeFailures counts the writes that failed for the database's sake,
// by cause.
type writeFailures struct {
	mu      sync.Mutex
	byCause map[string]int64
}

// observe counts err when it is a failure of the database's or of the
// connection, not an answer of the store's (not found, a conflict).
func (f *writeFailures) observe(err error) {
	cause := failureCause(err)
	if cause == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCause == nil {
		f.byCause = make(map[string]int64)
	}
	f.byCause[cause]++
}

// snapshot returns the counts.
func (f *writeFailures) snapshot() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int64, len(f.byCause))
	for k, v := range f.byCause {
		m[k] = v
	}
	return m
}

// failureCause names why a write failed, "" when err is an answer of the
// store's own or the caller's giving up.
func failureCause(err error) string {
	if err == nil || countersign.ErrorCode(err) != countersign.EINTERNAL ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ""
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100": // disk_full
			return "disk_full"
		case strings.HasPrefix(pe.Code, "58"): // system error, io_error
			return "io"
		case pe.Code == "25006": // read_only_sql_transaction: a standby
			return "read_only"
		case strings.HasPrefix(pe.Code, "XX"): // internal error, data_corrupted
			return "corrupt"
		case pe.Code == "40001", pe.Code == "40P01", pe.Code == "55P03": // serialization, deadlock, lock_not_available
			return "busy"
		case strings.HasPrefix(pe.Code, "23"): // a constraint: an answer, not a failure
			return ""
		}
	}
	if lostConnection(err) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection"
	}
	return "other"
}

// StoreStats reports the writes that failed since Open and the oldest
// notification not delivered yet: the first entry of the partial index of
// pending items by age (outbox_pending_created), read at every scrape of
// /metrics.
func (db *DB) StoreStats(ctx context.Context) (countersign.StoreStats, error) {
	out := countersign.StoreStats{WriteFailures: db.failures.snapshot()}
	// Asked as the first in order, not as MIN: the planner then walks
	// the index whatever it guesses of the table's size.
	var oldest int64
	err := db.read(ctx, func(q querier) error {
		return q.QueryRow(ctx, `SELECT created_at FROM outbox WHERE state = 'pending' ORDER BY created_at LIMIT 1`).Scan(&oldest)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return out, nil // none waits
	} else if err != nil {
		return out, fmt.Errorf("read the oldest undelivered notification: %w", err)
	}
	out.OldestUndelivered = fromNanos(oldest)
	return out, nil
}
