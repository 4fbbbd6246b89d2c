// Package postgres implements countersign.Store on PostgreSQL (pgx), for
// several `countersign serve` replicas sharing one database. Its semantics
// are those of the SQLite store, which the shared conformance suite checks.
//
// Where SQLite serialises every write through one connection, PostgreSQL
// runs transactions side by side, so the store orders what must not
// interleave itself:
//
//   - a state change that races is one conditional UPDATE: of two callers,
//     the one that waits re-checks the row once the other commits and
//     changes nothing;
//   - the audit chain is appended under the lock of its head row
//     (SELECT … FOR UPDATE), taken last in each transaction, so that
//     entries get consecutive numbers in commit order; the database
//     computes each entry's hash (see appendSQL), so that a change of a
//     request takes two round trips and the head is never held across
//     one, nor, for a change of a request, while its commit is flushed
//     (see pipe);
//   - creating a request holds a transaction-scoped advisory lock of its
//     account, so that two identical requests or two requests at the
//     account's pending limit cannot both pass the checks;
//   - expiry locks the rows it expires in id order, so that two replicas
//     sweeping at once wait for each other instead of deadlocking.
//
// Every committed change of a request sends one pg_notify('countersign',
// '<request id> <account id> <origin>[ +outbox]') in its transaction;
// Listen turns those of other replicas into wake-ups of the waiters here,
// and of the notification worker when the change added to the outbox (see
// notify.go).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	_ countersign.Store         = (*DB)(nil)
	_ countersign.ChangeFeed    = (*DB)(nil)
	_ countersign.OutboxWatcher = (*DB)(nil)
	_ countersign.Exporter      = (*DB)(nil)
	_ countersign.Importer      = (*DB)(nil)
)

// defaultMaxConns is the pool size unless the URL sets pool_max_conns. A
// long poll holds no connection while it waits, so a few serve many agents;
// pgx's own default (4 on small machines) queues under a burst of
// decisions.
const defaultMaxConns = 16

// DB is a countersign.Store on a PostgreSQL database.
type DB struct {
	pool *pgxpool.Pool
	// listenConfig is the configuration of the listener's own connection.
	listenConfig *pgx.ConnConfig
	log          *slog.Logger
	// writers admits at most half the pool's connections to write at
	// once (see gate).
	writers chan struct{}
	// group holds the changes waiting to be written in a group commit
	// (group.go).
	group groupQueue

	// backoff bounds the listener's pauses between reconnection attempts.
	minBackoff, maxBackoff time.Duration
	// listening, when set (tests), is told the backend process id of the
	// listener's connection each time it starts listening, and 0 when it
	// lost it.
	listening func(pid uint32)

	// key is the server's secret key (see secretkey.go), ipad and opad
	// the pads of its audit key; nil for a store opened without one, which
	// must never have been sealed.
	key        *countersign.SecretKey
	ipad, opad []byte
	keyedFrom  atomic.Int64 // the first keyed audit entry; 0: none is

	failures writeFailures // writes that failed, by cause (stats.go)

	// outbox rings after every commit of this process that added outbox
	// items, and when the change feed hears of one by another replica.
	outbox countersign.Bell
	// channels keeps the channels of accounts while Listen runs.
	channels channelCache
	// creds keeps the agent keys and approver tokens looked up while
	// Listen runs.
	creds credCache
	// teams keeps the recorded teams configuration while Listen runs.
	teams teamsCache
	// origin names this DB value in the notifications of its changes,
	// which Listen passes over (see payload).
	origin string
}

// WatchOutbox implements countersign.OutboxWatcher: it hears the commits
// of this process at once, and those of other replicas while Listen runs.
func (db *DB) WatchOutbox() (<-chan struct{}, func()) { return db.outbox.Watch() }

