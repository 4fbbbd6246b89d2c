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
	"runtime/debug"
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

func (db *DB) run(ctx context.Context, fn func(ctx context.Context, tx querier) error, uncached bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	j := &writeJob{ctx: context.WithoutCancel(ctx), fn: fn, uncached: uncached, done: make(chan error, 1)}
	select {
	case db.writes <- j:
	case <-ctx.Done():
		return fmt.Errorf("begin: %w", ctx.Err())
	case <-db.closing:
		return errStoreClosed
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return fmt.Errorf("begin: %w", ctx.Err())
		}
	case <-db.stopped:
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return errStoreClosed
		}
	}
	// The writer has started the change: its outcome is the answer.
	return <-j.done
}

var errStoreClosed = errors.New("store is closed")

// maxGroup bounds the changes committed together, so that one commit does
// not keep the first of them waiting for long.
const maxGroup = 64

// States of a writeJob.
const (
	jobQueued int32 = iota
	jobRunning
	jobAbandoned // its caller stopped waiting before the writer started it
)

// writeJob is one caller's change, waiting for the writer.
type writeJob struct {
	ctx      context.Context
	fn       func(ctx context.Context, tx querier) error
	uncached bool // changes nothing a cache holds: the change counter stays
	state    atomic.Int32
	// started is set by the writer when it starts the change: a group
	// run again runs it again. answered is set when its caller has its
	// outcome: once, whatever fails after.
	started, answered bool
	err               error // fn's outcome, then the commit's
	done              chan error
}

// answer gives the caller its outcome, once.
func (j *writeJob) answer(err error) {
	if !j.answered {
		j.answered = true
		j.done <- err
	}
}

