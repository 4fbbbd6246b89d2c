package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

const windowColumns = `id, account_id, key_id, session_id, kind, action, until, created_at, request_id`

// ActiveWindow returns the auto-approve window open at now for exactly this
// key, session, kind and action; of several, the one open longest. Errors:
// ENOTFOUND.
func (db *DB) ActiveWindow(ctx context.Context, keyID, sessionID string, kind countersign.Kind, action string, now time.Time) (*countersign.AutoApproveWindow, error) {
	notFound := countersign.Errorf(countersign.ENOTFOUND, "no auto-approve window is open")
	if hasNUL(keyID, sessionID, string(kind), action) {
		return nil, notFound
	}
	var w *countersign.AutoApproveWindow
	err := db.read(ctx, func(q querier) (err error) {
		w, err = scanWindow(q.QueryRow(ctx, `
			SELECT `+windowColumns+` FROM auto_approve_windows
			WHERE key_id = $1 AND session_id = $2 AND kind = $3 AND action = $4 AND until > $5
			ORDER BY until DESC, id DESC LIMIT 1`,
			keyID, sessionID, string(kind), action, nanos(now)))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound
	} else if err != nil {
		return nil, fmt.Errorf("read auto-approve window: %w", err)
	}
	return w, nil
}

func scanWindow(s pgx.Row) (*countersign.AutoApproveWindow, error) {
	var w countersign.AutoApproveWindow
	var kind string
	var until, created int64
	if err := s.Scan(&w.ID, &w.AccountID, &w.KeyID, &w.SessionID, &kind, &w.Action, &until, &created, &w.RequestID); err != nil {
		return nil, err
	}
	w.Kind = countersign.Kind(kind)
	w.Until, w.CreatedAt = fromNanos(until), fromNanos(created)
	return &w, nil
}

// queueWindow queues the opening of w for the approval r. The window takes
// its account, key and request from r where w leaves them empty, and may
// not name another: a window never widens beyond the key that asked.
func queueWindow(b *pgx.Batch, r *countersign.Request, w countersign.AutoApproveWindow, now time.Time) error {
	if (w.AccountID != "" && w.AccountID != r.AccountID) || (w.KeyID != "" && w.KeyID != r.KeyID) ||
		(w.RequestID != "" && w.RequestID != r.ID) {
		return countersign.Errorf(countersign.EINVALID, "an auto-approve window belongs to the request that opened it")
	}
	w.ID = orID(w.ID, "win_")
	w.AccountID, w.KeyID, w.RequestID = r.AccountID, r.KeyID, r.ID
	if w.CreatedAt.IsZero() {
		w.CreatedAt = now
	}
	queueWindowRow(b, &w)
	return nil
}

// queueWindowRow queues the insert of a window as it is.
func queueWindowRow(b *pgx.Batch, w *countersign.AutoApproveWindow) {
	b.Queue(`INSERT INTO auto_approve_windows (`+windowColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		w.ID, w.AccountID, w.KeyID, w.SessionID, string(w.Kind), w.Action, nanos(w.Until), nanos(w.CreatedAt), w.RequestID)
}
