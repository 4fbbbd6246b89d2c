package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// ActiveWindow returns the auto-approve window open at now for exactly this
// key, session, kind and action; of several, the one open longest. Errors:
// ENOTFOUND.
func (db *DB) ActiveWindow(ctx context.Context, keyID, sessionID string, kind countersign.Kind, action string, now time.Time) (*countersign.AutoApproveWindow, error) {
	var w countersign.AutoApproveWindow
	var until, created int64
	err := db.read.QueryRowContext(ctx, `
		SELECT id, account_id, key_id, session_id, kind, action, until, created_at, request_id
		FROM auto_approve_windows
		WHERE key_id = ? AND session_id = ? AND kind = ? AND action = ? AND until > ?
		ORDER BY until DESC, id DESC LIMIT 1`,
		keyID, sessionID, kind, action, nanos(now)).
		Scan(&w.ID, &w.AccountID, &w.KeyID, &w.SessionID, &w.Kind, &w.Action, &until, &created, &w.RequestID)
	if err == sql.ErrNoRows {
		return nil, countersign.Errorf(countersign.ENOTFOUND, "no auto-approve window is open")
	} else if err != nil {
		return nil, fmt.Errorf("read auto-approve window: %w", err)
	}
	w.Until, w.CreatedAt = fromNanos(until), fromNanos(created)
	return &w, nil
}

// insertWindow opens w for the approval r. The window takes its account,
// key and request from r where w leaves them empty, and may not name
// another: a window never widens beyond the key that asked.
func insertWindow(ctx context.Context, tx querier, r *countersign.Request, w countersign.AutoApproveWindow, now time.Time) error {
	if (w.AccountID != "" && w.AccountID != r.AccountID) || (w.KeyID != "" && w.KeyID != r.KeyID) ||
		(w.RequestID != "" && w.RequestID != r.ID) {
		return countersign.Errorf(countersign.EINVALID, "an auto-approve window belongs to the request that opened it")
	}
	w.ID = orID(w.ID, "win_")
	w.AccountID, w.KeyID, w.RequestID = r.AccountID, r.KeyID, r.ID
	if w.CreatedAt.IsZero() {
		w.CreatedAt = now
	}
	_, err := tx.ExecContext(ctx, `
		INSERT INTO auto_approve_windows (id, account_id, key_id, session_id, kind, action, until, created_at, request_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.AccountID, w.KeyID, w.SessionID, w.Kind, w.Action, nanos(w.Until), nanos(w.CreatedAt), w.RequestID)
	if isUnique(err) {
		return countersign.Errorf(countersign.ECONFLICT, "auto-approve window already exists")
	} else if err != nil {
		return fmt.Errorf("open auto-approve window: %w", err)
	}
	return nil
}
