package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
)

// Transition moves a request from one of t.From to t.To while it has not
// expired at t.Now, opens t.Window with an approval, and writes ev, all in
// one transaction. The change is one conditional UPDATE, so of two callers
// racing on the same request exactly one succeeds. A decision sets
// DecidedAt to t.Now with t.DecidedBy and t.Reason; consumed sets
// ConsumedAt. Errors: EINVALID, ENOTFOUND, ECONFLICT.
func (db *DB) Transition(ctx context.Context, t countersign.Transition, ev countersign.AuditEvent) (*countersign.Request, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	var row *requestRow
	var k keep
	err := db.updateKept(ctx, func(ctx context.Context, tx querier) error {
		// A request this process has written before needs only the
		// columns a change may set back: the others are as the row was
		// made, and stay so but for an approver's edit, which sets them.
		// The kept row is read here, on the writer, after every change
		// that ran before this one.
		base := db.keptRow(t.ID)
		if t.To == countersign.StatusStopped || t.Edited != nil {
			base = nil // a stop reads the session of the row as it is
		}
		returning := requestColumns
		if base != nil {
			returning = mutableColumns
		}
		update, args, err := updateStatement(t, returning)
		if err != nil {
			return err
		}
		if t.To == countersign.StatusStopped {
			// A stop ends other requests of the session too.
			db.changeStarts()
		} else {
			k = db.keepStamp()
		}
		row, err = transition(ctx, tx, t, update, args, ev, base)
		return err
	})
	if err != nil {
		return nil, err
	}
	if t.To != countersign.StatusStopped {
		db.keepRequest(row, k)
	}
	return row.decode()
}

// transition runs update, which returns requestColumns, or mutableColumns
// when base, a row of the same request read or written before, is set.
func transition(ctx context.Context, tx querier, t countersign.Transition, update string, args []any, ev countersign.AuditEvent, base *requestRow) (*requestRow, error) {
	var row *requestRow
	var err error
	if base != nil {
		row, err = scanMutable(tx.QueryRowContext(ctx, update, args...), base)
	} else {
		row, err = scanRequestRow(tx.QueryRowContext(ctx, update, args...))
	}
	if err == sql.ErrNoRows {
		return nil, transitionRefusal(ctx, tx, t)
	} else if err != nil {
		return nil, fmt.Errorf("update request status: %w", err)
	}
	got := &row.r // its text columns are all the window and the audit need
	if t.Window != nil {
		if err := insertWindow(ctx, tx, got, *t.Window, t.Now); err != nil {
			return nil, err
		}
	}
	session, err := stoppedSession(t, row)
	if err != nil {
		return nil, err
	}
	if t.EndsSession(session) {
		// The session is told to stop altogether: no window of it
		// approves anything after, and none lets through a request
		// still being made (its mark, windowStillOpen).
		if _, err := tx.ExecContext(ctx, `UPDATE auto_approve_windows SET until = min(until, ?), stopped_at = ?
			WHERE key_id = ? AND session_id = ? AND stopped_at = 0`,
			nanos(t.Now), nanos(t.Now), got.KeyID, session); err != nil {
			return nil, fmt.Errorf("close the session's auto-approve windows: %w", err)
		}
	}
	if err := appendAudit(ctx, tx, t.Now, got.AccountID, got.ID, ev); err != nil {
		return nil, err
	}
	if t.EndsSession(session) {
		if err := stopApprovals(ctx, tx, t, got, session, ev.Actor); err != nil {
			return nil, err
		}
	}
	if i := countersign.IdempotencyFrom(ctx); i != nil && i.Records(t.To) {
		left := row.r
		left.ExpiresAt, left.DecidedAt, left.AutoApproveUntil, left.ConsumedAt = fromNanos(row.expires), fromNanos(row.decided), fromNanos(row.autoUntil), fromNanos(row.consumed)
		if err := recordIdempotent(ctx, tx, &left, false, t.Now); err != nil {
			return nil, err
		}
	}
	return row, nil
}

// stoppedSession returns the agent session of the request row that t
// stops, "" when t is no stop: only a stop needs the context decoded on
// the writer.
func stoppedSession(t countersign.Transition, row *requestRow) (string, error) {
	if t.To != countersign.StatusStopped {
		return "", nil
	}
	r, err := row.decode()
	if err != nil {
		return "", err
	}
	return r.Context.SessionID, nil
}

