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
	"log/slog"
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
	// MaxLog bounds the write-ahead log, in bytes: past it the
	// checkpointer copies the whole log into the file and truncates it,
	// and SQLite trims the log to it whenever the log starts over. Zero
	// means DefaultMaxLog; it is at least one page.
	MaxLog int64
	// Log receives the start and the end of each episode in which the
	// store cannot write (a full disk, say); nil discards.
	Log *slog.Logger
	// Trace, when set, is told the text of every statement any
	// connection runs, before it runs: the tests of the store's query
	// plans collect them. It must be safe for concurrent use.
	Trace func(query string)
}

// DefaultMaxLog is the bound of the write-ahead log when Config.MaxLog is
// zero. Under load with readers always on the file, SQLite's own
// checkpoints cannot start the log over, and it grows until the disk is
// full; a small disk must hold the file and this much beside it.
const DefaultMaxLog = 32 << 20

// pageSize is SQLite's default page size, which the store keeps.
const pageSize = 4096

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
	urgent      chan struct{} // a token from a write that failed for space: truncate the log now
	ckptStopped chan struct{} // closed by the checkpointer when it has stopped
	checkpoints atomic.Int64  // checkpoints run
	ckptNanos   atomic.Int64  // time spent in them
	truncations atomic.Int64  // checkpoints that truncated the log

	path   string
	maxLog int64
	health health

	changes *changeCounter // moved by every change to what caches hold; nil: nothing is cached
	// ownCommits counts the commits of this process, beside the count of
	// every process's in changes (see Stamp).
	ownCommits atomic.Uint64

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
	maxLog := c.MaxLog
	if maxLog <= 0 {
		maxLog = DefaultMaxLog
	}
	maxLog = max(maxLog, pageSize)
	write := sql.OpenDB(&connector{dsn: dsn(path, roleWrite, c.BusyTimeout, maxLog), rowChanges: rowChanges, trace: c.Trace})
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
	read := sql.OpenDB(&connector{dsn: dsn(path, roleRead, c.BusyTimeout, maxLog), trace: c.Trace})
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	ckpt := sql.OpenDB(&connector{dsn: dsn(path, roleCheckpoint, c.BusyTimeout, maxLog)})
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
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
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
		urgent:      make(chan struct{}, 1),
		ckptStopped: make(chan struct{}),
		path:        path,
		maxLog:      maxLog,
		health:      health{log: log},
	}
	// A log left past its bound by an earlier process (one that ran out
	// of space, say) is copied and truncated before the first change.
	db.boundLog()
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
	// CheckpointTime is the time the checkpoints took, all together;
	// Truncations counts those that truncated the log.
	CheckpointTime time.Duration
	Truncations    int64
	// LogBytes is the size of the write-ahead log now; MaxLog its bound.
	LogBytes, MaxLog int64
	// WriteFailures counts the changes that failed for an error of
	// SQLite's since Open, by cause (Cause*).
	WriteFailures map[string]int64
	// CountsRows is whether the write connection counts the rows it
	// changes: then a change that fails having changed none leaves the
	// others of its group alone (see UpdateUncached).
	CountsRows bool
}

// Stats returns what the engine has done so far.
func (db *DB) Stats() Stats {
	return Stats{
		Queued:         len(db.writes),
		Transactions:   db.groups.Load(),
		Checkpoints:    db.checkpoints.Load(),
		CheckpointTime: time.Duration(db.ckptNanos.Load()),
		Truncations:    db.truncations.Load(),
		LogBytes:       db.logSize(),
		MaxLog:         db.maxLog,
		WriteFailures:  db.health.failures(),
		CountsRows:     db.rowHook,
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
func dsn(path string, r role, busy time.Duration, maxLog int64) string {
	if busy <= 0 {
		busy = defaultBusyTimeout
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	// NORMAL in WAL mode loses nothing when the process is killed; only a
	// power cut can lose the last commits.
	q.Add("_pragma", "synchronous(NORMAL)")
	// Whichever connection starts the log over trims its file to the
	// bound, so that the space a burst took is given back.
	q.Add("_pragma", fmt.Sprintf("journal_size_limit(%d)", maxLog))
	switch r {
	case roleRead:
		q.Add("_pragma", "query_only(1)")
	case roleWrite:
		q.Add("_pragma", "journal_mode(WAL)")
		// The checkpointer copies the log into the file. The writer
		// does so itself only when the log has grown far past what the
		// checkpointer leaves: when the checkpointer cannot keep up, or
		// a reader holds an old snapshot for long.
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", writerCheckpointPages(maxLog)))
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
// checkpoints itself (SQLite's default is 1,000): 20,000, or fewer when the
// log's bound is smaller, so that the writer copies before the bound is
// passed even when the checkpointer lags.
func writerCheckpointPages(maxLog int64) int {
	return int(min(20000, max(1, maxLog/pageSize)))
}

// checkpointer copies committed pages from the log into the database file,
// at most once every interval and only after commits, until Close. A
// passive checkpoint neither waits for nor blocks the writer or readers;
// what a reader still needs stays in the log for the next one. When the
// log has passed its bound all the same (readers always on the file keep
// SQLite from starting it over), or a write failed for space, a
// truncating checkpoint waits for the readers and empties it. While the
// store cannot write, it tries again every retryEvery, with a probe write.
func (db *DB) checkpointer(interval time.Duration) {
	defer close(db.ckptStopped)
	t := time.NewTimer(interval)
	t.Stop()
	var retry <-chan time.Time
	for {
		select {
		case <-db.committed:
			t.Reset(interval)
			select {
			case <-t.C:
			case <-db.closing:
				return
			}
			// An error (a full disk, say) leaves the pages in the
			// log: the next commit brings the next try.
			db.checkpoint(`PRAGMA wal_checkpoint(PASSIVE)`)
			db.boundLog()
		case <-db.urgent:
			db.truncate()
		case <-retry:
			retry = nil
			db.truncate()
			db.probe(context.Background())
		case <-db.closing:
			return
		}
		// The next try is a second after the last, however many
		// commits (of changes that write nothing) come meanwhile.
		if !db.health.failing.Load() {
			retry = nil
		} else if retry == nil {
			retry = time.After(retryEvery)
		}
	}
}

// retryEvery is how often the checkpointer tries to write while the store
// cannot.
const retryEvery = time.Second

// checkpoint runs one checkpoint statement on the checkpoint connection,
// counting it and its time. It reports whether the checkpoint did all it
// was asked: one that waited for readers or the writer in vain says so in
// its first column, with no error.
func (db *DB) checkpoint(stmt string) bool {
	start := time.Now()
	var busy, logged, copied int64
	err := db.ckpt.QueryRowContext(context.Background(), stmt).Scan(&busy, &logged, &copied)
	if err != nil {
		return false
	}
	db.ckptNanos.Add(int64(time.Since(start)))
	db.checkpoints.Add(1)
	return busy == 0
}

// boundLog truncates the log when it has passed its bound.
func (db *DB) boundLog() {
	if db.logSize() > db.maxLog {
		db.truncate()
	}
}

// truncate copies the whole log into the database file and truncates the
// log to nothing. It waits for readers, and holds off the writer while it
// copies, each at most the busy timeout.
func (db *DB) truncate() {
	if db.checkpoint(`PRAGMA wal_checkpoint(TRUNCATE)`) {
		db.truncations.Add(1)
	}
}