// run runs the change. A panic is the change's error, not the writer's
// end: the caller's request fails and the server goes on. Results the
// change left open, by a panic or an early return, are closed: an open
// one would keep the write connection from ever being put back.
func (j *writeJob) run(tx querier, audit *auditTx) (err error) {
	g := openResults{querier: tx}
	defer func() {
		g.close()
		if p := recover(); p != nil {
			err = fmt.Errorf("write transaction panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return j.fn(context.WithValue(j.ctx, auditTxKey{}, audit), &g)
}

// openResults is a querier that keeps what its queries return, for close.
type openResults struct {
	querier
	rows []*sql.Rows
	row  []*sql.Row
}

func (g *openResults) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := g.querier.QueryContext(ctx, query, args...)
	if err == nil {
		g.rows = append(g.rows, rows)
	}
	return rows, err
}

func (g *openResults) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	row := g.querier.QueryRowContext(ctx, query, args...)
	g.row = append(g.row, row)
	return row
}

// close closes every result: closing one already closed does nothing, and
// Scan with nothing to scan into closes a row, scanned or not.
func (g *openResults) close() {
	for _, r := range g.rows {
		r.Close()
	}
	for _, r := range g.row {
		r.Scan()
	}
}

// writer runs the changes sent to updateCached and updateUncached, in groups, until Close.
func (db *DB) writer() {
	defer close(db.stopped)
	group := make([]*writeJob, 0, maxGroup)
	for {
		select {
		case j := <-db.writes:
			group = append(group[:0], j)
		case <-db.closing:
			return
		}
	more:
		for len(group) < maxGroup {
			select {
			case j := <-db.writes:
				group = append(group, j)
			default:
				break more
			}
		}
		db.commitGroup(group)
		clear(group)
	}
}

// commitGroup runs the changes of group in one transaction and answers
// each caller. A change is started only when its turn comes, so that its
// caller may still give up while the changes before it run.
//
// The changes run one after the other in the transaction, with nothing
// around each. When one fails, the whole transaction is rolled back and
// the group runs again, each change in a savepoint of its own, so that
// only the failing one is undone. The second run starts from the same
// state and runs the changes in the same order, so each does what it did
// the first time; a change's function must therefore not build on what an
// earlier run of it left behind (see updateCached).
func (db *DB) commitGroup(group []*writeJob) {
	if db.runGroup(group, len(group) == 1) {
		return
	}
	db.runGroup(group, true)
}

// runGroup runs group in one transaction, each change in a savepoint when
// isolate is set, and answers every caller, but when isolate is not set
// and a change failed: then it rolls everything back, answers no one, and
// reports false, so that the group runs again isolated. A group of one is
// run with isolate set and no savepoint: its transaction is its own.
//
// The transaction is BEGIN IMMEDIATE and COMMIT on the write connection,
// not a database/sql Tx, which would start a goroutine for every query
// made in it.
func (db *DB) runGroup(group []*writeJob, isolate bool) (done bool) {
	var (
		tx  *sql.Conn   // in a transaction while not nil
		ran []*writeJob // started, and not yet answered
	)
	defer func() {
		if tx != nil {
			tx.ExecContext(context.Background(), `ROLLBACK`)
			tx.Close()
		}
	}()
	// fail answers every change of the group with err: nothing of the
	// group is kept. Only a change that failed on its own before any
	// change of this run succeeded keeps its own error: a later one may
	// have failed because of what an earlier one did (a decision that
	// came second), which is now undone. A change started in an earlier
	// run and not reached in this one gets err too.
	fail := func(err error) {
		succeeded := false
		for _, j := range ran {
			if j.err != nil && !succeeded {
				j.answer(j.err)
			} else {
				j.answer(err)
			}
			succeeded = succeeded || j.err == nil
		}
		db.failQueued(group, err)
	}
	ctx := context.Background()
	savepoints := isolate && len(group) > 1
	audit := &auditTx{key: db.key}
	for _, j := range group {
		if !j.started {
			if !j.state.CompareAndSwap(jobQueued, jobRunning) {
				continue
			}
			j.started = true
		}
		ran = append(ran, j)
		j.err = nil // what an earlier run left is not this run's
		if tx == nil {
			var err error
			if tx, err = db.begin(ctx); err != nil {
				fail(fmt.Errorf("begin: %w", err))
				return true
			}
			db.groups.Add(1)
		}
		if !j.uncached {
			// A change to cached data may write the audit
			// log itself (an import does): the head goes to the
			// table before it, and is read again after it.
			if err := audit.flush(ctx, tx); err != nil {
				fail(err)
				return true
			}
		}
		if !savepoints {
			before, rows := *audit, db.rowChanges.Load()
			j.err = j.run(tx, audit)
			if j.err != nil && db.rowHook && db.rowChanges.Load() == rows && j.uncached && sqliteCode(j.err) == 0 {
				// A refusal that changed no row (a decision that
				// came second, a limit reached) leaves nothing to
				// undo but what it chained in the audit log: the
				// others go on. A change to cached data is
				// not trusted with this; it may have written what
				// the hook does not see, such as a table's schema.
				// Nor is a failure of SQLite's own (a full disk, an
				// I/O error), after which the transaction may be
				// gone. The refusal is answered with the others,
				// after the commit: its reason may be a change before
				// it in this group, which a failed commit undoes, and
				// a group run again runs it again.
				*audit = before
				continue
			}
			if j.err != nil {
				if !isolate {
					return false // the deferred rollback undoes the group
				}
				j.answer(j.err)
				return true
			}
		} else {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT change`); err != nil {
				fail(fmt.Errorf("begin: %w", err))
				return true
			}
			before := *audit
			j.err = j.run(tx, audit)
			release := `RELEASE change`
			if j.err != nil {
				release = `ROLLBACK TO change; RELEASE change`
				*audit = before
			}
			if _, err := tx.ExecContext(ctx, release); err != nil {
				// SQLite may have rolled back the whole transaction (a
				// full disk, an I/O error): nothing of the group is kept.
				fail(fmt.Errorf("write transaction rolled back: %w", err))
				return true
			}
		}
		if !j.uncached {
			// Whatever it appended goes to the table too.
			if err := audit.flush(ctx, tx); err != nil {
				fail(err)
				return true
			}
			audit.forget()
		}
	}
	if tx == nil {
		return true
	}
	if err := audit.flush(ctx, tx); err != nil {
		fail(err)
		return true
	}
	if _, err := tx.ExecContext(ctx, `COMMIT`); err != nil {
		// Whether anything was kept is not known for sure: entries
		// read before are not served again either way.
		for _, j := range ran {
			if !j.uncached && db.changes != nil {
				db.changes.bump()
				break
			}
		}
		fail(fmt.Errorf("commit: %w", err))
		return true
	}
	tx.Close()
	tx = nil
	// The counter moves before any caller hears of the commit, and after
	// it, so that an entry read before the commit is never served again.
	for _, j := range ran {
		if !j.uncached && j.err == nil && db.changes != nil {
			db.changes.bump()
			break
		}
	}
	for _, j := range ran {
		j.answer(j.err)
	}
	select {
	case db.committed <- struct{}{}:
	default: // the checkpointer has its token already
	}
	return true
}

// begin takes the write connection and starts a transaction on it that
// holds the write lock from the start.
func (db *DB) begin(ctx context.Context) (*sql.Conn, error) {
	c, err := db.write.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := c.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// failQueued answers the changes of group not answered yet with err: those
// not started, and those started in an earlier run of the group.
func (db *DB) failQueued(group []*writeJob, err error) {
	for _, j := range group {
		if j.started || j.state.CompareAndSwap(jobQueued, jobRunning) {
			j.started = true
			j.answer(err)
		}
	}
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
