// Package sqlite implements countersign.Store on an SQLite file
// (modernc.org/sqlite, no cgo), in WAL mode, with embedded migrations.
//
// Writes go through one connection in BEGIN IMMEDIATE transactions, so that
// every read-then-write inside a transaction sees no other writer; reads go
// through a separate pool of query-only connections, so that they never
// queue behind a write. A third connection copies committed pages from the
// write-ahead log into the database file, so that the writer never waits for
// that copy or its fsync.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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
	ckpt  *sql.DB // one connection, for checkpoints

	writes  chan *writeJob // to the writer, which commits them in groups
	closing chan struct{}  // closed by Close: the writer stops
	stopped chan struct{}  // closed by the writer when it has stopped
	closeMu sync.Once
	groups  atomic.Int64 // transactions the writer has run

	committed   chan struct{} // a token from the writer: there is work for the checkpointer
	ckptStopped chan struct{} // closed by the checkpointer when it has stopped
	checkpoints atomic.Int64  // checkpoints run

	changes *changeCounter // moved by every change to what caches hold; nil: nothing is cached
	caches  caches

	// rowChanges counts the rows the write connection has changed;
	// rowHook is whether it does (SQLite built with the pre-update hook).
	rowChanges *atomic.Uint64
	rowHook    bool

	// key is the server's secret key (see secretkey.go); nil for a store
	// opened without one, which must never have been sealed.
	key       *countersign.SecretKey
	keyedFrom atomic.Int64 // the first keyed audit entry; 0: none is
	// keyExisted: the key file was there before this start (see
	// WithKeyFileExisted).
	keyExisted bool
}

