// Package engine runs an SQLite file (modernc.org/sqlite, no cgo) in WAL
// mode for the SQLite store: the connections, the group-commit writer,
// the statement cache, and the change counter that keeps in-memory caches
// right across processes. It knows no table of the store; the store's SQL
// and rules stay in package sqlite.
//
// Writes go through one connection in BEGIN IMMEDIATE transactions, so that
// every read-then-write inside a transaction sees no other writer; reads go
// through a separate pool of query-only connections, so that they never
// queue behind a write. A third connection copies committed pages from the
// write-ahead log into the database file, so that the writer never waits for
// that copy or its fsync.
package engine

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
)

// readConns is the size of the read pool. WAL lets readers run beside the
// one writer; a few are enough for long polls that re-read after waking.
const readConns = 4

// Querier is what a change is given of its write transaction, and what the
// read pool offers too, so that one helper of the store serves both.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Config is what Open needs beside the path.
type Config struct {
	// BusyTimeout is how long a connection waits for a lock another
	// process on the file holds before it gives up with SQLITE_BUSY;
	// zero means 5 s.
	BusyTimeout time.Duration
	// Prepare, when set, runs on the write pool once the file is in WAL
	// mode and before the other connections open: the store applies its
	// migrations there. Its error is Open's, as it is.
	Prepare func(ctx context.Context, write *sql.DB) error
	// NewTxState, when set, makes the state of each write transaction
	// (see TxState); nil: the changes keep none.
	NewTxState func() TxState
}

// DB is one open SQLite file: its connections, its writer and its change
// counter.
type DB struct {
	write *sql.DB // one connection; every transaction is BEGIN IMMEDIATE
	read  *sql.DB // query-only connections
	ckpt  *sql.DB // one connection, for checkpoints

	newState func() TxState

	writes  chan *writeJob // to the writer, which commits them in groups
	closing chan struct{}  // closed by Close: the writer stops
	stopped chan struct{}  // closed by the writer when it has stopped
	closeMu sync.Once
	groups  atomic.Int64 // transactions the writer has run

	committed   chan struct{} // a token from the writer: there is work for the checkpointer
	ckptStopped chan struct{} // closed by the checkpointer when it has stopped
	checkpoints atomic.Int64  // checkpoints run

	changes *changeCounter // moved by every change to what caches hold; nil: nothing is cached

	// rowChanges counts the rows the write connection has changed;
	// rowHook is whether it does (SQLite built with the pre-update hook).
	rowChanges *atomic.Uint64
	rowHook    bool
}

// Open opens the database file at path, creating it when missing, readable
// by its owner only. The parent directory must exist.
func Open(ctx context.Context, path string, c Config) (*DB, error) {
	// A new database file is made here, readable by its owner only: it
	// holds the server's keys and the sealed secrets of channels, and
	// SQLite gives its -wal and -shm files the database file's mode.
	if f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	rowChanges := new(atomic.Uint64)
	write := sql.OpenDB(&connector{dsn: dsn(path, roleWrite, c.BusyTimeout), rowChanges: rowChanges})
	// One writer: SQLite allows no more, and queueing in database/sql is
	// cheaper and fairer than spinning on SQLITE_BUSY.
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if err := checkWAL(ctx, write); err != nil {
		write.Close()
		return nil, err
	}
	if c.Prepare != nil {
		if err := c.Prepare(ctx, write); err != nil {
			write.Close()
			return nil, err
		}
	}

	// The read pool opens after the writer has switched the file to WAL,
	// which a query-only connection could not do.
	read := sql.OpenDB(&connector{dsn: dsn(path, roleRead, c.BusyTimeout)})
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	ckpt := sql.OpenDB(&connector{dsn: dsn(path, roleCheckpoint, c.BusyTimeout)})
	ckpt.SetMaxOpenConns(1)
	ckpt.SetMaxIdleConns(1)
	ckpt.SetConnMaxLifetime(0)
	ckpt.SetConnMaxIdleTime(0)
	fail := func(err error) (*DB, error) {
		read.Close()
		ckpt.Close()
		write.Close()
		return nil, err
	}
	for _, p := range []*sql.DB{read, ckpt} {
		if err := p.PingContext(ctx); err != nil {
			return fail(err)
		}
	}
	changes, err := openChangeCounter(path)
	if err != nil && runtimeSharesMemory {
		return fail(err)
	}
	hook, err := rowHookWorks(ctx, write, rowChanges)
	if err != nil {
		return fail(err)
	}
	newState := c.NewTxState
	if newState == nil {
		newState = func() TxState { return noState{} }
	}
	db := &DB{
		rowChanges:  rowChanges,
		rowHook:     hook,
		changes:     changes,
		write:       write,
		read:        read,
		ckpt:        ckpt,
		newState:    newState,
		writes:      make(chan *writeJob, maxGroup),
		closing:     make(chan struct{}),
		stopped:     make(chan struct{}),
		committed:   make(chan struct{}, 1),
		ckptStopped: make(chan struct{}),
	}
	go db.writer()
	go db.checkpointer(checkpointEvery)
	return db, nil
}

// rowHookWorks reports whether the write pool counts the rows it changes,
// by changing one row of a table of its own in a transaction it rolls
// back. The statements go as one script, which the statement cache does
// not keep.
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
	_, err = c.ExecContext(ctx, `CREATE TEMP TABLE engine_row_hook (n INTEGER); INSERT INTO engine_row_hook (n) VALUES (1)`)
	_, rerr := c.ExecContext(ctx, `ROLLBACK`)
	if err = errors.Join(err, rerr); err != nil {
		return false, err
	}
	return n.Load() > before, nil
}

// Close stops the writer, after the group it is committing, and closes the
// connections. Changes asked for afterwards fail.
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

// Read returns the pool of query-only connections, which see what was
// committed and never wait for the writer.
func (db *DB) Read() *sql.DB { return db.read }

// Stats is what the engine has done since Open.
type Stats struct {
	Queued       int   // changes waiting for the writer
	Transactions int64 // write transactions begun; a group run again begins another
	Checkpoints  int64 // checkpoints the checkpointer ran
	// CountsRows is whether the write connection counts the rows it
	// changes: then a change that fails having changed none leaves the
	// others of its group alone (see UpdateUncached).
	CountsRows bool
}

// Stats returns what the engine has done so far.
func (db *DB) Stats() Stats {
	return Stats{
		Queued:       len(db.writes),
		Transactions: db.groups.Load(),
		Checkpoints:  db.checkpoints.Load(),
		CountsRows:   db.rowHook,
	}
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