// stopApprovals ends, with the stop of the request stop, every approval
// of the same key and session that is not yet consumed: those a window
// gave and those a human gave were given for a session the human has now
// stopped. Each gets an audit entry naming the stop.
func stopApprovals(ctx context.Context, tx querier, t countersign.Transition, stop *countersign.Request, session, actor string) error {
	rows, err := tx.QueryContext(ctx, `UPDATE requests SET status = 'stopped', decided_at = ?, decided_by = ?, reason = ?
		WHERE key_id = ? AND status IN ('pending', 'approved') AND status = 'approved' AND id <> ?
		AND json_extract(context, '$.session_id') = ?
		RETURNING id, account_id`,
		nanos(t.Now), t.DecidedBy, countersign.StoppedReason, stop.KeyID, stop.ID, session)
	if err != nil {
		return fmt.Errorf("end the session's approvals: %w", err)
	}
	type ended struct{ id, account string }
	var list []ended
	for rows.Next() {
		var e ended
		if err := rows.Scan(&e.id, &e.account); err != nil {
			rows.Close()
			return fmt.Errorf("end the session's approvals: %w", err)
		}
		list = append(list, e)
	}
	if err := firstErr(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("end the session's approvals: %w", err)
	}
	// The hook's used approvals of the session keep nothing to cover: a
	// delete of the rm wrapper that names one after the stop is asked, and
	// one that claimed it before is refused as it is stored
	// (coverageStillHeld).
	if _, err := tx.ExecContext(ctx, `INSERT INTO coverages (approval_id, request_id, created_at, stopped_at)
		SELECT id, ?, ?, ? FROM requests
		WHERE key_id = ? AND status = 'consumed' AND kind = 'tool' AND action = 'Bash'
		AND json_extract(context, '$.session_id') = ?
		ON CONFLICT (approval_id) DO UPDATE SET stopped_at = excluded.stopped_at WHERE coverages.stopped_at = 0`,
		stop.ID, nanos(t.Now), nanos(t.Now), stop.KeyID, session); err != nil {
		return fmt.Errorf("end the session's coverage: %w", err)
	}
	slices.SortFunc(list, func(x, y ended) int { return strings.Compare(x.id, y.id) })
	ev := countersign.AuditEvent{Event: "stopped", Actor: actor, Detail: countersign.StoppedDetail(stop.ID)}
	for _, e := range list {
		if err := appendAudit(ctx, tx, t.Now, e.account, e.id, ev); err != nil {
			return err
		}
	}
	return nil
}

// updateStatement returns the one conditional UPDATE of t, which returns
// the columns returning of the changed row, or none when it changed
// nothing.
func updateStatement(t countersign.Transition, returning string) (string, []any, error) {
	set, args := []string{"status = ?"}, []any{t.To}
	if t.To.IsDecision() {
		set = append(set, "decided_at = ?", "decided_by = ?", "reason = ?")
		args = append(args, nanos(t.Now), t.DecidedBy, t.Reason)
	}
	if t.To == countersign.StatusConsumed {
		set, args = append(set, "consumed_at = ?"), append(args, nanos(t.Now))
	}
	if !t.ExpiresAt.IsZero() {
		set, args = append(set, "expires_at = max(expires_at, ?)"), append(args, nanos(t.ExpiresAt))
	}
	if t.Window != nil {
		set, args = append(set, "auto_approve_until = ?"), append(args, nanos(t.Window.Until))
	}
	var edited []any
	if e := t.Edited; e != nil {
		es, ea, err := editSet(e)
		if err != nil {
			return "", nil, err
		}
		set, args = append(set, es...), append(args, ea...)
		// The action edited is the one the request still holds.
		edited = []any{e.Original.ArgsHash, e.Original.PreviewHash}
	}

	where := []string{"id = ?", "status IN (" + placeholders(len(t.From)) + ")", "expires_at > ?"}
	args = append(args, t.ID)
	for _, s := range t.From {
		args = append(args, s)
	}
	args = append(args, nanos(t.Now))
	if t.KeyID != "" {
		where, args = append(where, "key_id = ?"), append(args, t.KeyID)
	}
	if t.AccountID != "" {
		where, args = append(where, "account_id = ?"), append(args, t.AccountID)
	}
	if edited != nil {
		where, args = append(where, "args_hash = ?", "preview_hash = ?", "original = ''"), append(args, edited...)
	}
	if t.Unedited {
		where = append(where, "original = ''")
	}

	// SQLite makes every change of an UPDATE … RETURNING in its first
	// step, so reading only the one row it returns is enough.
	return `UPDATE requests SET ` + strings.Join(set, ", ") +
		` WHERE ` + strings.Join(where, " AND ") + ` RETURNING ` + returning, args, nil
}

