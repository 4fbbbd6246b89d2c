package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipe is a transaction on one connection that its caller drives in
// batches: the first batch begins it, and the last one ends with COMMIT.
// So the locks taken in the last batch (the head of the audit chain, above
// all) are held only while the server runs that batch and commits, never
// across a round trip to this process, which under load can take
// milliseconds of scheduling. A change of a request costs two round trips.
//
// Nor are they held while the commit is written to disk: the COMMIT does
// not wait for the flush (synchronous_commit off for this transaction),
// and a second transaction in the same round trip, which does wait
// (flushCommitted), makes the change durable before the caller hears of
// it. Meanwhile the next change takes the head and commits, and the
// commits waiting for the disk share its flushes, instead of each one
// flushing alone while every other waits for the head. A change is visible
// to other transactions that moment before it is durable; a crash of the
// database in it loses the change and every later one (the log is written
// in order), whose callers were all told of an error: no caller is told of
// a change the database can lose, and the audit chain that survives is
// whole.
type pipe struct {
	ctx  context.Context
	db   *DB
	conn *pgx.Conn
	// began is set once BEGIN was sent; committing once a batch ending in
	// COMMIT was sent, after which the outcome may be unknown.
	began, committing bool
	// open is the results of the batch last sent, closed before the next.
	open pgx.BatchResults
}

// send sends b, after BEGIN when it is the first batch.
func (p *pipe) send(b *pgx.Batch) pgx.BatchResults {
	return p.sendBatch(b, false)
}

// sendCommit sends b followed by COMMIT. The caller reads b's results, then
// the COMMIT's (commitResult).
func (p *pipe) sendCommit(b *pgx.Batch) pgx.BatchResults {
	return p.sendBatch(b, true)
}

func (p *pipe) sendBatch(b *pgx.Batch, commit bool) pgx.BatchResults {
	if p.open != nil {
		p.open.Close()
	}
	if !p.began {
		b.QueuedQueries = append([]*pgx.QueuedQuery{{SQL: "begin"}}, b.QueuedQueries...)
	}
	if commit {
		b.Queue("set local synchronous_commit = off")
		b.Queue("commit")
		b.Queue(flushCommitted)
		p.committing = true
	}
	p.open = p.conn.SendBatch(p.ctx, b)
	if !p.began {
		p.began = true
		if _, err := p.open.Exec(); err != nil {
			return pgx.FailedBatchResults(b, fmt.Errorf("begin: %w", err))
		}
	}
	return p.open
}

// unsent marks the transaction as not committing when err, met before the
// result of its COMMIT was read, shows that the COMMIT never ran: pgx sent
// nothing, or the server said it ended the connection (shutdown,
// termination), and a server answers in order, so a statement before the
// COMMIT that got this answer means the COMMIT was not run. The pipeline
// may then run the change again on a fresh connection. It returns err.
func (p *pipe) unsent(err error) error {
	if pe := pgError(err); pgconn.SafeToRetry(err) || (pe != nil && (pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03")) {
		p.committing = false
	}
	return err
}

// flushCommitted is the transaction that follows a COMMIT that did not
// wait for the disk (see pipe): taking a transaction id, its own commit
// waits, as the session's synchronous_commit says, until the log is
// flushed up to its commit record, which comes after the COMMIT's.
const flushCommitted = "select pg_current_xact_id()"

// commitResult reads the results of the COMMIT that sendCommit queued
// last and of the flush after it. An error of the flush leaves the
// change's outcome unknown, as one of the COMMIT does.
func commitResult(br pgx.BatchResults) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if tag.String() == "ROLLBACK" {
		return fmt.Errorf("commit: the transaction was rolled back")
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("commit: flush: %w", err)
	}
	return br.Close()
}

// pipeline runs fn in a pipe and rolls back whatever fn leaves open: a
// refusal, a twin found, an error. When the connection turned out dead
// before any COMMIT was sent, it runs fn once more on a fresh connection.
func (db *DB) pipeline(ctx context.Context, fn func(p *pipe) error) error {
	release, err := db.gate(ctx)
	if err != nil {
		return err
	}
	defer release()
	committing, err := db.pipelineOnce(ctx, fn)
	if err != nil && !committing && lostConnection(err) && ctx.Err() == nil {
		db.pool.Reset()
		_, err = db.pipelineOnce(ctx, fn)
	}
	return err
}

func (db *DB) pipelineOnce(ctx context.Context, fn func(p *pipe) error) (committing bool, err error) {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire a connection: %w", err)
	}
	defer c.Release()
	p := &pipe{ctx: ctx, db: db, conn: c.Conn()}
	err = fn(p)
	if p.open != nil {
		if cerr := p.open.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	// A connection left inside a transaction is rolled back before it goes
	// back to the pool; one that cannot be is closed, and the pool drops it.
	if !p.conn.IsClosed() && p.conn.PgConn().TxStatus() != 'I' {
		if _, rerr := p.conn.Exec(context.WithoutCancel(ctx), "rollback"); rerr != nil {
			p.conn.Close(context.WithoutCancel(ctx))
		}
	}
	return p.committing, err
}

// gate holds a write back while half of the pool already writes. Writes
// queue on row and advisory locks inside the database; a connection waiting
// there serves nobody, and without the gate a burst of writes could take
// every connection from the reads, such as a woken long poll re-reading its
// request.
func (db *DB) gate(ctx context.Context) (release func(), err error) {
	select {
	case db.writers <- struct{}{}:
		return func() { <-db.writers }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
