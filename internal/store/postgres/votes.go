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

// Vote records one approver's vote on a request that needs several, and
// approves the request in the same transaction when the vote reaches the
// quorum. The vote first locks the request's row: two votes of one
// request, or a vote and a decision, run one after the other, so the
// count a vote reads holds every vote committed before it, and of two
// racing last votes the second finds the request approved. Errors:
// ENOTFOUND, ECONFLICT, EFORBIDDEN.
func (db *DB) Vote(ctx context.Context, v countersign.VoteInput, voted, approved countersign.AuditEvent) (*countersign.Request, []countersign.Vote, error) {
	if hasNUL(v.RequestID, v.AccountID, v.ApproverID, v.Username, v.BindingHash) {
		return nil, nil, countersign.ErrRequestNotFound()
	}
	var (
		got   *countersign.Request
		votes []countersign.Vote
	)
	err := db.update(ctx, func(tx pgx.Tx) (err error) {
		got, votes, err = db.vote(ctx, tx, v, voted, approved)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return got, votes, nil
}

func (db *DB) vote(ctx context.Context, tx pgx.Tx, v countersign.VoteInput, voted, approved countersign.AuditEvent) (*countersign.Request, []countersign.Vote, error) {
	r, err := scanRequest(tx.QueryRow(ctx, `SELECT `+requestColumns+` FROM requests WHERE id = $1 FOR UPDATE`, v.RequestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, countersign.ErrRequestNotFound()
	} else if err != nil {
		return nil, nil, fmt.Errorf("read request: %w", badText(err))
	}
	t := countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusApproved,
		Now: v.Now, AccountID: v.AccountID, ExpiresAt: v.ExpiresAt}
	if r.AccountID != v.AccountID || r.Status != countersign.StatusPending || r.Expired(v.Now) {
		return nil, nil, countersign.RefuseTransition(t, r)
	}
	if v.Edited != nil {
		if r, err = editPending(ctx, tx, r, v); err != nil {
			return nil, nil, err
		}
	}
	if r.BindingHash() != v.BindingHash {
		return nil, nil, countersign.ErrVoteBinding()
	}
	if v.Separate {
		var owners int
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM agent_keys WHERE id = $1 AND created_by = $2)
			+ (SELECT count(*) FROM grants WHERE key_id = $1 AND approver_id = $2)`, r.KeyID, v.ApproverID).Scan(&owners); err != nil {
			return nil, nil, fmt.Errorf("read the key's owner: %w", err)
		}
		if owners > 0 {
			return nil, nil, countersign.ErrOwnKey()
		}
	}
	// A vote for the binding of an edit replaces the approver's vote for
	// the action before it.
	tag, err := tx.Exec(ctx, `INSERT INTO votes (request_id, approver_id, username, binding_hash, created_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (request_id, approver_id) DO UPDATE SET username = excluded.username, binding_hash = excluded.binding_hash,
		created_at = excluded.created_at WHERE votes.binding_hash <> excluded.binding_hash`,
		r.ID, v.ApproverID, v.Username, v.BindingHash, nanos(v.Now))
	if err != nil {
		return nil, nil, fmt.Errorf("record vote: %w", badText(err))
	} else if tag.RowsAffected() == 0 {
		return nil, nil, countersign.ErrAlreadyVoted()
	}
	votes, err := listVotes(ctx, tx, r.ID)
	if err != nil {
		return nil, nil, err
	}
	counted, since := []string(nil), time.Time{}
	if v.Members {
		counted, since, err = whoCounts(ctx, tx, v, r)
		if err != nil {
			return nil, nil, err
		}
	}
	votes = countersign.CountedVotes(votes, r.BindingHash(), counted, since)
	items := []auditItem{{r.AccountID, r.ID, voted}}
	got := r
	if len(votes) >= v.Quorum {
		t.DecidedBy = countersign.VotersOf(votes)
		query, a, err := updateSQL(t)
		if err != nil {
			return nil, nil, err
		}
		got, err = scanRequest(tx.QueryRow(ctx, query, a...))
		if errors.Is(err, pgx.ErrNoRows) {
			// The row is locked and was checked: nothing else changed it.
			return nil, nil, transitionRefusal(ctx, tx, t)
		} else if err != nil {
			return nil, nil, fmt.Errorf("update request status: %w", badText(err))
		}
		items = append(items, auditItem{got.AccountID, got.ID, approved})
	}
	batch := &pgx.Batch{}
	queueNotify(batch, db.payload(r.ID, r.AccountID, ""))
	idem := countersign.IdempotencyFrom(ctx)
	// A vote is the decision asked for, whether or not it reaches the
	// quorum: a retry with its key gets its answer again.
	recordIdem := idem != nil && idem.Op == countersign.IdemDecision
	if recordIdem {
		queueIdempotent(batch, idem, got, false, v.Now)
	}
	br := tx.SendBatch(ctx, batch)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, nil, fmt.Errorf("announce the vote: %w", err)
	}
	if recordIdem {
		if err := idempotentResult(br); err != nil {
			br.Close()
			return nil, nil, err
		}
	}
	if err := br.Close(); err != nil {
		return nil, nil, fmt.Errorf("announce the vote: %w", err)
	}
	if err := db.appendAudit(ctx, tx, v.Now, items...); err != nil {
		return nil, nil, err
	}
	return got, votes, nil
}

// whoCounts reads, in the vote's transaction, the ids of the approvers
// whose votes on r count under v, and when the human last stopped r's
// agent session (zero for never, or a request of no session). The
// account's memberships are locked (FOR SHARE) until the vote commits: a
// change of role or a removal either committed before, and is read here,
// or waits for the vote. A stop takes the account's lock before it ends
// the session's approvals (stopApprovals), and so does this read: a stop
// committed before is seen, and one after it ends the approval this vote
// gives.
func whoCounts(ctx context.Context, tx pgx.Tx, v countersign.VoteInput, r *countersign.Request) ([]string, time.Time, error) {
	rows, err := tx.Query(ctx, `SELECT a.id, a.username, m.role FROM memberships m JOIN approvers a ON a.id = m.approver_id
		WHERE m.account_id = $1 FOR SHARE OF m`, r.AccountID)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read the account's members: %w", err)
	}
	members, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (countersign.Member, error) {
		var m countersign.Member
		err := row.Scan(&m.ApproverID, &m.Username, &m.Role)
		return m, err
	})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read the account's members: %w", err)
	}
	counted := []string{}
	for i := range members {
		if v.MayCount(&members[i]) {
			counted = append(counted, members[i].ApproverID)
		}
	}
	session := r.Context.SessionID
	if session == "" {
		return counted, time.Time{}, nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1::int4, hashtext($2))`, int32(accountLock), r.AccountID); err != nil {
		return nil, time.Time{}, fmt.Errorf("lock the account: %w", err)
	}
	var since int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(decided_at), 0) FROM requests
		WHERE key_id = $1 AND session_id = $2 AND status = 'stopped' AND account_id = $3`,
		r.KeyID, session, r.AccountID).Scan(&since); err != nil {
		return nil, time.Time{}, fmt.Errorf("read the session's last stop: %w", err)
	}
	if since == 0 {
		return counted, time.Time{}, nil
	}
	return counted, fromNanos(since), nil
}

// Votes returns the votes of a request, oldest first.
func (db *DB) Votes(ctx context.Context, requestID string) ([]countersign.Vote, error) {
	if hasNUL(requestID) {
		return []countersign.Vote{}, nil
	}
	var out []countersign.Vote
	err := db.read(ctx, func(q querier) (err error) {
		out, err = listVotes(ctx, q, requestID)
		return err
	})
	return out, err
}

func listVotes(ctx context.Context, q querier, requestID string) ([]countersign.Vote, error) {
	rows, err := q.Query(ctx, `SELECT request_id, approver_id, username, binding_hash, created_at FROM votes
		WHERE request_id = $1 ORDER BY seq`, requestID)
	if err != nil {
		return nil, fmt.Errorf("list votes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (countersign.Vote, error) {
		var v countersign.Vote
		var at int64
		err := row.Scan(&v.RequestID, &v.ApproverID, &v.Username, &v.BindingHash, &at)
		v.CreatedAt = fromNanos(at)
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("list votes: %w", err)
	}
	return out, nil
}

// editPending replaces the action of the pending request r, as read and
// locked in the transaction, with the voter's edit, keeping the original,
// and returns the request as edited. Errors: ECONFLICT when r no longer
// holds the action edited.
func editPending(ctx context.Context, tx pgx.Tx, r *countersign.Request, v countersign.VoteInput) (*countersign.Request, error) {
	e := v.Edited
	if e.Original == nil || r.Original != nil || r.ArgsHash != e.Original.ArgsHash || r.PreviewHash != e.Original.PreviewHash {
		return nil, countersign.Errorf(countersign.ECONFLICT, "the request's action changed since it was read; reload the request and decide again")
	}
	var a args
	set, err := editSet(e, &a)
	if err != nil {
		return nil, err
	}
	got, err := scanRequest(tx.QueryRow(ctx, `UPDATE requests SET `+strings.Join(set, ", ")+`
		WHERE id = `+a.add(r.ID)+` AND status = 'pending' AND original = '' RETURNING `+requestColumns, a...))
	if err != nil {
		return nil, fmt.Errorf("edit the request: %w", badText(err))
	}
	return got, nil
}