// editSet returns the assignments, and their values, that replace a
// request's action with the edited request e's and keep its original.
func editSet(e *countersign.Request) ([]string, []any, error) {
	enc, err := encodeRequest(e)
	if err != nil {
		return nil, nil, err
	}
	return []string{"arguments = ?", "args_hash = ?", "preview = ?", "preview_hash = ?", "risk_reasons = ?",
			"protected = ?", "scope = ?", "arguments_text = ?", "original = ?"},
		[]any{string(e.Arguments), e.ArgsHash, e.Preview, e.PreviewHash, string(enc.reasons),
			e.Protected, enc.scope, e.ArgumentsText, enc.original}, nil
}

// mutableColumns are the columns of requestColumns that a change after
// the insert may set (a transition, an expiry, a stop, a run); the others
// keep what the insert wrote as long as the row lives, and ids are never
// used again. An approver's edit sets the action's columns too: its
// change reads the whole row back (Transition) or forgets what is kept
// (a vote).
const mutableColumns = `status, expires_at, decided_at, decided_by, reason, auto_approve_until, consumed_at,
	ran_at, ran_action, ran_args_hash`

// scanMutable reads one row of mutableColumns into a copy of base, a row
// of the same request.
func scanMutable(s scanner, base *requestRow) (*requestRow, error) {
	row := *base
	r := &row.r
	if err := s.Scan(&r.Status, &row.expires, &row.decided, &r.DecidedBy, &r.Reason, &row.autoUntil, &row.consumed,
		&row.ran, &r.Ran.Action, &r.Ran.ArgsHash); err != nil {
		return nil, err
	}
	return &row, nil
}

// transitionRefusal explains why the UPDATE of t changed nothing, by the
// request as it is now (see countersign.RefuseTransition).
func transitionRefusal(ctx context.Context, tx querier, t countersign.Transition) error {
	r, err := getRequest(ctx, tx, t.ID)
	if err != nil {
		return err
	}
	return countersign.RefuseTransition(t, r)
}

// placeholders returns n comma-separated question marks.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// ExpireRequests marks every live request whose expiry is at or before now
// (all of them, or only id when id is not empty) as expired, writes an
// audit entry for each, and returns the ids it expired, sorted.
func (db *DB) ExpireRequests(ctx context.Context, id string, now time.Time) ([]countersign.Expired, error) {
	var ids []countersign.Expired
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) (err error) {
		ids, err = expireRequests(ctx, tx, id, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

func expireRequests(ctx context.Context, tx querier, id string, now time.Time) ([]countersign.Expired, error) {
	// All of them: the live requests by expiry; one: by its id.
	query, args := `UPDATE requests INDEXED BY requests_live_expiry SET status = 'expired'
		WHERE status IN ('pending', 'approved') AND expires_at <= ?`, []any{nanos(now)}
	if id != "" {
		query, args = `UPDATE requests SET status = 'expired'
		WHERE status IN ('pending', 'approved') AND expires_at <= ? AND id = ?`, append(args, id)
	}
	rows, err := tx.QueryContext(ctx, query+` RETURNING id, account_id, kind`, args...)
	if err != nil {
		return nil, fmt.Errorf("expire requests: %w", err)
	}
	// The UPDATE is done only when its RETURNING rows are all read, so
	// they are read before any audit entry is written.
	out := []countersign.Expired{}
	for rows.Next() {
		var e countersign.Expired
		if err := rows.Scan(&e.ID, &e.AccountID, &e.Kind); err != nil {
			rows.Close()
			return nil, fmt.Errorf("expire requests: %w", err)
		}
		out = append(out, e)
	}
	if err := firstErr(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("expire requests: %w", err)
	}
	slices.SortFunc(out, func(x, y countersign.Expired) int { return strings.Compare(x.ID, y.ID) })
	ev := countersign.AuditEvent{Event: "expired", Actor: "system", Detail: "{}"}
	for _, e := range out {
		if err := appendAudit(ctx, tx, now, e.AccountID, e.ID, ev); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