// Open connects to the database at url (postgres://… or key=value), applies
// the migrations this binary knows under an advisory lock, so that replicas
// starting together migrate once, and refuses a database whose schema is
// newer than the binary. log receives the listener's reconnections; nil
// discards. With WithSecretKey, a store not sealed yet is sealed with the
// key, and one sealed with another key is refused; without it, a sealed
// store is refused (see secretkey.go).
func Open(ctx context.Context, url string, log *slog.Logger, opts ...Option) (*DB, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx redacts the password from the message.
		return nil, fmt.Errorf("open store: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = defaultMaxConns
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "countersign"
	}
	if o.tracer != nil {
		cfg.ConnConfig.Tracer = o.tracer
	}
	listen := cfg.ConnConfig.Copy()
	listen.RuntimeParams["application_name"] = cfg.ConnConfig.RuntimeParams["application_name"] + " listener"

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: connect to PostgreSQL: %w", err)
	}
	if err := applyMigrations(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	db := &DB{pool: pool, listenConfig: listen, log: log, writers: make(chan struct{}, max(cfg.MaxConns/2, 1)),
		minBackoff: 50 * time.Millisecond, maxBackoff: 5 * time.Second, key: o.key, origin: countersign.NewID("")}
	if o.key != nil {
		db.ipad, db.opad = o.key.AuditPads()
	}
	if err := db.seal(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return db, nil
}

// Close closes the pool. A Listen in progress ends with its context.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// querier is what the helpers need of a transaction or of the pool, so that
// one helper serves both.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// update runs fn in one transaction and commits when it returns nil. When
// the connection turned out dead before the commit (the database
// restarted), nothing was committed, so it runs fn once more on a fresh
// connection; a failed commit is never retried, its outcome is unknown.
func (db *DB) update(ctx context.Context, fn func(tx pgx.Tx) error) error {
	release, err := db.gate(ctx)
	if err != nil {
		return err
	}
	defer release()
	// Whatever fn changed, the credentials kept here are read again
	// (credCache): a revocation holds for the next call at once.
	defer db.creds.clear()
	atCommit, err := db.updateOnce(ctx, fn)
	if err != nil && !atCommit && lostConnection(err) && ctx.Err() == nil {
		db.pool.Reset()
		_, err = db.updateOnce(ctx, fn)
	}
	db.failures.observe(err)
	return err
}

func (db *DB) updateOnce(ctx context.Context, fn func(tx pgx.Tx) error) (atCommit bool, err error) {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return true, fmt.Errorf("commit: %w", err)
	}
	return false, nil
}

// read runs a read once more when it failed because the connection was
// lost: after a database restart the pool may hand out connections that
// died, and a waiter re-reading after the restart must not fail for that.
func (db *DB) read(ctx context.Context, fn func(q querier) error) error {
	err := fn(db.pool)
	if err != nil && lostConnection(err) && ctx.Err() == nil {
		db.pool.Reset()
		err = fn(db.pool)
	}
	return err
}

// lostConnection reports whether err says the connection is gone rather
// than that the statement failed: then nothing was done and the statement
// may run again on another connection.
func lostConnection(err error) bool {
	var pe *pgconn.PgError
	var ne net.Error
	switch {
	case countersign.ErrorCode(err) != countersign.EINTERNAL:
		return false
	case pgconn.SafeToRetry(err):
		return true
	case errors.As(err, &pe):
		// Class 08: connection exception; 57P01-57P03: the server shut
		// down or is starting.
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed):
		return true
	case errors.As(err, &ne):
		return !ne.Timeout()
	}
	return strings.Contains(err.Error(), "conn closed")
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

// pgError returns the server's error inside err, or nil.
func pgError(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// isUnique reports whether err is a violation of a UNIQUE or PRIMARY KEY
// constraint.
func isUnique(err error) bool {
	pe := pgError(err)
	return pe != nil && pe.Code == "23505"
}

// isForeignKey reports whether err is a violation of a foreign key: the
// account, key or approver referred to does not exist.
func isForeignKey(err error) bool {
	pe := pgError(err)
	return pe != nil && pe.Code == "23503"
}

// badText turns PostgreSQL's refusal of a NUL character in a text column
// (SQLite stores one) into an error fit for the caller; other errors pass.
func badText(err error) error {
	if pe := pgError(err); pe != nil && (pe.Code == "22021" || pe.Code == "22P05") {
		return countersign.Errorf(countersign.EINVALID, "text must not contain NUL characters")
	}
	return err
}

// hasNUL reports whether a value looked up contains a NUL character, which
// no stored text can hold: the lookup finds nothing, as in SQLite, instead
// of failing.
func hasNUL(vals ...string) bool {
	for _, v := range vals {
		if strings.IndexByte(v, 0) >= 0 {
			return true
		}
	}
	return false
}

// orID returns id, or a new id with the prefix when id is empty.
func orID(id, prefix string) string {
	if id == "" {
		return countersign.NewID(prefix)
	}
	return id
}

// orEmpty stores a nil byte slice as an empty bytea, not NULL.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// args numbers the parameters of a statement built piece by piece.
type args []any

// add appends v and returns its placeholder.
func (a *args) add(v any) string {
	*a = append(*a, v)
	return fmt.Sprintf("$%d", len(*a))
}
