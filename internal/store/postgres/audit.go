package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// AuditLog returns the audit entries with Seq > after, in order, at most
// limit of them (1000 when limit is not positive).
func (db *DB) AuditLog(ctx context.Context, after int64, limit int) ([]*countersign.AuditEntry, error) {
	limit = countersign.AuditPageSize(limit)
	var out []*countersign.AuditEntry
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, scanAuditEntry, `
			SELECT seq, at, account_id, request_id, event, actor, detail, prev_hash, hash
			FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2`, after, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read audit log: %w", err)
	}
	return out, nil
}

func scanAuditEntry(s pgx.Row) (*countersign.AuditEntry, error) {
	var e countersign.AuditEntry
	var at int64
	if err := s.Scan(&e.Seq, &at, &e.AccountID, &e.RequestID, &e.Event, &e.Actor, &e.Detail, &e.PrevHash, &e.Hash); err != nil {
		return nil, err
	}
	e.At = fromNanos(at)
	return &e, nil
}

// AuditHead returns the sequence number and hash of the newest entry as
// recorded beside the log (zero and "" when empty).
func (db *DB) AuditHead(ctx context.Context) (seq int64, hash string, err error) {
	err = db.read(ctx, func(q querier) (err error) {
		seq, hash, err = auditHead(ctx, q)
		return err
	})
	return seq, hash, err
}

// auditHead reads the head row, which the first migration creates.
func auditHead(ctx context.Context, q querier) (int64, string, error) {
	var seq int64
	var hash string
	err := q.QueryRow(ctx, `SELECT seq, hash FROM audit_head WHERE id = 1`).Scan(&seq, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, "", nil
	} else if err != nil {
		return 0, "", fmt.Errorf("read audit head: %w", err)
	}
	return seq, hash, nil
}

// lockHeadSQL locks the head row of the chain. Locking it orders
// appenders: a second transaction waits here until the first commits.
// Callers lock it last, in the batch that also commits, so that it is
// held for as short a time as possible.
const lockHeadSQL = `SELECT 1 FROM audit_head WHERE id = 1 FOR UPDATE`

// appendSQL appends one entry after the head of the chain, in one
// statement: it computes the entry's hash as countersign.AuditEntry's
// ComputeHash does (each field as its length in UTF-8 bytes, a colon and
// the field; SHA-256 of all of them, in hex), inserts the entry and moves
// the head. Computing it in the database lets a transaction append and
// commit without another round trip to this process while it holds the
// head. It runs after lockHeadSQL in the same transaction, so its snapshot
// sees the head as the last appender left it. Its parameters: $1 the time
// (unix nanoseconds), $2 the account, $3 the request, $4 the event, $5 the
// actor, $6 the detail. The Go verifier (countersign audit verify) checks
// every hash it writes.
var appendSQL = auditAppendSQL(false)

// appendKeyedSQL is appendSQL for a store sealed with the secret key: the
// entry's value is countersign.SecretKey's AuditMAC, HMAC-SHA256 computed
// from SHA-256 as SHA-256(opad || SHA-256(ipad || message)), with $7 the
// inner and $8 the outer pad of the audit key (AuditPads). The pads are of
// the audit key only, derived from the secret key: a database that sees
// them (in a statement log that records parameters, say) learns nothing
// that opens a server key.
var appendKeyedSQL = auditAppendSQL(true)

func auditAppendSQL(keyed bool) string {
	return auditAppendSQLOf(keyed, appendParams{at: "$1", account: "$2", request: "$3", event: "$4", actor: "$5", detail: "$6",
		ipad: "$7", opad: "$8", head: "FROM audit_head WHERE id = 1"})
}

// appendIfChangedSQL is appendSQL for a change that may not have happened:
// the entry is appended only when this transaction changed the request $2
// (see changedHere), with the account of the request's row. Its
// parameters: $1 the time, $2 the request, $3 the event, $4 the actor, $5
// the detail; keyed, $6 and $7 the pads. It lets a change, its entry and
// the commit go in one round trip, the entry only when the change was made.
var appendIfChangedSQL, appendKeyedIfChangedSQL = auditAppendIfChangedSQL(false), auditAppendIfChangedSQL(true)

func auditAppendIfChangedSQL(keyed bool) string {
	return auditAppendSQLOf(keyed, appendParams{at: "$1", request: "$2", event: "$3", actor: "$4", detail: "$5",
		ipad: "$6", opad: "$7", account: "h.account_id", head: `, r.account_id
		FROM audit_head, (SELECT account_id FROM requests
			WHERE id = $2::text AND xmin = pg_current_xact_id_if_assigned()::xid) r
		WHERE audit_head.id = 1`})
}

// changedHere is the condition that this transaction changed the request
// whose id is the parameter p: the row's version was written by it.
func changedHere(p string) string {
	return `EXISTS (SELECT 1 FROM requests WHERE id = ` + p + `::text AND xmin = pg_current_xact_id_if_assigned()::xid)`
}

