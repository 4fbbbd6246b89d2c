package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
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
	if len(t.From) == 0 || !t.To.Valid() {
		return nil, countersign.Errorf(countersign.EINVALID, "a transition needs a known target and at least one source status")
	}
	if t.Window != nil && t.To != countersign.StatusApproved {
		return nil, countersign.Errorf(countersign.EINVALID, "only an approval opens an auto-approve window")
	}
	update, args := updateStatement(t)
	var row *requestRow
	err := db.updateHot(ctx, func(ctx context.Context, tx querier) (err error) {
		row, err = transition(ctx, tx, t, update, args, ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return row.decode()
}

func transition(ctx context.Context, tx querier, t countersign.Transition, update string, args []any, ev countersign.AuditEvent) (*requestRow, error) {
	row, err := scanRequestRow(tx.QueryRowContext(ctx, update, args...))
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
	if t.To == countersign.StatusStopped {
		// The session is told to stop altogether: no window of it
		// approves anything after.
		if _, err := tx.ExecContext(ctx, `UPDATE auto_approve_windows SET until = ?
			WHERE key_id = ? AND until > ? AND session_id <> ''
			AND session_id = (SELECT json_extract(context, '$.session_id') FROM requests WHERE id = ?)`,
			nanos(t.Now), got.KeyID, nanos(t.Now), got.ID); err != nil {
			return nil, fmt.Errorf("close the session's auto-approve windows: %w", err)
		}
	}
	if err := appendAudit(ctx, tx, t.Now, got.AccountID, got.ID, ev); err != nil {
		return nil, err
	}
	if t.To == countersign.StatusStopped {
		if err := stopApprovals(ctx, tx, t, got.ID, ev.Actor); err != nil {
			return nil, err
		}
	}
	return row, nil
}

// stopApprovals ends, with the stop of the request stopID, every approval
// of the same key and session that is not yet consumed: those a window
// gave and those a human gave were given for a session the human has now
// stopped. Each gets an audit entry naming the stop.
func stopApprovals(ctx context.Context, tx querier, t countersign.Transition, stopID, actor string) error {
	rows, err := tx.QueryContext(ctx, `UPDATE requests SET status = 'stopped', decided_at = ?, decided_by = ?, reason = ?
		WHERE key_id = (SELECT key_id FROM requests WHERE id = ?)
		AND status IN ('pending', 'approved') AND status = 'approved' AND id <> ?
		AND json_extract(context, '$.session_id') <> ''
		AND json_extract(context, '$.session_id') = (SELECT json_extract(context, '$.session_id') FROM requests WHERE id = ?)
		RETURNING id, account_id`,
		nanos(t.Now), t.DecidedBy, stoppedReason, stopID, stopID, stopID)
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
	// delete of the rm wrapper that names one after the stop is asked.
	if _, err := tx.ExecContext(ctx, `INSERT INTO coverages (approval_id, request_id, created_at)
		SELECT id, ?, ? FROM requests
		WHERE key_id = (SELECT key_id FROM requests WHERE id = ?)
		AND status = 'consumed' AND kind = 'tool' AND action = 'Bash'
		AND json_extract(context, '$.session_id') <> ''
		AND json_extract(context, '$.session_id') = (SELECT json_extract(context, '$.session_id') FROM requests WHERE id = ?)
		ON CONFLICT (approval_id) DO NOTHING`,
		stopID, nanos(t.Now), stopID, stopID); err != nil {
		return fmt.Errorf("end the session's coverage: %w", err)
	}
	slices.SortFunc(list, func(x, y ended) int { return strings.Compare(x.id, y.id) })
	ev := countersign.AuditEvent{Event: "stopped", Actor: actor, Detail: stoppedDetail(stopID)}
	for _, e := range list {
		if err := appendAudit(ctx, tx, t.Now, e.account, e.id, ev); err != nil {
			return err
		}
	}
	return nil
}

// stoppedReason is the reason an approval ended by a stop of its session
// carries.
const stoppedReason = "the human stopped this agent session"

// stoppedDetail is the audit detail of an approval a stop ended.
func stoppedDetail(stopID string) string {
	b, _ := json.Marshal(map[string]string{"stopped_with": stopID})
	return string(b)
}

// isDecision reports whether s is what a human's decision leads to.
func isDecision(s countersign.Status) bool {
	switch s {
	case countersign.StatusApproved, countersign.StatusDenied, countersign.StatusResponded, countersign.StatusStopped:
		return true
	}
	return false
}

// updateStatement returns the one conditional UPDATE of t, which returns
// the changed row, or none when it changed nothing.
func updateStatement(t countersign.Transition) (string, []any) {
	set, args := []string{"status = ?"}, []any{t.To}
	if isDecision(t.To) {
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

	// SQLite makes every change of an UPDATE … RETURNING in its first
	// step, so reading only the one row it returns is enough.
	return `UPDATE requests SET ` + strings.Join(set, ", ") +
		` WHERE ` + strings.Join(where, " AND ") + ` RETURNING ` + requestColumns, args
}

// transitionRefusal explains why the UPDATE of t changed nothing: another
// key's or account's request does not exist for the caller; any other
// request is in a state that does not allow the change.
func transitionRefusal(ctx context.Context, tx querier, t countersign.Transition) error {
	r, err := getRequest(ctx, tx, t.ID)
	if err != nil {
		return err
	}
	if (t.KeyID != "" && r.KeyID != t.KeyID) || (t.AccountID != "" && r.AccountID != t.AccountID) {
		return countersign.Errorf(countersign.ENOTFOUND, "request not found")
	}
	switch {
	case r.Status == countersign.StatusExpired, r.Expired(t.Now):
		return countersign.Errorf(countersign.ECONFLICT, "request has expired")
	case r.Status == countersign.StatusPending:
		return countersign.Errorf(countersign.ECONFLICT, "request is still pending")
	}
	return countersign.Errorf(countersign.ECONFLICT, "request is already %s", r.Status)
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
	err := db.updateHot(ctx, func(ctx context.Context, tx querier) (err error) {
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
