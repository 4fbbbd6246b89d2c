// Package sqlite implements countersign.Store on an SQLite file
// (modernc.org/sqlite, no cgo), in WAL mode, with embedded migrations.
//
// Writes go through one connection in BEGIN IMMEDIATE transactions, so that
// every read-then-write inside a transaction sees no other writer; reads go
// through a separate pool of query-only connections, so that they never
// queue behind a write.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var _ countersign.Store = (*DB)(nil)

// readConns is the size of the read pool. WAL lets readers run beside the
// one writer; a few are enough for long polls that re-read after waking.
const readConns = 4

// DB is a countersign.Store on one SQLite file.
type DB struct {
	write *sql.DB // one connection; every transaction is BEGIN IMMEDIATE
	read  *sql.DB // query-only connections
}

// Open opens the database file at path, creating it when missing, and
// applies the migrations this binary knows. A database whose schema is newer
// than the binary is refused. The parent directory must exist.
func Open(ctx context.Context, path string) (*DB, error) {
	write := sql.OpenDB(&connector{dsn: dsn(path, false)})
	// One writer: SQLite allows no more, and queueing in database/sql is
	// cheaper and fairer than spinning on SQLITE_BUSY.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if err := checkWAL(ctx, write); err != nil {
		write.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := migrate(ctx, write); err != nil {
		write.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}

	// The read pool opens after the writer has switched the file to WAL,
	// which a query-only connection could not do.
	read := sql.OpenDB(&connector{dsn: dsn(path, true)})
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	if err := read.PingContext(ctx); err != nil {
		read.Close()
		write.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return &DB{write: write, read: read}, nil
}

// Close closes both pools.
func (db *DB) Close() error {
	return errors.Join(db.read.Close(), db.write.Close())
}

// dsn builds the data source name of one pool. Pragmas go in the DSN so that
// every connection the pool opens, now or after a reconnect, gets them.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(1)")
	// NORMAL in WAL mode loses nothing when the process is killed; only a
	// power cut can lose the last commits.
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	}
	// A file: URI with the path escaped, so that a '?' or '#' in a
	// directory name cannot be taken for the start of the parameters.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + esc + "?" + q.Encode()
}

// checkWAL makes sure the journal is a write-ahead log: without it readers
// would block the writer, and the durability promise would be another.
func checkWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, not wal", mode)
	}
	return nil
}

// update runs fn in one write transaction and commits when it returns nil.
func (db *DB) update(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// querier is what the helpers need of a transaction or of the read pool, so
// that one helper serves both.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

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
