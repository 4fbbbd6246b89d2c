package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// RequestByCall returns the consumed request of keyID for the agent's
// call callID in the session sessionID, the newest when several are.
// Errors: ENOTFOUND.
func (db *DB) RequestByCall(ctx context.Context, keyID, sessionID, callID string) (*countersign.Request, error) {
	if keyID == "" || callID == "" || hasNUL(keyID, sessionID, callID) {
		return nil, countersign.ErrRequestNotFound()
	}
	var r *countersign.Request
	err := db.read(ctx, func(q querier) (err error) {
		r, err = scanRequest(q.QueryRow(ctx, `SELECT `+requestColumns+` FROM requests
			WHERE key_id = $1 AND call_id = $2 AND call_id <> '' AND status = 'consumed' AND session_id = $3
			ORDER BY created_at DESC, id DESC LIMIT 1`, keyID, callID, sessionID))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.ErrRequestNotFound()
	} else if err != nil {
		return nil, fmt.Errorf("read request by call: %w", badText(err))
	}
	return r, nil
}

// RecordRan records, once, what ran under the consumed request id, with
// ev, in one round trip: the conditional UPDATE, the audit entry only when
// it changed the request, and the commit. Errors: ENOTFOUND, ECONFLICT.
func (db *DB) RecordRan(ctx context.Context, id string, ran countersign.Ran, ev countersign.AuditEvent) (*countersign.Request, error) {
	if hasNUL(id) {
		return nil, countersign.ErrRequestNotFound()
	}
	var got *countersign.Request
	err := db.pipeline(ctx, func(p *pipe) error {
		var a args
		batch := &pgx.Batch{}
		batch.Queue(`UPDATE requests SET ran_at = `+a.add(nanos(ran.At))+`, ran_action = `+a.add(ran.Action)+`, ran_args_hash = `+a.add(ran.ArgsHash)+`
			WHERE id = `+a.add(id)+` AND status = 'consumed' AND ran_at = 0
			RETURNING `+requestColumns+`, pg_notify('`+notifyChannel+`', id || ' ' || account_id || `+a.add(p.db.payload("", "", "")[1:])+`)::text`, a...)
		p.db.queueAuditIfChanged(batch, ran.At, auditItem{requestID: id, ev: ev})
		br := p.sendCommit(batch)
		r, err := scanRequest(withNotified{br.QueryRow()})
		if errors.Is(err, pgx.ErrNoRows) {
			r = nil
		} else if err != nil {
			return p.unsent(fmt.Errorf("record what ran: %w", badText(err)))
		}
		if err := auditResultsIfChanged(br, r != nil); err != nil {
			return p.unsent(err)
		}
		if err := commitResult(br); err != nil {
			return err
		}
		if r == nil {
			if _, err := getRequest(p.ctx, p.conn, id); err != nil {
				return err
			}
			return countersign.Errorf(countersign.ECONFLICT, "what ran under this request is recorded already, or it was not used")
		}
		got = r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}
