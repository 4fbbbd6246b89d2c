package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// Transition moves a request from one of t.From to t.To while it has not
// expired at t.Now, opens t.Window with an approval, and writes ev, all in
// one transaction of two round trips: the conditional UPDATE, then the
// window, the announcement, the audit entry and the commit. The change is
// one conditional UPDATE: of two callers racing on the same request, the
// second waits for the first's row lock, re-checks the condition on the
// committed row and changes nothing. A decision sets DecidedAt to t.Now
// with t.DecidedBy and t.Reason; consumed sets ConsumedAt. Errors:
// EINVALID, ENOTFOUND, ECONFLICT.
func (db *DB) Transition(ctx context.Context, t countersign.Transition, ev countersign.AuditEvent) (*countersign.Request, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if hasNUL(t.ID, t.KeyID, t.AccountID) {
		return nil, countersign.ErrRequestNotFound()
	}
	if idem := countersign.IdempotencyFrom(ctx); t.Window == nil && t.To != countersign.StatusStopped && (idem == nil || !idem.Records(t.To)) {
		got, err := db.transitionGrouped(ctx, t, ev)
		if err != nil {
			return nil, err
		}
		if got == nil {
			// The UPDATE changed nothing: why, by the request as it is now.
			return nil, db.read(ctx, func(q querier) error { return transitionRefusal(ctx, q, t) })
		}
		return got, nil
	}
	var got *countersign.Request
	err := db.pipeline(ctx, func(p *pipe) (err error) {
		got, err = transition(p, t, ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

func transition(p *pipe, t countersign.Transition, ev countersign.AuditEvent) (*countersign.Request, error) {
	if idem := countersign.IdempotencyFrom(p.ctx); t.Window == nil && t.To != countersign.StatusStopped && (idem == nil || !idem.Records(t.To)) {
		return transitionAtOnce(p, t, ev)
	}
	got, err := updateStatus(p, t)
	if err != nil {
		return nil, err
	} else if got == nil {
		return nil, transitionRefusal(p.ctx, p.conn, t)
	}
	items := []auditItem{{got.AccountID, got.ID, ev}}
	if t.EndsSession(got.Context.SessionID) {
		ended, err := stopApprovals(p, t, got, ev.Actor)
		if err != nil {
			return nil, err
		}
		items = append(items, ended...)
	}
	batch := &pgx.Batch{}
	if t.Window != nil {
		if err := queueWindow(batch, got, *t.Window, t.Now); err != nil {
			return nil, err
		}
	}
	if t.EndsSession(got.Context.SessionID) {
		// The session is told to stop altogether: no window of it
		// approves anything after, and none lets through a request
		// still being made (its mark, letThroughCheck).
		batch.Queue(`UPDATE auto_approve_windows SET until = LEAST(until, $1), stopped_at = $1
			WHERE key_id = $2 AND session_id = $3 AND stopped_at = 0`,
			nanos(t.Now), got.KeyID, got.Context.SessionID)
	}
	for _, it := range items {
		queueNotify(batch, p.db.payload(it.requestID, it.accountID, ""))
	}
	p.db.queueAudit(batch, t.Now, items...)
	idem := countersign.IdempotencyFrom(p.ctx)
	if idem != nil && idem.Records(t.To) {
		queueIdempotent(batch, idem, got, false, t.Now)
	}
	br := p.sendCommit(batch)
	if t.Window != nil {
		if _, err := br.Exec(); isUnique(err) {
			return nil, countersign.ErrExists("auto-approve window")
		} else if err != nil {
			return nil, fmt.Errorf("open auto-approve window: %w", badText(err))
		}
	}
	if t.EndsSession(got.Context.SessionID) {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("close the session's auto-approve windows: %w", err)
		}
	}
	for range items {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("announce the transition: %w", err)
		}
	}
	if err := auditResults(br, len(items)); err != nil {
		return nil, err
	}
	if idem != nil && idem.Records(t.To) {
		if err := idempotentResult(br); err != nil {
			return nil, err
		}
	}
	if err := commitResult(br); err != nil {
		return nil, err
	}
	return got, nil
}

// stopApprovals ends, with the stop of got, every approval of the same key
// and session that is not yet consumed: those a window gave and those a
// human gave were given for a session the human has now stopped. It
// returns an audit entry naming the stop for each. The rows are locked in
// id order, as the sweeper locks them.
func stopApprovals(p *pipe, t countersign.Transition, got *countersign.Request, actor string) ([]auditItem, error) {
	batch := &pgx.Batch{}
	// The account's creation lock: a request a window lets through in the
	// meantime is stored either before this update, which ends it, or
	// after this commit, when it finds its window closed (checkCreate).
	batch.Queue(`SELECT pg_advisory_xact_lock($1::int4, hashtext($2))`, int32(accountLock), got.AccountID)
	batch.Queue(`UPDATE requests SET status = 'stopped', decided_at = $1, decided_by = $2, reason = $3
		WHERE id IN (SELECT id FROM requests WHERE key_id = $4 AND session_id = $5
			AND status IN ('pending', 'approved') AND status = 'approved' AND id <> $6 ORDER BY id FOR UPDATE)
		RETURNING id, account_id`,
		nanos(t.Now), t.DecidedBy, countersign.StoppedReason, got.KeyID, got.Context.SessionID, got.ID)
	// The hook's used approvals of the session keep nothing to cover: a
	// delete of the rm wrapper that names one after the stop is asked, and
	// one that claimed it before is refused as it is stored
	// (letThroughCheck).
	batch.Queue(`INSERT INTO coverages (approval_id, request_id, created_at, stopped_at)
		SELECT id, $1, $2, $2 FROM requests
		WHERE key_id = $3 AND session_id = $4 AND status = 'consumed' AND kind = 'tool' AND action = 'Bash'
		ON CONFLICT (approval_id) DO UPDATE SET stopped_at = EXCLUDED.stopped_at WHERE coverages.stopped_at = 0`,
		got.ID, nanos(t.Now), got.KeyID, got.Context.SessionID)
	br := p.send(batch)
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("lock the account: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("end the session's approvals: %w", err)
	}
	ev := countersign.AuditEvent{Event: "stopped", Actor: actor, Detail: countersign.StoppedDetail(got.ID)}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (auditItem, error) {
		it := auditItem{ev: ev}
		err := row.Scan(&it.requestID, &it.accountID)
		return it, err
	})
	if err != nil {
		return nil, fmt.Errorf("end the session's approvals: %w", err)
	}
	if _, err := br.Exec(); err != nil {
		return nil, fmt.Errorf("end the session's coverage: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("end the session's approvals: %w", err)
	}
	slices.SortFunc(items, func(x, y auditItem) int { return strings.Compare(x.requestID, y.requestID) })
	return items, nil
}

// transitionAtOnce makes a change that opens no window, stops no session
// and records no idempotency key (a decision by id, a consumption) in one
// round trip: the conditional UPDATE, which announces the request from
// its RETURNING (so only when it changed it), then the lock of the audit
// head and the entry, both only when the UPDATE changed the request
// (changedHere), and the commit. When the UPDATE changed nothing, nothing
// was written, and the request is read to say why.
func transitionAtOnce(p *pipe, t countersign.Transition, ev countersign.AuditEvent) (*countersign.Request, error) {
	query, a, err := updateSQL(t)
	if err != nil {
		return nil, err
	}
	batch := &pgx.Batch{}
	batch.Queue(query+`, pg_notify('`+notifyChannel+`', id || ' ' || account_id || `+a.add(p.db.payload("", "", "")[1:])+`)::text`, a...)
	p.db.queueAuditIfChanged(batch, t.Now, auditItem{requestID: t.ID, ev: ev})
	br := p.sendCommit(batch)
	got, err := scanRequest(withNotified{br.QueryRow()})
	if errors.Is(err, pgx.ErrNoRows) {
		got = nil
	} else if err != nil {
		return nil, p.unsent(fmt.Errorf("update request status: %w", badText(err)))
	}
	if err := auditResultsIfChanged(br, got != nil); err != nil {
		return nil, p.unsent(err)
	}
	if err := commitResult(br); err != nil {
		return nil, err
	}
	if got == nil {
		return nil, transitionRefusal(p.ctx, p.conn, t)
	}
	return got, nil
}

// withNotified reads a row of requestColumns followed by the text of a
// pg_notify call, which it drops.
type withNotified struct{ pgx.Row }

func (r withNotified) Scan(dest ...any) error {
	var notified string
	return r.Row.Scan(append(dest, &notified)...)
}

// updateStatus runs the one conditional UPDATE of t, in the round trip
// that begins the transaction, and returns the updated request, or nil when
// it changed nothing.
func updateStatus(p *pipe, t countersign.Transition) (*countersign.Request, error) {
	query, a, err := updateSQL(t)
	if err != nil {
		return nil, err
	}
	batch := &pgx.Batch{}
	batch.Queue(query, a...)
	br := p.send(batch)
	got, err := scanRequest(br.QueryRow())
	if errors.Is(err, pgx.ErrNoRows) {
		got, err = nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("update request status: %w", badText(err))
	}
	// Closed before the caller reads anything else on the connection.
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("update request status: %w", err)
	}
	return got, nil
}

// updateSQL is the one conditional UPDATE of t, returning requestColumns.
func updateSQL(t countersign.Transition) (string, args, error) {
	var a args
	set := []string{"status = " + a.add(string(t.To))}
	if t.To.IsDecision() {
		set = append(set, "decided_at = "+a.add(nanos(t.Now)), "decided_by = "+a.add(t.DecidedBy), "reason = "+a.add(t.Reason))
	}
	if t.To == countersign.StatusConsumed {
		set = append(set, "consumed_at = "+a.add(nanos(t.Now)))
	}
	if !t.ExpiresAt.IsZero() {
		set = append(set, "expires_at = GREATEST(expires_at, "+a.add(nanos(t.ExpiresAt))+")")
	}
	if t.Window != nil {
		set = append(set, "auto_approve_until = "+a.add(nanos(t.Window.Until)))
	}
	if e := t.Edited; e != nil {
		es, err := editSet(e, &a)
		if err != nil {
			return "", nil, err
		}
		set = append(set, es...)
	}

	from := make([]string, len(t.From))
	for i, s := range t.From {
		from[i] = string(s)
	}
	id := "id = " + a.add(t.ID)
	rest := []string{"status = ANY(" + a.add(from) + "::text[])", "expires_at > " + a.add(nanos(t.Now))}
	if t.KeyID != "" {
		rest = append(rest, "key_id = "+a.add(t.KeyID))
	}
	if t.AccountID != "" {
		rest = append(rest, "account_id = "+a.add(t.AccountID))
	}
	if e := t.Edited; e != nil {
		// The action edited is the one the request still holds.
		rest = append(rest, "args_hash = "+a.add(e.Original.ArgsHash), "preview_hash = "+a.add(e.Original.PreviewHash), "original = ''")
	}
	if t.Unedited {
		rest = append(rest, "original = ''")
	}

	return `UPDATE requests SET ` + strings.Join(set, ", ") +
		` WHERE ` + id + ` AND ` + unindexed(rest...) + ` RETURNING ` + requestColumns, a, nil
}

// editSet returns the assignments, their values added to a, that
// replace a request's action with the edited request e's and keep its
// original.
func editSet(e *countersign.Request, a *args) ([]string, error) {
	reasons, _, err := encodeJSON(e)
	if err != nil {
		return nil, err
	}
	original, err := countersign.EncodeOriginal(e.Original)
	if err != nil {
		return nil, err
	}
	return []string{"arguments = " + a.add(string(e.Arguments)), "args_hash = " + a.add(e.ArgsHash),
		"preview = " + a.add(e.Preview), "preview_hash = " + a.add(e.PreviewHash), "risk_reasons = " + a.add(reasons),
		"protected = " + a.add(e.Protected), "scope = " + a.add(countersign.EncodeScope(e.Scope)),
		"arguments_text = " + a.add(e.ArgumentsText), "original = " + a.add(original)}, nil
}

// unindexed joins conditions with AND as one that no index can serve, so
// that the planner reaches the row by the statement's other conditions
// only (the primary key, say). A prepared statement keeps the plan made
// when its table was small or had no statistics yet (a new store, until
// autovacuum analyses it): with every condition to choose from, the
// planner could read a request by an index of its account, and so every
// request of the account, on each call.
func unindexed(conds ...string) string {
	return "(" + strings.Join(conds, " AND ") + ") IS TRUE"
}

// transitionRefusal explains why the UPDATE of t changed nothing, by the
// request as it is now (see countersign.RefuseTransition).
func transitionRefusal(ctx context.Context, q querier, t countersign.Transition) error {
	r, err := getRequest(ctx, q, t.ID)
	if err != nil {
		return err
	}
	return countersign.RefuseTransition(t, r)
}

// ExpireRequests marks every live request whose expiry is at or before now
// (all of them, or only id when id is not empty) as expired, writes an
// audit entry for each, and returns the ids it expired, sorted.
func (db *DB) ExpireRequests(ctx context.Context, id string, now time.Time) ([]countersign.Expired, error) {
	if hasNUL(id) {
		return []countersign.Expired{}, nil
	}
	var out []countersign.Expired
	err := db.update(ctx, func(tx pgx.Tx) (err error) {
		out, err = db.expireRequests(ctx, tx, id, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (db *DB) expireRequests(ctx context.Context, tx pgx.Tx, id string, now time.Time) ([]countersign.Expired, error) {
	// The rows are locked in id order, so that two replicas sweeping at
	// once queue on the same first row instead of each holding a row the
	// other waits for. After waiting, a row is re-checked and skipped if
	// it changed meanwhile.
	var a args
	inner := `SELECT id FROM requests WHERE status IN ('pending', 'approved') AND expires_at <= ` + a.add(nanos(now))
	if id != "" {
		inner += ` AND id = ` + a.add(id)
	}
	rows, err := tx.Query(ctx, `UPDATE requests SET status = 'expired'
		WHERE id IN (`+inner+` ORDER BY id FOR UPDATE)
		RETURNING id, account_id, kind`, a...)
	if err != nil {
		return nil, fmt.Errorf("expire requests: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (countersign.Expired, error) {
		var e countersign.Expired
		err := row.Scan(&e.ID, &e.AccountID, &e.Kind)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("expire requests: %w", err)
	}
	if len(out) == 0 {
		return []countersign.Expired{}, nil
	}
	slices.SortFunc(out, func(x, y countersign.Expired) int { return strings.Compare(x.ID, y.ID) })
	batch := &pgx.Batch{}
	items := make([]auditItem, 0, len(out))
	ev := countersign.AuditEvent{Event: "expired", Actor: "system", Detail: "{}"}
	for _, e := range out {
		queueNotify(batch, db.payload(e.ID, e.AccountID, ""))
		items = append(items, auditItem{e.AccountID, e.ID, ev})
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return nil, fmt.Errorf("announce expiry: %w", err)
	}
	if err := db.appendAudit(ctx, tx, now, items...); err != nil {
		return nil, err
	}
	return out, nil
}
