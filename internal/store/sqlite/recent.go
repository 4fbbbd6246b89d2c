package sqlite

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countersign/countersign/internal/store/sqlite/engine"
)

// recent keeps each request as this process last wrote it, created or
// moved by one transition, so that a read that follows at once (the long
// poll an agent starts as soon as its request is made) needs no query.
//
// An entry serves only while nothing else can have changed its request:
//   - no change of this process that may change a request without keeping
//     it here (an expiry, a stop of a session, a vote, an import…) has
//     started since the entry's change ran on the writer: every change
//     but those that keep their request counts as one (see changeStarts);
//   - no other process has committed to the file since (engine.Stamp);
//   - the entry is younger than engine.CacheTTL, for a process the stamp
//     cannot see (one that died between its commit and its count).
//
// Of two entries for one request, the one whose change ran later on the
// writer wins, whatever order their callers keep them in.
type recent struct {
	mu     sync.Mutex
	m      map[string]recentRow
	closed bool // the store is closed: nothing is kept or served
	// order numbers the changes in the order the writer runs them;
	// generic is the number of the last change that may have changed a
	// request without keeping it.
	order, generic atomic.Uint64
}

type recentRow struct {
	row   *requestRow // as the change left it; never changed after
	order uint64
	stamp engine.Stamp
	at    time.Time
}

// recentMax bounds the entries; when full, the map starts again empty.
const recentMax = 4096

// keep is where a change that keeps its request ran, taken in its
// transaction.
type keep struct {
	order uint64
	stamp engine.Stamp
}

// changeStarts is called by every change that does not keep what it
// changed, on the writer, before it changes anything: no entry kept
// before serves after.
func (db *DB) changeStarts() {
	db.recent.generic.Store(db.recent.order.Add(1))
}

// keepStamp is called by a change that keeps its request (keepRequest), on
// the writer, in its transaction.
func (db *DB) keepStamp() keep {
	return keep{order: db.recent.order.Add(1), stamp: db.eng.Stamp()}
}

// keepRequest keeps row, as the change stamped k left it, once that change
// has committed.
func (db *DB) keepRequest(row *requestRow, k keep) {
	if row == nil || !db.fresh(k.order, k.stamp) {
		return
	}
	c := &db.recent
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[row.r.ID]; c.closed || ok && e.order >= k.order {
		return
	}
	if c.m == nil || len(c.m) >= recentMax {
		c.m = make(map[string]recentRow)
	}
	c.m[row.r.ID] = recentRow{row: row, order: k.order, stamp: k.stamp, at: time.Now()}
}

// recentRequest returns the request id as this process last wrote it,
// when nothing can have changed it since; nil otherwise.
func (db *DB) recentRequest(id string) *requestRow {
	c := &db.recent
	c.mu.Lock()
	e, ok := c.m[id]
	c.mu.Unlock()
	if !ok || !db.fresh(e.order, e.stamp) {
		return nil
	}
	if age := time.Since(e.at); age < 0 || age >= engine.CacheTTL {
		return nil
	}
	return e.row
}

// close drops what is kept, for good: a closed store answers no read.
func (c *recent) close() {
	c.mu.Lock()
	c.m, c.closed = nil, true
	c.mu.Unlock()
}

// keptRow returns the row of request id as this process last kept it,
// however old, or nil: only what no change sets after the insert may be
// taken from it (see mutableColumns).
func (db *DB) keptRow(id string) *requestRow {
	c := &db.recent
	c.mu.Lock()
	e := c.m[id]
	c.mu.Unlock()
	return e.row
}

// fresh reports whether nothing but changes that keep their requests ran
// since the change numbered order, stamped s.
func (db *DB) fresh(order uint64, s engine.Stamp) bool {
	return order > db.recent.generic.Load() && db.eng.Alone(s)
}

// updateKept makes a change that changes one request and keeps it
// (keepStamp, keepRequest), and nothing else of any other request. It does
// not move the change counter (see updateUncached).
func (db *DB) updateKept(ctx context.Context, fn func(ctx context.Context, tx querier) error) error {
	return db.eng.UpdateUncached(ctx, fn)
}
