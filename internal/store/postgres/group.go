package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// A group commit gathers the changes of requests that are made in one
// round trip (transitionAtOnce: a decision by id, a consumption) while
// another group is being written, and writes them in one transaction: the
// conditional UPDATE of each, one lock of the audit head, the entry of each
// change made, in order, and one commit and one flush for them all. Under
// load most of a change's cost is the wait for the head and the flush,
// which the group shares.
//
// Each change keeps its own outcome: an UPDATE that matches no row is a
// refusal of that change only, explained after the commit by the request
// as it is then. A statement that fails rolls the whole group back, and
// its changes are then made one by one, each in its own transaction, so
// that one change's error is no other's. A caller hears of its change only
// once the group's commit is durable.
//
// The callers take turns as the writer: one that finds fewer than
// groupWriters writing becomes one and writes the groups that are waiting
// until none is left, its own among them.
const (
	// groupWriters is how many groups of a process are written at once:
	// while one waits for its flush, the next takes the head.
	groupWriters = 2
	// groupMax bounds the changes of one group.
	groupMax = 64
	// groupTimeout bounds the writing of a group, which runs apart from
	// its callers' contexts, so that one caller's leaving ends no other's
	// change.
	groupTimeout = 30 * time.Second
)

// groupChange is one change waiting in the group queue, and its outcome.
type groupChange struct {
	ctx  context.Context
	t    countersign.Transition
	ev   countersign.AuditEvent
	done chan struct{}
	got  *countersign.Request
	err  error
}

// groupQueue holds the changes waiting to be written.
type groupQueue struct {
	mu      sync.Mutex
	waiting []*groupChange
	writing int
}

// transitionGrouped makes the change t, which transitionAtOnce could make,
// in a group (see groupWriters). It returns the updated request, or nil
// and no error when the UPDATE changed nothing.
func (db *DB) transitionGrouped(ctx context.Context, t countersign.Transition, ev countersign.AuditEvent) (*countersign.Request, error) {
	c := &groupChange{ctx: ctx, t: t, ev: ev, done: make(chan struct{})}
	q := &db.group
	q.mu.Lock()
	q.waiting = append(q.waiting, c)
	write := q.writing < groupWriters
	if write {
		q.writing++
	}
	q.mu.Unlock()
	if write {
		db.writeGroups(ctx)
	}
	select {
	case <-c.done:
		return c.got, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// writeGroups writes groups until none is waiting.
func (db *DB) writeGroups(ctx context.Context) {
	q := &db.group
	for {
		q.mu.Lock()
		g := q.take()
		if len(g) == 0 {
			q.writing--
			q.mu.Unlock()
			return
		}
		q.mu.Unlock()
		db.writeGroup(ctx, g)
	}
}

// take removes from the queue the next group: at most groupMax changes, in
// the order they came, no two of the same request (a second change of a
// request in the same transaction would see the first's row as its own
// change). Its caller holds q.mu.
func (q *groupQueue) take() []*groupChange {
	var g, rest []*groupChange
	seen := map[string]bool{}
	for _, c := range q.waiting {
		if err := c.ctx.Err(); err != nil {
			// Its caller left before it was written: it is not made.
			c.err = err
			close(c.done)
			continue
		}
		if len(g) == groupMax || seen[c.t.ID] {
			rest = append(rest, c)
			continue
		}
		seen[c.t.ID] = true
		g = append(g, c)
	}
	q.waiting = rest
	return g
}

// errMemberFailed wraps the error of a statement of one change, which
// rolled back the group before its commit.
type errMemberFailed struct{ err error }

func (e errMemberFailed) Error() string { return e.err.Error() }
func (e errMemberFailed) Unwrap() error { return e.err }

// writeGroup writes g and tells each of its callers the outcome.
func (db *DB) writeGroup(ctx context.Context, g []*groupChange) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
	defer cancel()
	// The rows are locked in id order, as the sweeper locks them, so that
	// two groups never wait for each other's rows.
	slices.SortFunc(g, func(x, y *groupChange) int { return strings.Compare(x.t.ID, y.t.ID) })
	var got []*countersign.Request
	err := db.pipeline(ctx, func(p *pipe) (err error) {
		got, err = transitionGroup(p, g)
		return err
	})
	var failed errMemberFailed
	switch {
	case err == nil:
		for i, c := range g {
			c.got = got[i]
			close(c.done)
		}
	case errors.As(err, &failed) && len(g) > 1:
		// Nothing was committed: each change is made alone.
		for _, c := range g {
			c.err = db.pipeline(ctx, func(p *pipe) (err error) {
				c.got, err = transitionAtOnce(p, c.t, c.ev)
				return err
			})
			close(c.done)
		}
	default:
		if errors.As(err, &failed) {
			err = failed.err
		}
		for _, c := range g {
			c.err = err
			close(c.done)
		}
	}
}

// transitionGroup makes the changes of g in one round trip: BEGIN, the
// UPDATE of each, the lock of the audit head and the entry of each change
// made, and the commit. It returns the updated request of each, nil when
// its UPDATE changed nothing.
func transitionGroup(p *pipe, g []*groupChange) ([]*countersign.Request, error) {
	batch := &pgx.Batch{}
	for _, c := range g {
		query, a, err := updateSQL(c.t)
		if err != nil {
			// Nothing was sent: the group's changes are made alone.
			return nil, errMemberFailed{err}
		}
		batch.Queue(query+`, pg_notify('`+notifyChannel+`', id || ' ' || account_id || `+a.add(p.db.payload("", "", "")[1:])+`)::text`, a...)
	}
	batch.Queue(lockHeadSQL)
	for _, c := range g {
		if p.db.key != nil {
			batch.Queue(appendKeyedIfChangedSQL, nanos(c.t.Now), c.t.ID, c.ev.Event, c.ev.Actor, c.ev.Detail, p.db.ipad, p.db.opad)
			continue
		}
		batch.Queue(appendIfChangedSQL, nanos(c.t.Now), c.t.ID, c.ev.Event, c.ev.Actor, c.ev.Detail)
	}
	br := p.sendCommit(batch)
	// member reports the error of a statement before the commit: one the
	// server answered rolled the group back; any other leaves it to
	// unsent whether the commit ran.
	member := func(what string, err error) error {
		failed := pgError(err) != nil && !lostConnection(err)
		err = fmt.Errorf("%s: %w", what, badText(err))
		if failed {
			p.committing = false
			return errMemberFailed{err}
		}
		return p.unsent(err)
	}
	got := make([]*countersign.Request, len(g))
	for i := range g {
		r, err := scanRequest(withNotified{br.QueryRow()})
		if errors.Is(err, pgx.ErrNoRows) {
			r = nil
		} else if err != nil {
			return nil, member("update request status", err)
		}
		got[i] = r
	}
	if _, err := br.Exec(); err != nil {
		return nil, member("lock the audit head", err)
	}
	for i := range g {
		tag, err := br.Exec()
		if err != nil {
			return nil, member("append audit entry", err)
		}
		if n := tag.RowsAffected(); (got[i] != nil) != (n == 1) {
			return nil, p.unsent(fmt.Errorf("append audit entry: %d entries appended for a change made: %t", n, got[i] != nil))
		}
	}
	if err := commitResult(br); err != nil {
		return nil, err
	}
	return got, nil
}
