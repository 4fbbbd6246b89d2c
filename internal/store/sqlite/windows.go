package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

const windowColumns = `id, account_id, key_id, session_id, kind, action, until, created_at, request_id, scope`

// ActiveWindows returns the auto-approve windows open at now for exactly
// this key, session, kind and action, the one open longest first, at most
// countersign.MaxActiveWindows. A window a stop ended is never open, also
// at a time before the stop.
func (db *DB) ActiveWindows(ctx context.Context, keyID, sessionID string, kind countersign.Kind, action string, now time.Time) ([]*countersign.AutoApproveWindow, error) {
	rows, err := db.read.QueryContext(ctx, `
		SELECT `+windowColumns+` FROM auto_approve_windows
		WHERE key_id = ? AND session_id = ? AND kind = ? AND action = ? AND until > ? AND stopped_at = 0
		ORDER BY until DESC, id DESC LIMIT ?`,
		keyID, sessionID, kind, action, nanos(now), countersign.MaxActiveWindows)
	if err != nil {
		return nil, fmt.Errorf("read auto-approve windows: %w", err)
	}
	defer rows.Close()
	out := []*countersign.AutoApproveWindow{}
	for rows.Next() {
		w, err := scanWindow(rows)
		if err != nil {
			return nil, fmt.Errorf("read auto-approve windows: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read auto-approve windows: %w", err)
	}
	return out, nil
}

// scanWindow reads one row of windowColumns.
func scanWindow(s scanner) (*countersign.AutoApproveWindow, error) {
	var w countersign.AutoApproveWindow
	var until, created int64
	var scope string
	if err := s.Scan(&w.ID, &w.AccountID, &w.KeyID, &w.SessionID, &w.Kind, &w.Action, &until, &created, &w.RequestID, &scope); err != nil {
		return nil, err
	}
	sc, err := countersign.DecodeScope(scope)
	if err != nil {
		return nil, fmt.Errorf("decode scope of window %s: %w", w.ID, err)
	}
	w.Until, w.CreatedAt, w.Scope = fromNanos(until), fromNanos(created), sc
	return &w, nil
}

// insertWindow opens w for the approval r (see
// countersign.AutoApproveWindow.OpenedBy).
func insertWindow(ctx context.Context, tx querier, r *countersign.Request, w countersign.AutoApproveWindow, now time.Time) error {
	w, err := w.OpenedBy(r, now)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `
		INSERT INTO auto_approve_windows (`+windowColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.AccountID, w.KeyID, w.SessionID, w.Kind, w.Action, nanos(w.Until), nanos(w.CreatedAt), w.RequestID,
		countersign.EncodeScope(w.Scope))
	if isUnique(err) {
		return countersign.ErrExists("auto-approve window")
	} else if err != nil {
		return fmt.Errorf("open auto-approve window: %w", err)
	}
	return nil
}

// ClaimCoverage records that an approval covered a request, once. The
// primary key on the approval makes the insert the one conditional
// statement: of two claims, exactly one succeeds. Errors: ENOTFOUND,
// ECONFLICT.
func (db *DB) ClaimCoverage(ctx context.Context, c countersign.Coverage) error {
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO coverages (approval_id, request_id, created_at) VALUES (?, ?, ?)`,
			c.ApprovalID, c.RequestID, nanos(c.CreatedAt))
		switch {
		case isUnique(err):
			return countersign.ErrCoverageClaimed()
		case isForeignKey(err):
			return countersign.ErrRequestNotFound()
		case err != nil:
			return fmt.Errorf("claim coverage: %w", err)
		}
		return nil
	})
}
