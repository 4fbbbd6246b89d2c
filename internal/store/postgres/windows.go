package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

const windowColumns = `id, account_id, key_id, session_id, kind, action, until, created_at, request_id, scope`

// ActiveWindows returns the auto-approve windows open at now for exactly
// this key, session, kind and action, the one open longest first, at most
// countersign.MaxActiveWindows. A window a stop ended is never open, also
// at a time before the stop.
func (db *DB) ActiveWindows(ctx context.Context, keyID, sessionID string, kind countersign.Kind, action string, now time.Time) ([]*countersign.AutoApproveWindow, error) {
	if hasNUL(keyID, sessionID, string(kind), action) {
		return []*countersign.AutoApproveWindow{}, nil
	}
	var out []*countersign.AutoApproveWindow
	err := db.read(ctx, func(q querier) error {
		rows, err := q.Query(ctx, `
			SELECT `+windowColumns+` FROM auto_approve_windows
			WHERE key_id = $1 AND session_id = $2 AND kind = $3 AND action = $4 AND until > $5 AND stopped_at = 0
			ORDER BY until DESC, id DESC LIMIT $6`,
			keyID, sessionID, string(kind), action, nanos(now), countersign.MaxActiveWindows)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*countersign.AutoApproveWindow, error) {
			return scanWindow(row)
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read auto-approve windows: %w", err)
	}
	if out == nil {
		out = []*countersign.AutoApproveWindow{}
	}
	return out, nil
}

func scanWindow(s pgx.Row) (*countersign.AutoApproveWindow, error) {
	var w countersign.AutoApproveWindow
	var kind string
	var until, created int64
	var scope string
	if err := s.Scan(&w.ID, &w.AccountID, &w.KeyID, &w.SessionID, &kind, &w.Action, &until, &created, &w.RequestID, &scope); err != nil {
		return nil, err
	}
	sc, err := countersign.DecodeScope(scope)
	if err != nil {
		return nil, fmt.Errorf("decode scope of window %s: %w", w.ID, err)
	}
	w.Scope = sc
	w.Kind = countersign.Kind(kind)
	w.Until, w.CreatedAt = fromNanos(until), fromNanos(created)
	return &w, nil
}

// queueWindow queues the opening of w for the approval r (see
// countersign.AutoApproveWindow.OpenedBy).
func queueWindow(b *pgx.Batch, r *countersign.Request, w countersign.AutoApproveWindow, now time.Time) error {
	w, err := w.OpenedBy(r, now)
	if err != nil {
		return err
	}
	queueWindowRow(b, &w)
	return nil
}

// queueWindowRow queues the insert of a window as it is.
func queueWindowRow(b *pgx.Batch, w *countersign.AutoApproveWindow) {
	b.Queue(`INSERT INTO auto_approve_windows (`+windowColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		w.ID, w.AccountID, w.KeyID, w.SessionID, string(w.Kind), w.Action, nanos(w.Until), nanos(w.CreatedAt), w.RequestID,
		countersign.EncodeScope(w.Scope))
}

// ClaimCoverage records that an approval covered a request, once. The
// primary key on the approval makes the insert the one conditional
// statement: of two claims, exactly one succeeds. Errors: ENOTFOUND,
// ECONFLICT.
func (db *DB) ClaimCoverage(ctx context.Context, c countersign.Coverage) error {
	if hasNUL(c.ApprovalID, c.RequestID) {
		return countersign.ErrRequestNotFound()
	}
	err := db.update(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO coverages (approval_id, request_id, created_at) VALUES ($1, $2, $3)`,
			c.ApprovalID, c.RequestID, nanos(c.CreatedAt))
		return err
	})
	switch {
	case isUnique(err):
		return countersign.ErrCoverageClaimed()
	case isForeignKey(err):
		return countersign.ErrRequestNotFound()
	case err != nil:
		return fmt.Errorf("claim coverage: %w", err)
	}
	return nil
}