// appendParams are the expressions of an append's fields: parameters, or
// for account a column of h. head ends h's select list and reads the head.
type appendParams struct {
	at, account, request, event, actor, detail, ipad, opad, head string
}

func auditAppendSQLOf(keyed bool, p appendParams) string {
	field := func(expr string) string {
		return "octet_length(convert_to(" + expr + ", 'UTF8'))::text || ':' || " + expr
	}
	text := func(expr string) string {
		if strings.HasPrefix(expr, "$") {
			return expr + "::text"
		}
		return expr
	}
	fields := []string{field("h.prev"), field("h.seq::text"), field(p.at + "::bigint::text"),
		field(text(p.account)), field(text(p.request)), field(text(p.event)), field(text(p.actor)), field(text(p.detail))}
	value := `sha256(convert_to(` + strings.Join(fields, " || ") + `, 'UTF8'))`
	if keyed {
		value = `sha256(` + p.opad + `::bytea || sha256(` + p.ipad + `::bytea || convert_to(` + strings.Join(fields, " || ") + `, 'UTF8')))`
	}
	return `WITH h AS (
		SELECT seq + 1 AS seq, CASE WHEN seq = 0 THEN '` + countersign.AuditGenesis + `' ELSE hash END AS prev ` + p.head + `
	), e AS (
		SELECT h.*, encode(` + value + `, 'hex') AS hash
		FROM h
	), logged AS (
		INSERT INTO audit_log (seq, at, account_id, request_id, event, actor, detail, prev_hash, hash)
		SELECT e.seq, ` + p.at + `, ` + strings.ReplaceAll(p.account, "h.", "e.") + `, ` + p.request + `, ` + p.event + `, ` + p.actor + `, ` + p.detail + `, e.prev, e.hash FROM e
		RETURNING seq, hash
	)
	UPDATE audit_head SET seq = logged.seq, hash = logged.hash FROM logged WHERE audit_head.id = 1`
}

// auditItem is one entry to append: what happened to which request.
type auditItem struct {
	accountID, requestID string
	ev                   countersign.AuditEvent
}

// queueAudit queues the lock of the head and the entries, in order, at
// the time at. Read their results with auditResults.
func (db *DB) queueAudit(b *pgx.Batch, at time.Time, items ...auditItem) {
	b.Queue(lockHeadSQL)
	for _, it := range items {
		if db.key != nil {
			b.Queue(appendKeyedSQL, nanos(at), it.accountID, it.requestID, it.ev.Event, it.ev.Actor, it.ev.Detail, db.ipad, db.opad)
			continue
		}
		b.Queue(appendSQL, nanos(at), it.accountID, it.requestID, it.ev.Event, it.ev.Actor, it.ev.Detail)
	}
}

// queueAuditIfChanged queues the lock of the head and the entry of the
// request it.requestID, both only when this transaction changed that
// request; it.accountID is not used (the row's is). Read the results with
// auditResultsIfChanged.
func (db *DB) queueAuditIfChanged(b *pgx.Batch, at time.Time, it auditItem) {
	b.Queue(`SELECT 1 FROM audit_head WHERE id = 1 AND `+changedHere("$1")+` FOR UPDATE`, it.requestID)
	if db.key != nil {
		b.Queue(appendKeyedIfChangedSQL, nanos(at), it.requestID, it.ev.Event, it.ev.Actor, it.ev.Detail, db.ipad, db.opad)
		return
	}
	b.Queue(appendIfChangedSQL, nanos(at), it.requestID, it.ev.Event, it.ev.Actor, it.ev.Detail)
}

// auditResultsIfChanged reads what queueAuditIfChanged queued: changed
// says whether the change was made, and so whether an entry must have
// been appended.
func auditResultsIfChanged(br pgx.BatchResults, changed bool) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("lock the audit head: %w", err)
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("append audit entry: %w", badText(err))
	}
	if changed && tag.RowsAffected() != 1 {
		return fmt.Errorf("append audit entry: the audit head is missing")
	}
	if !changed && tag.RowsAffected() != 0 {
		return fmt.Errorf("append audit entry: an entry was appended for a change not made")
	}
	return nil
}

// auditResults reads the results of what queueAudit queued for n entries.
// An append that moved no head (the head row is missing) is an error: the
// entry would be lost.
func auditResults(br pgx.BatchResults, n int) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("lock the audit head: %w", err)
	}
	for range n {
		tag, err := br.Exec()
		if err != nil {
			return fmt.Errorf("append audit entry: %w", badText(err))
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("append audit entry: the audit head is missing")
		}
	}
	return nil
}

// appendAudit writes the next entries of the chain, one per event, and
// moves the head, inside the caller's transaction: the entries commit with
// the change they record, or none does.
func (db *DB) appendAudit(ctx context.Context, tx pgx.Tx, at time.Time, items ...auditItem) error {
	batch := &pgx.Batch{}
	db.queueAudit(batch, at, items...)
	br := tx.SendBatch(ctx, batch)
	defer br.Close()
	if err := auditResults(br, len(items)); err != nil {
		return err
	}
	return br.Close()
}
