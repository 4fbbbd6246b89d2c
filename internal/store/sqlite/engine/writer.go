package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"

	"modernc.org/sqlite"
)

// The group-commit writer: every change goes to one goroutine, which runs
// the changes waiting at once in one transaction and one commit.

// UpdateCached runs fn in a write transaction and commits its changes when
// it returns nil; when it returns an error, none of its changes are kept.
//
// The changes of concurrent callers are committed in groups: the writer
// takes every change waiting for it, runs each in a savepoint of one
// transaction, and commits once. Under load one commit, and one write of
// the pages every change touches (the audit head, the indexes), serves many
// changes. Each caller still sees only its own outcome: a change whose fn
// fails is rolled back to its savepoint, and no caller hears of success
// before the commit.
//
// fn may run twice, when a change grouped with it fails and the group
// runs again: it must set, not add to, what it hands back to its caller.
//
// ctx bounds the wait for the writer. Once the writer has started a change
// the change runs to its end with the context fn is given, which keeps
// ctx's values but not its cancellation: an interrupted statement would
// roll back the whole group. That context also carries the transaction's
// state (TxStateOf).
//
// A change made with UpdateCached may change what caches hold (the
// store's keys, tokens, accounts, channels): once it is committed, the
// change counter moves, so that no cache serves what it changed (see
// CacheVersion). Changes to what no cache holds go through UpdateUncached,
// which leaves the counter: the caches stay warm. When in doubt,
// UpdateCached: a change to cached data made through UpdateUncached is
// served stale, such as a revoked key honoured until the cache entry ages
// out.
//
// A change made with UpdateCached may also write, by its own statements,
// what the transaction's state stands for (an import writes audit entries
// itself): the state is flushed before it, and flushed and forgotten after
// it.
//
// After Close it fails with an error saying the store is closed.
func (db *DB) UpdateCached(ctx context.Context, fn func(ctx context.Context, tx Querier) error) error {
	return db.run(ctx, fn, false)
}

// UpdateUncached is UpdateCached for a change that touches nothing a cache
// holds. It does not move the change counter. And when its fn fails
// having changed no row (a refusal: a decision that came second, a limit
// reached), its group is not run again: what it changed of the
// transaction's state is undone (TxState.Undo), the others go on.
func (db *DB) UpdateUncached(ctx context.Context, fn func(ctx context.Context, tx Querier) error) error {
	return db.run(ctx, fn, true)
}

// run hands fn to the writer and waits for its outcome.
func (db *DB) run(ctx context.Context, fn func(ctx context.Context, tx Querier) error, uncached bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	j := &writeJob{ctx: context.WithoutCancel(ctx), fn: fn, uncached: uncached, done: make(chan error, 1)}
	select {
	case db.writes <- j:
	case <-ctx.Done():
		return fmt.Errorf("begin: %w", ctx.Err())
	case <-db.closing:
		return ErrClosed
	}
	err := db.wait(ctx, j)
	if db.health.observe(err) {
		select {
		case db.urgent <- struct{}{}:
		default: // the checkpointer has its token already
		}
	}
	return err
}

// wait waits for the outcome of j, queued.
func (db *DB) wait(ctx context.Context, j *writeJob) error {
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return fmt.Errorf("begin: %w", ctx.Err())
		}
	case <-db.stopped:
		if j.state.CompareAndSwap(jobQueued, jobAbandoned) {
			return ErrClosed
		}
	}
	// The writer has started the change: its outcome is the answer.
	return <-j.done
}

