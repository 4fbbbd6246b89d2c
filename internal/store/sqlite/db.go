// Package sqlite implements countersign.Store on an SQLite file, with
// embedded migrations. It holds the store's SQL and rules; the file's
// connections, the group-commit writer, the statement cache and the
// change counter that keeps the caches right are package engine's.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/sqlite/engine"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var (
	_ countersign.Store       = (*DB)(nil)
	_ countersign.WriteHealth = (*DB)(nil)
)

// DB is a countersign.Store on one SQLite file.
type DB struct {
	eng    *engine.DB
	read   *sql.DB // eng.Read(): query-only connections
	caches caches

	// key is the server's secret key (see secretkey.go); nil for a store
	// opened without one, which must never have been sealed.
	key       *countersign.SecretKey
	keyedFrom atomic.Int64 // the first keyed audit entry; 0: none is
	// keyExisted: the key file was there before this start (see
	// WithKeyFileExisted).
	keyExisted bool

	// outbox rings after every commit that added outbox items (see
	// countersign.OutboxWatcher).
	outbox countersign.Bell

	// recent keeps the requests this process has just written (recent.go).
	recent recent
}

var _ countersign.OutboxWatcher = (*DB)(nil)

// WatchOutbox implements countersign.OutboxWatcher for the changes this
// process commits; another process on the same file is found by the
// notification worker's poll.
func (db *DB) WatchOutbox() (<-chan struct{}, func()) { return db.outbox.Watch() }

// Open opens the database file at path, creating it when missing, and
// applies the migrations this binary knows. A database whose schema is newer
// than the binary is refused. The parent directory must exist. With
// WithSecretKey, a store not sealed yet is sealed with the key, and one
// sealed with another key is refused; without it, a sealed store is
// refused (see secretkey.go).
func Open(ctx context.Context, path string, opts ...Option) (*DB, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	eng, err := engine.Open(ctx, path, engine.Config{
		Prepare: applyMigrations,
		// The writer keeps the head of the audit chain for each group
		// of changes, and writes it once (see auditTx).
		NewTxState: func() engine.TxState { return &auditTx{key: o.key} },
		MaxLog:     o.maxLog,
		Log:        o.log,
		Trace:      o.trace,
	})
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	db := &DB{eng: eng, read: eng.Read(), key: o.key, keyExisted: o.keyExisted}
	if err := db.seal(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return db, nil
}

// WithMaxLog bounds the write-ahead log to n bytes (see
// engine.Config.MaxLog); 0 keeps engine.DefaultMaxLog.
func WithMaxLog(n int64) Option {
	return func(o *options) { o.maxLog = n }
}

// WithLog sends the store's own events to log: the start and the end of a
// time in which it cannot write (a full disk, say). Without it they are
// discarded.
func WithLog(log *slog.Logger) Option {
	return func(o *options) { o.log = log }
}

// WriteError returns why the store cannot write now, or "" when it can
// (see countersign.WriteHealth).
func (db *DB) WriteError() string { return db.eng.WriteError() }

// EngineStats returns what the engine has done since Open: checkpoints,
// the log's size, failed writes by cause.
func (db *DB) EngineStats() engine.Stats { return db.eng.Stats() }

// Close stops the writer, after the group it is committing, and closes the
// connections. Changes asked for afterwards fail.
func (db *DB) Close() error {
	db.recent.close()
	return db.eng.Close()
}

// updateCached makes a change that may change what the caches hold (keys,
// tokens, sessions, grants, accounts, channels): once it is committed, the
// change counter moves, so that no cache serves what it changed. When in
// doubt, updateCached: a change to cached data made through updateUncached
// is served stale, such as a revoked key honoured until the cache entry
// ages out. See engine.DB.UpdateCached.
func (db *DB) updateCached(ctx context.Context, fn func(ctx context.Context, tx querier) error) error {
	return db.eng.UpdateCached(ctx, func(ctx context.Context, tx querier) error {
		db.changeStarts()
		return fn(ctx, tx)
	})
}

// updateUncached makes a change that touches nothing a cache holds:
// requests, auto-approve windows, the audit log, the outbox. It does not
// move the change counter. See engine.DB.UpdateUncached.
func (db *DB) updateUncached(ctx context.Context, fn func(ctx context.Context, tx querier) error) error {
	return db.eng.UpdateUncached(ctx, func(ctx context.Context, tx querier) error {
		db.changeStarts()
		return fn(ctx, tx)
	})
}

// configExec runs one statement that changes what a cache may hold, in a
// transaction of its own, and moves the change counter once it committed.
func (db *DB) configExec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) (err error) {
		res, err = tx.ExecContext(ctx, query, args...)
		return err
	})
	return res, err
}

// querier is what the helpers need of a transaction or of the read pool, so
// that one helper serves both.
type querier = engine.Querier

// nanos is how a time is stored: unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos reverses nanos, in UTC.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// sqliteCode returns the extended result code of an SQLite error, or 0.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// isUnique reports whether err is a violation of a UNIQUE or PRIMARY KEY
// constraint.
func isUnique(err error) bool {
	c := sqliteCode(err)
	return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// isForeignKey reports whether err is a violation of a foreign key: the
// account, key or approver referred to does not exist.
func isForeignKey(err error) bool {
	return sqliteCode(err) == sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY
}

// orID returns id, or a new id with the prefix when id is empty.
func orID(id, prefix string) string {
	if id == "" {
		return countersign.NewID(prefix)
	}
	return id
}