// rowHookWorks reports whether the write pool counts the rows it changes,
// by changing one row in a transaction it rolls back.
func rowHookWorks(ctx context.Context, write *sql.DB, n *atomic.Uint64) (bool, error) {
	c, err := write.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()
	before := n.Load()
	if _, err := c.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return false, err
	}
	_, err = c.ExecContext(ctx, `UPDATE audit_head SET seq = seq WHERE id = 1`)
	_, rerr := c.ExecContext(ctx, `ROLLBACK`)
	if err = errors.Join(err, rerr); err != nil {
		return false, err
	}
	return n.Load() > before, nil
}

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
	// A new database file is made here, readable by its owner only: it
	// holds the server's keys and the sealed secrets of channels, and
	// SQLite gives its -wal and -shm files the database file's mode.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("open store: %w", err)
	}
	rowChanges := new(atomic.Uint64)
	write := sql.OpenDB(&connector{dsn: dsn(path, roleWrite, o.busyTimeout), rowChanges: rowChanges})
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
	if err := applyMigrations(ctx, write); err != nil {
		write.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}

	// The read pool opens after the writer has switched the file to WAL,
	// which a query-only connection could not do.
	read := sql.OpenDB(&connector{dsn: dsn(path, roleRead, o.busyTimeout)})
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	ckpt := sql.OpenDB(&connector{dsn: dsn(path, roleCheckpoint, o.busyTimeout)})
	ckpt.SetMaxOpenConns(1)
	ckpt.SetMaxIdleConns(1)
	ckpt.SetConnMaxLifetime(0)
	ckpt.SetConnMaxIdleTime(0)
	for _, p := range []*sql.DB{read, ckpt} {
		if err := p.PingContext(ctx); err != nil {
			read.Close()
			ckpt.Close()
			write.Close()
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	changes, err := openChangeCounter(path)
	if err != nil && runtimeSharesMemory {
		read.Close()
		ckpt.Close()
		write.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	hook, err := rowHookWorks(ctx, write, rowChanges)
	if err != nil {
		read.Close()
		ckpt.Close()
		write.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	db := &DB{
		rowChanges:  rowChanges,
		rowHook:     hook,
		changes:     changes,
		write:       write,
		read:        read,
		ckpt:        ckpt,
		writes:      make(chan *writeJob, maxGroup),
		closing:     make(chan struct{}),
		stopped:     make(chan struct{}),
		committed:   make(chan struct{}, 1),
		ckptStopped: make(chan struct{}),
		key:         o.key,
		keyExisted:  o.keyExisted,
	}
	go db.writer()
	go db.checkpointer(checkpointEvery)
	if err := db.seal(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return db, nil
}

// Close stops the writer, after the group it is committing, and closes both
// pools. Changes asked for afterwards fail.
func (db *DB) Close() error {
	db.closeMu.Do(func() {
		close(db.closing)
		<-db.stopped
		<-db.ckptStopped
	})
	// The write pool closes last: the last connection to close copies
	// what is left of the log into the file.
	return errors.Join(db.read.Close(), db.ckpt.Close(), db.write.Close())
}

// The connections of a DB, by what they are for.
type role int

const (
	roleWrite role = iota
	roleRead
	roleCheckpoint
)

// defaultBusyTimeout is how long a connection waits for a lock that another
// process on the file holds before it gives up with SQLITE_BUSY.
const defaultBusyTimeout = 5 * time.Second

// withBusyTimeout sets the busy timeout of every connection, so that a test
// of what happens past it need not wait the default.
func withBusyTimeout(d time.Duration) Option {
	return func(o *options) { o.busyTimeout = d }
}

// dsn builds the data source name of one pool. Pragmas go in the DSN so that
// every connection the pool opens, now or after a reconnect, gets them.
func dsn(path string, r role, busy time.Duration) string {
	if busy <= 0 {
		busy = defaultBusyTimeout
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	// NORMAL in WAL mode loses nothing when the process is killed; only a
	// power cut can lose the last commits.
	q.Add("_pragma", "synchronous(NORMAL)")
	switch r {
	case roleRead:
		q.Add("_pragma", "query_only(1)")
	case roleWrite:
		q.Add("_pragma", "journal_mode(WAL)")
		// The checkpointer copies the log into the file. The writer
		// does so itself only when the log has grown far past what the
		// checkpointer leaves: when the checkpointer cannot keep up, or
		// a reader holds an old snapshot for long.
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", writerCheckpointPages))
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

// checkpointEvery is the longest a commit waits for its pages to be copied
// from the log into the database file: under load, one checkpoint copies
// the commits of this long together.
const checkpointEvery = 100 * time.Millisecond

// writerCheckpointPages is the size of the log, in pages, at which the writer
// checkpoints itself (SQLite's default is 1,000).
const writerCheckpointPages = 20000

// checkpointer copies committed pages from the log into the database file,
// at most once every interval and only after commits, until Close. A
// passive checkpoint neither waits for nor blocks the writer or readers;
// what a reader still needs stays in the log for the next one.
func (db *DB) checkpointer(interval time.Duration) {
	defer close(db.ckptStopped)
	t := time.NewTimer(interval)
	t.Stop()
	for {
		select {
		case <-db.committed:
		case <-db.closing:
			return
		}
		t.Reset(interval)
		select {
		case <-t.C:
		case <-db.closing:
			return
		}
		// An error (a full disk, say) leaves the pages in the log: the
		// next commit brings the next try, and the writer's own
		// checkpoint bounds the log meanwhile.
		if _, err := db.ckpt.ExecContext(context.Background(), `PRAGMA wal_checkpoint(PASSIVE)`); err == nil {
			db.checkpoints.Add(1)
		}
	}
}

// updateCached runs fn in a write transaction and commits its changes when it
// returns nil; when it returns an error, none of its changes are kept.
//
// The changes of concurrent callers are committed in groups: the writer
// takes every change waiting for it, runs each in a savepoint of one
// transaction, and commits once. Under load one commit, and one write of
// the pages every change touches (the audit head, the indexes), serves many
// changes. Each caller still sees only its own outcome: a change whose fn
// fails is rolled back to its savepoint, and no caller hears of success
// before the commit.
//
// fn may run twice, when a change grouped with it fails (see commitGroup):
// it must set, not add to, what it hands back to its caller.
//
// ctx bounds the wait for the writer. Once the writer has started a change
// the change runs to its end with the context fn is given, which keeps
// ctx's values but not its cancellation: an interrupted statement would
// roll back the whole group.
//
// A change made with updateCached may change what the caches hold (keys,
// tokens, sessions, grants, accounts, channels): once it is committed, the
// change counter moves, so that no cache serves what it changed. Changes
// to requests, the audit log and the outbox, which no cache holds, go
// through updateUncached, which leaves the counter: the caches stay warm.
// When in doubt, updateCached: a change to cached data made through
// updateUncached is served stale, such as a revoked key honoured until
// the cache entry ages out.
func (db *DB) updateCached(ctx context.Context, fn func(ctx context.Context, tx querier) error) error {
	return db.run(ctx, fn, false)
}

// updateUncached is updateCached for a change that touches nothing a
// cache holds: requests, auto-approve windows, the audit log, the outbox.
// It does not move the change counter.
func (db *DB) updateUncached(ctx context.Context, fn func(ctx context.Context, tx querier) error) error {
	return db.run(ctx, fn, true)
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
