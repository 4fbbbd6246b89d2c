package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/countersign/countersign"
)

// RequestByCall returns the consumed request of keyID for the agent's
// call callID in the session sessionID, the newest when several are.
// Errors: ENOTFOUND.
func (db *DB) RequestByCall(ctx context.Context, keyID, sessionID, callID string) (*countersign.Request, error) {
	if keyID == "" || callID == "" {
		return nil, countersign.ErrRequestNotFound()
	}
	r, err := scanRequest(db.read.QueryRowContext(ctx, `SELECT `+requestColumns+` FROM requests INDEXED BY requests_call
		WHERE key_id = ? AND call_id = ? AND call_id <> '' AND status = 'consumed'
		  AND json_extract(context, '$.session_id') IS ?
		ORDER BY created_at DESC, id DESC LIMIT 1`, keyID, callID, nullIfEmpty(sessionID)))
	if err == sql.ErrNoRows {
		return nil, countersign.ErrRequestNotFound()
	} else if err != nil {
		return nil, fmt.Errorf("read request by call: %w", err)
	}
	return r, nil
}

// nullIfEmpty is the JSON value of a context text the encoder leaves out
// when empty: SQL NULL.
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// RecordRan records, once, what ran under the consumed request id, with
// ev, in one conditional UPDATE. Errors: ENOTFOUND, ECONFLICT.
func (db *DB) RecordRan(ctx context.Context, id string, ran countersign.Ran, ev countersign.AuditEvent) (*countersign.Request, error) {
	var row *requestRow
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) (err error) {
		row, err = scanRequestRow(tx.QueryRowContext(ctx, `UPDATE requests SET ran_at = ?, ran_action = ?, ran_args_hash = ?
			WHERE id = ? AND status = 'consumed' AND ran_at = 0 RETURNING `+requestColumns,
			nanos(ran.At), ran.Action, ran.ArgsHash, id))
		if err == sql.ErrNoRows {
			if _, err := getRequest(ctx, tx, id); err != nil {
				return err
			}
			return countersign.Errorf(countersign.ECONFLICT, "what ran under this request is recorded already, or it was not used")
		} else if err != nil {
			return fmt.Errorf("record what ran: %w", err)
		}
		return appendAudit(ctx, tx, ran.At, row.r.AccountID, row.r.ID, ev)
	})
	if err != nil {
		return nil, err
	}
	return row.decode()
}