// ErrClosed is the error of a change asked for after Close.
var ErrClosed = errors.New("store is closed")

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
	fn       func(ctx context.Context, tx Querier) error
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
func (j *writeJob) run(tx Querier, state TxState) (err error) {
	g := openResults{Querier: tx}
	defer func() {
		g.close()
		if p := recover(); p != nil {
			err = fmt.Errorf("write transaction panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return j.fn(context.WithValue(j.ctx, stateKey{}, state), &g)
}

// openResults is a Querier that keeps what its queries return, for close.
type openResults struct {
	Querier
	rows []*sql.Rows
	row  []*sql.Row
}

func (g *openResults) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	rows, err := g.Querier.QueryContext(ctx, query, args...)
	if err == nil {
		g.rows = append(g.rows, rows)
	}
	return rows, err
}

func (g *openResults) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	row := g.Querier.QueryRowContext(ctx, query, args...)
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

// writer runs the changes sent to UpdateCached and UpdateUncached, in groups, until Close.
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
		// The goroutines ready to run go first, once: under load they
		// are the callers about to hand over their changes, which then
		// share this commit instead of each waiting for one of its own.
		// On a quiet server there are none, and this costs nothing.
		runtime.Gosched()
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
// earlier run of it left behind (see UpdateCached). A group of one runs
// alone: its transaction is its own, and its failure its answer.
func (db *DB) commitGroup(group []*writeJob) {
	if len(group) == 1 {
		db.runGroup(group, runAlone)
		return
	}
	if db.runGroup(group, runTogether) {
		return
	}
	db.runGroup(group, runIsolated)
}

// runMode is how a run of a group treats a change that fails.
type runMode int

const (
	// runTogether runs the changes with nothing around each; the first
	// that fails rolls back the group, which runs again isolated.
	runTogether runMode = iota
	// runAlone runs a group of one: a failure is its change's answer.
	runAlone
	// runIsolated runs each change in a savepoint, so that a failure
	// undoes only its own change.
	runIsolated
)

// step is what a run does after one change.
type step int

const (
	stepNext  step = iota // go on with the next change
	stepDone              // the run is over: every caller is answered
	stepAgain             // roll back: the group runs again isolated
)

// runGroup runs group in one transaction as mode says and answers every
// caller, but when a change of a runTogether run failed: then it rolls
// everything back, answers no one, and reports false.
func (db *DB) runGroup(group []*writeJob, mode runMode) (done bool) {
	g := &groupRun{db: db, group: group, state: db.newState()}
	defer g.rollback()
	for _, j := range group {
		var s step
		if mode == runIsolated {
			s = g.isolatedStep(j)
		} else {
			s = g.plainStep(j, mode)
		}
		switch s {
		case stepDone:
			return true
		case stepAgain:
			return false // the deferred rollback undoes the group
		}
	}
	g.commitAndAnswer()
	return true
}

// groupRun is one run of a group of changes in one transaction.
//
// The transaction is BEGIN IMMEDIATE and COMMIT on the write connection,
// not a database/sql Tx, which would start a goroutine for every query
// made in it.
type groupRun struct {
	db    *DB
	group []*writeJob
	tx    *sql.Conn   // in a transaction while not nil
	ran   []*writeJob // started, and not yet answered
	state TxState     // what the changes keep beside their rows
}

// rollback undoes what the run did not commit.
func (g *groupRun) rollback() {
	if g.tx != nil {
		g.tx.ExecContext(context.Background(), `ROLLBACK`)
		g.tx.Close()
		g.tx = nil
	}
}

// fail answers every change of the group with err: nothing of the group
// is kept. Only a change that failed on its own before any change of this
// run succeeded keeps its own error: a later one may have failed because
// of what an earlier one did (a decision that came second), which is now
// undone. A change started in an earlier run and not reached in this one
// gets err too.
func (g *groupRun) fail(err error) step {
	succeeded := false
	for _, j := range g.ran {
		if j.err != nil && !succeeded {
			j.answer(j.err)
		} else {
			j.answer(err)
		}
		succeeded = succeeded || j.err == nil
	}
	g.db.failQueued(g.group, err)
	return stepDone
}

// start starts j in the run, unless its caller gave up on it (false),
// beginning the transaction at the first change. A change to cached data
// may write what the state stands for itself (an import writes the audit
// log): the state is flushed before it, and forgotten after it (finish).
func (g *groupRun) start(j *writeJob) (bool, error) {
	if !j.started {
		if !j.state.CompareAndSwap(jobQueued, jobRunning) {
			return false, nil
		}
		j.started = true
	}
	g.ran = append(g.ran, j)
	j.err = nil // what an earlier run left is not this run's
	ctx := context.Background()
	if g.tx == nil {
		var err error
		if g.tx, err = g.db.begin(ctx); err != nil {
			return false, fmt.Errorf("begin: %w", err)
		}
		g.db.groups.Add(1)
	}
	if !j.uncached {
		if err := g.state.Flush(ctx, g.tx); err != nil {
			return false, err
		}
	}
	return true, nil
}

// finish ends j in the run: what a change to cached data kept in the
// state is flushed, and the state forgotten.
func (g *groupRun) finish(j *writeJob) error {
	if j.uncached {
		return nil
	}
	if err := g.state.Flush(context.Background(), g.tx); err != nil {
		return err
	}
	g.state.Forget()
	return nil
}

// plainStep runs j with nothing around it.
func (g *groupRun) plainStep(j *writeJob, mode runMode) step {
	if ok, err := g.start(j); err != nil {
		return g.fail(err)
	} else if !ok {
		return stepNext
	}
	g.state.Mark()
	rows := g.db.rowChanges.Load()
	j.err = j.run(g.tx, g.state)
	if j.err != nil && g.db.harmlessRefusal(j, rows) {
		// The refusal is answered with the others, after the commit:
		// its reason may be a change before it in this group, which a
		// failed commit undoes, and a group run again runs it again.
		g.state.Undo()
		return stepNext
	}
	if j.err != nil {
		if mode == runTogether {
			return stepAgain
		}
		j.answer(j.err)
		return stepDone
	}
	if err := g.finish(j); err != nil {
		return g.fail(err)
	}
	return stepNext
}

// harmlessRefusal reports whether the failure of j, run while the row
// counter was at rows, is a refusal that changed no row (a decision that
// came second, a limit reached): it leaves nothing to undo but what it
// kept in the transaction's state, and the others go on. A change to cached
// data is not trusted with this; it may have written what the hook does
// not see, such as a table's schema. Nor is a failure of SQLite's own (a
// full disk, an I/O error), after which the transaction may be gone.
func (db *DB) harmlessRefusal(j *writeJob, rows uint64) bool {
	return db.rowHook && db.rowChanges.Load() == rows && j.uncached && !isSQLiteError(j.err)
}

// isSQLiteError reports whether err is, or wraps, an error of SQLite's.
func isSQLiteError(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se)
}

// isolatedStep runs j in a savepoint of its own, which its failure rolls
// back.
func (g *groupRun) isolatedStep(j *writeJob) step {
	if ok, err := g.start(j); err != nil {
		return g.fail(err)
	} else if !ok {
		return stepNext
	}
	if _, err := g.tx.ExecContext(context.Background(), `SAVEPOINT change`); err != nil {
		return g.fail(fmt.Errorf("begin: %w", err))
	}
	g.state.Mark()
	j.err = j.run(g.tx, g.state)
	release := `RELEASE change`
	if j.err != nil {
		release = `ROLLBACK TO change; RELEASE change`
		g.state.Undo()
	}
	if _, err := g.tx.ExecContext(context.Background(), release); err != nil {
		// SQLite may have rolled back the whole transaction (a full
		// disk, an I/O error): nothing of the group is kept.
		return g.fail(fmt.Errorf("write transaction rolled back: %w", err))
	}
	if err := g.finish(j); err != nil {
		return g.fail(err)
	}
	return stepNext
}

// commitAndAnswer commits the run and answers every change it ran. The
// change counter moves before any caller hears of the commit, and after
// it, so that an entry read before the commit is never served again.
func (g *groupRun) commitAndAnswer() {
	if g.tx == nil {
		return // every change was given up on
	}
	ctx := context.Background()
	if err := g.state.Flush(ctx, g.tx); err != nil {
		g.fail(err)
		return
	}
	if _, err := g.tx.ExecContext(ctx, `COMMIT`); err != nil {
		// Whether anything was kept is not known for sure: entries
		// read before are not served again either way.
		g.db.countCommit()
		g.bumpIf(func(j *writeJob) bool { return !j.uncached })
		g.fail(fmt.Errorf("commit: %w", err))
		return
	}
	g.tx.Close()
	g.tx = nil
	g.db.countCommit()
	g.bumpIf(func(j *writeJob) bool { return !j.uncached && j.err == nil })
	for _, j := range g.ran {
		j.answer(j.err)
	}
	select {
	case g.db.committed <- struct{}{}:
	default: // the checkpointer has its token already
	}
}

// bumpIf moves the change counter once when a change the run ran is one
// that changed.
func (g *groupRun) bumpIf(changed func(*writeJob) bool) {
	if g.db.changes == nil {
		return
	}
	for _, j := range g.ran {
		if changed(j) {
			g.db.changes.bump()
			return
		}
	}
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
