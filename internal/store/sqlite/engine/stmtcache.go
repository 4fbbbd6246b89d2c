package engine

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"

	"modernc.org/sqlite"
)

// maxCachedStmts bounds the prepared statements kept per connection. The
// store's queries are a small fixed set; a few are built from optional
// filters, so the set is finite but not tiny.
const maxCachedStmts = 128

// connector opens connections whose statements are prepared once and kept.
//
// database/sql does not cache prepared statements, and modernc.org/sqlite
// parses every query it is given afresh: a quarter of the server's work
// under load was SQLite's parser. Each connection here keeps a prepared
// statement per query text and runs it again with new arguments. This lives
// below database/sql, on the connection itself, so that a transaction
// reuses the statements of its own connection; preparing through
// database/sql on the one-connection write pool while a transaction holds
// that connection would wait for it forever.
type connector struct {
	dsn string
	drv sqlite.Driver
	// rowChanges, when set, counts every row its connections insert,
	// update or delete (SQLite's pre-update hook).
	rowChanges *atomic.Uint64
	// trace, when set, is told the text of every statement run.
	trace func(query string)
}

func (c *connector) Connect(context.Context) (driver.Conn, error) {
	inner, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	if c.rowChanges != nil {
		h, ok := inner.(interface {
			RegisterPreUpdateHook(sqlite.PreUpdateHookFn)
		})
		if !ok {
			inner.Close()
			return nil, errors.New("sqlite driver connection has no pre-update hook")
		}
		n := c.rowChanges
		h.RegisterPreUpdateHook(func(sqlite.SQLitePreUpdateData) { n.Add(1) })
	}
	cc, err := newCachingConn(inner)
	if err == nil {
		cc.(*cachingConn).trace = c.trace
	}
	return cc, err
}

func (c *connector) Driver() driver.Driver { return &c.drv }

// innerConn is what modernc.org/sqlite's connection implements and the
// cache needs.
type innerConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

func newCachingConn(c driver.Conn) (driver.Conn, error) {
	inner, ok := c.(innerConn)
	if !ok {
		c.Close()
		return nil, errors.New("sqlite driver connection lacks the context methods")
	}
	return &cachingConn{innerConn: inner, stmts: map[string]*cachedStmt{}}, nil
}

// cachingConn is one connection with its prepared statements. database/sql
// uses a connection from one goroutine at a time, so the map needs no lock;
// a statement's busy flag is atomic because database/sql may close a
// result set from the goroutine that watches its context.
type cachingConn struct {
	innerConn
	stmts map[string]*cachedStmt
	trace func(query string) // see connector
}

type cachedStmt struct {
	stmt interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	}
	// busy is set while a result set of the statement is open; the same
	// query asked again meanwhile (a nested query) runs unprepared.
	busy atomic.Bool
}

// stmt returns the cached statement for query, preparing it on first use,
// or nil when query must run unprepared: a script of several statements,
// a full cache, or a statement in use.
func (c *cachingConn) stmt(ctx context.Context, query string) (*cachedStmt, error) {
	if c.trace != nil {
		c.trace(query)
	}
	if s, ok := c.stmts[query]; ok {
		if !s.busy.CompareAndSwap(false, true) {
			return nil, nil
		}
		return s, nil
	}
	if len(c.stmts) >= maxCachedStmts || strings.Contains(query, ";") {
		return nil, nil
	}
	ds, err := c.innerConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := ds.(interface {
		driver.Stmt
		driver.StmtExecContext
		driver.StmtQueryContext
	})
	if !ok {
		ds.Close()
		return nil, nil
	}
	s := &cachedStmt{stmt: st}
	s.busy.Store(true)
	c.stmts[query] = s
	return s, nil
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	} else if s == nil {
		return c.innerConn.ExecContext(ctx, query, args)
	}
	defer s.busy.Store(false)
	return s.stmt.ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	} else if s == nil {
		return c.innerConn.QueryContext(ctx, query, args)
	}
	rows, err := s.stmt.QueryContext(ctx, args)
	if err != nil {
		s.busy.Store(false)
		return nil, err
	}
	return &cachedRows{Rows: rows, s: s}, nil
}

// Close finalizes the cached statements, then closes the connection.
func (c *cachingConn) Close() error {
	var errs []error
	for q, s := range c.stmts {
		errs = append(errs, s.stmt.Close())
		delete(c.stmts, q)
	}
	return errors.Join(append(errs, c.innerConn.Close())...)
}

// cachedRows frees its statement for the next query when closed.
type cachedRows struct {
	driver.Rows
	s      *cachedStmt
	closed bool
}

func (r *cachedRows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.Rows.Close()
	r.s.busy.Store(false)
	return err
}
