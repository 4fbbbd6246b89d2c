package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/sqlite/engine"
)

// AuditLog returns the audit entries with Seq > after, in order, at most
// limit of them (1000 when limit is not positive).
func (db *DB) AuditLog(ctx context.Context, after int64, limit int) ([]*countersign.AuditEntry, error) {
	limit = countersign.AuditPageSize(limit)
	rows, err := db.read.QueryContext(ctx, `
		SELECT seq, at, account_id, request_id, event, actor, detail, prev_hash, hash
		FROM audit_log WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	defer rows.Close()
	out := []*countersign.AuditEntry{}
	for rows.Next() {
		var e countersign.AuditEntry
		var at int64
		if err := rows.Scan(&e.Seq, &at, &e.AccountID, &e.RequestID, &e.Event, &e.Actor, &e.Detail, &e.PrevHash, &e.Hash); err != nil {
			return nil, fmt.Errorf("read audit log: %w", err)
		}
		e.At = fromNanos(at)
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}

// AuditHead returns the sequence number and hash of the newest entry as
// recorded beside the log (zero and "" when empty).
func (db *DB) AuditHead(ctx context.Context) (seq int64, hash string, err error) {
	return auditHead(ctx, db.read)
}

// auditHead reads the head row, which the first migration creates.
func auditHead(ctx context.Context, q querier) (int64, string, error) {
	var seq int64
	var hash string
	err := q.QueryRowContext(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&seq, &hash)
	if err == sql.ErrNoRows {
		return 0, "", nil
	} else if err != nil {
		return 0, "", fmt.Errorf("read audit head: %w", err)
	}
	return seq, hash, nil
}

// appendAudit writes the next entry of the chain and moves the head, inside
// the caller's write transaction: the entry commits with the change it
// records, or neither does.
func appendAudit(ctx context.Context, tx querier, at time.Time, accountID, requestID string, ev countersign.AuditEvent) error {
	a, inWriter := engine.TxStateOf(ctx).(*auditTx)
	if !inWriter {
		a = &auditTx{}
	}
	if !a.known {
		seq, prev, err := auditHead(ctx, tx)
		if err != nil {
			return err
		}
		a.seq, a.hash, a.known = seq, prev, true
	}
	prev := a.hash
	if a.seq == 0 {
		prev = countersign.AuditGenesis
	}
	e := countersign.AuditEntry{
		Seq:       a.seq + 1,
		At:        fromNanos(nanos(at)),
		AccountID: accountID,
		RequestID: requestID,
		Event:     ev.Event,
		Actor:     ev.Actor,
		Detail:    ev.Detail,
		PrevHash:  prev,
	}
	if a.key != nil {
		e.Hash = a.key.AuditMAC(&e)
	} else {
		e.Hash = e.ComputeHash()
	}
	a.entries = append(a.entries, e)
	a.seq, a.hash, a.dirty, a.n = e.Seq, e.Hash, true, len(a.entries)
	if !inWriter {
		// Not run by the writer: nobody else moves the head.
		return a.Flush(ctx, tx)
	}
	return nil
}

// auditTx is the head of the audit chain as one write transaction has moved
// it: the engine.TxState of the store. The writer reads the head from the
// table once per transaction, lets each change append from here, and writes
// the entries and the head once, before the commit: the head a reader sees
// is always the last entry committed. Holding the write lock for the whole
// transaction, nobody else moves it meanwhile.
type auditTx struct {
	auditPos
	entries []countersign.AuditEntry // appended, not written yet
	// key keys the entries (an HMAC under the secret key); nil on a store
	// opened without one, whose entries carry bare hashes.
	key *countersign.SecretKey
	// mark is where Mark found the chain: what to go back to when a
	// change is undone.
	mark auditPos
}

// auditPos is where a transaction has the audit chain.
type auditPos struct {
	known bool   // seq and hash are the head
	dirty bool   // entries were appended since the head was last written
	seq   int64  // the newest entry
	hash  string // its hash
	n     int    // entries appended, not written yet
}

// auditInsertRows is the most entries one INSERT writes.
const auditInsertRows = 16

// Flush writes the appended entries and the head to the tables.
func (a *auditTx) Flush(ctx context.Context, tx querier) error {
	if !a.dirty {
		return nil
	}
	for rest := a.entries; len(rest) > 0; {
		n := min(len(rest), auditInsertRows)
		args := make([]any, 0, 9*n)
		for _, e := range rest[:n] {
			args = append(args, e.Seq, nanos(e.At), e.AccountID, e.RequestID, e.Event, e.Actor, e.Detail, e.PrevHash, e.Hash)
		}
		if _, err := tx.ExecContext(ctx, auditInsert[n-1], args...); err != nil {
			return fmt.Errorf("append audit entry: %w", err)
		}
		rest = rest[n:]
	}
	a.entries, a.n = a.entries[:0], 0
	if _, err := tx.ExecContext(ctx, `
		INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?)
		ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`, a.seq, a.hash); err != nil {
		return fmt.Errorf("move audit head: %w", err)
	}
	a.dirty = false
	return nil
}

// Forget makes the next append read the head from the table again.
func (a *auditTx) Forget() { *a = auditTx{key: a.key} }

// Mark notes where the chain is, before a change.
func (a *auditTx) Mark() { a.mark = a.auditPos }

// Undo goes back to where Mark found the chain: the entries the undone
// change appended are dropped.
func (a *auditTx) Undo() {
	a.auditPos = a.mark
	a.entries = a.entries[:a.n]
}

// auditInsert[n-1] inserts n audit entries.
var auditInsert = func() (q [auditInsertRows]string) {
	values := ""
	for i := range q {
		if i > 0 {
			values += ", "
		}
		values += "(?, ?, ?, ?, ?, ?, ?, ?, ?)"
		q[i] = `INSERT INTO audit_log (seq, at, account_id, request_id, event, actor, detail, prev_hash, hash) VALUES ` + values
	}
	return q
}()
