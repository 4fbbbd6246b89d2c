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
	bytes  int  // the size of what m holds (rowSize)
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

// recentMax and recentBytes bound the entries, in number and in size;
// when full, the map starts again empty.
const (
	recentMax   = 1024
	recentBytes = 4 << 20
)

// rowSize is about the memory row holds.
func rowSize(row *requestRow) int {
	r := &row.r
	n := 512 // the row itself, the entry, the map's slot
	for _, s := range []string{row.args, row.reasons, row.rctx, row.seed, row.scope, r.ID, r.AccountID, r.KeyID, r.KeyName,
		r.Reference, string(r.Kind), r.Action, r.ArgsHash, r.Preview, r.PreviewHash, r.DecidedBy, r.Reason, r.SeedID, r.ArgumentsText,
		string(r.Tier), r.Ran.Action, r.Ran.ArgsHash} {
		n += len(s)
	}
	return n
}

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
	e, ok := c.m[row.r.ID]
	if c.closed || ok && e.order >= k.order {
		return
	}
	size := rowSize(row)
	if ok {
		c.bytes -= rowSize(e.row)
	}
	if c.m == nil || len(c.m) >= recentMax || c.bytes+size > recentBytes {
		c.m, c.bytes = make(map[string]recentRow), 0
	}
	c.m[row.r.ID] = recentRow{row: row, order: k.order, stamp: k.stamp, at: time.Now()}
	c.bytes += size
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
	c.m, c.bytes, c.closed = nil, 0, true
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

// forgetRequest drops what is kept of request id, on the writer, before
// a change that sets the columns a kept row holds for good (an
// approver's edit in a vote) and keeps nothing.
func (db *DB) forgetRequest(id string) {
	c := &db.recent
	c.mu.Lock()
	if e, ok := c.m[id]; ok {
		c.bytes -= rowSize(e.row)
		delete(c.m, id)
	}
	c.mu.Unlock()
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
