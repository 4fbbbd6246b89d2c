package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign"
)

// Vote records one approver's vote on a request that needs several, and
// approves the request in the same transaction when the vote reaches the
// quorum. The writer runs one transaction at a time, so the count the
// vote reads is every vote committed before it; the approval is still
// the conditional UPDATE of a transition. Errors: ENOTFOUND, ECONFLICT,
// EFORBIDDEN.
func (db *DB) Vote(ctx context.Context, v countersign.VoteInput, voted, approved countersign.AuditEvent) (*countersign.Request, []countersign.Vote, error) {
	var (
		got   *countersign.Request
		votes []countersign.Vote
	)
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) (err error) {
		got, votes, err = vote(ctx, tx, v, voted, approved)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return got, votes, nil
}

func vote(ctx context.Context, tx querier, v countersign.VoteInput, voted, approved countersign.AuditEvent) (*countersign.Request, []countersign.Vote, error) {
	r, err := getRequest(ctx, tx, v.RequestID)
	if err != nil {
		return nil, nil, err
	}
	t := countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusApproved,
		Now: v.Now, AccountID: v.AccountID, ExpiresAt: v.ExpiresAt}
	if r.AccountID != v.AccountID || r.Status != countersign.StatusPending || r.Expired(v.Now) {
		return nil, nil, countersign.RefuseTransition(t, r)
	}
	if e := v.Edited; e != nil {
		if r, err = editPending(ctx, tx, r, v); err != nil {
			return nil, nil, err
		}
	}
	if r.BindingHash() != v.BindingHash {
		return nil, nil, countersign.ErrVoteBinding()
	}
	if v.Separate {
		var owners int
		if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM agent_keys WHERE id = ?1 AND created_by = ?2)
			+ (SELECT count(*) FROM grants WHERE key_id = ?1 AND approver_id = ?2)`, r.KeyID, v.ApproverID).Scan(&owners); err != nil {
			return nil, nil, fmt.Errorf("read the key's owner: %w", err)
		}
		if owners > 0 {
			return nil, nil, countersign.ErrOwnKey()
		}
	}
	// A vote for the binding of an edit replaces the approver's vote for
	// the action before it.
	res, err := tx.ExecContext(ctx, `INSERT INTO votes (request_id, approver_id, username, binding_hash, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (request_id, approver_id) DO UPDATE SET username = excluded.username, binding_hash = excluded.binding_hash,
		created_at = excluded.created_at WHERE votes.binding_hash <> excluded.binding_hash`,
		r.ID, v.ApproverID, v.Username, v.BindingHash, nanos(v.Now))
	if err != nil {
		return nil, nil, fmt.Errorf("record vote: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, nil, fmt.Errorf("record vote: %w", err)
	} else if n == 0 {
		return nil, nil, countersign.ErrAlreadyVoted()
	}
	if err := appendAudit(ctx, tx, v.Now, r.AccountID, r.ID, voted); err != nil {
		return nil, nil, err
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
	if len(votes) < v.Quorum {
		// The vote is the decision asked for, though the request stays
		// pending: a retry with its key gets this answer again.
		if i := countersign.IdempotencyFrom(ctx); i != nil && i.Op == countersign.IdemDecision {
			if err := recordIdempotent(ctx, tx, r, false, v.Now); err != nil {
				return nil, nil, err
			}
		}
		return r, votes, nil
	}
	t.DecidedBy = countersign.VotersOf(votes)
	update, args, err := updateStatement(t)
	if err != nil {
		return nil, nil, err
	}
	row, err := transition(ctx, tx, t, update, args, approved)
	if err != nil {
		return nil, nil, err
	}
	got, err := row.decode()
	if err != nil {
		return nil, nil, err
	}
	return got, votes, nil
}

// whoCounts reads, in the vote's transaction, the ids of the approvers
// whose votes on r count under v, and when the human last stopped r's
// agent session (zero for never, or a request of no session). The writer
// runs one transaction at a time, so no change of membership and no stop
// comes between this read and the vote's commit.
func whoCounts(ctx context.Context, tx querier, v countersign.VoteInput, r *countersign.Request) ([]string, time.Time, error) {
	rows, err := tx.QueryContext(ctx, `SELECT a.id, a.username, m.role FROM memberships m JOIN approvers a ON a.id = m.approver_id
		WHERE m.account_id = ?`, r.AccountID)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("read the account's members: %w", err)
	}
	defer rows.Close()
	counted := []string{}
	for rows.Next() {
		var m countersign.Member
		if err := rows.Scan(&m.ApproverID, &m.Username, &m.Role); err != nil {
			return nil, time.Time{}, fmt.Errorf("read the account's members: %w", err)
		}
		if v.MayCount(&m) {
			counted = append(counted, m.ApproverID)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, fmt.Errorf("read the account's members: %w", err)
	}
	var since int64
	if session := r.Context.SessionID; session != "" {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(decided_at), 0) FROM requests
			WHERE key_id = ? AND status = 'stopped' AND account_id = ? AND json_extract(context, '$.session_id') = ?`,
			r.KeyID, r.AccountID, session).Scan(&since); err != nil {
			return nil, time.Time{}, fmt.Errorf("read the session's last stop: %w", err)
		}
	}
	if since == 0 {
		return counted, time.Time{}, nil
	}
	return counted, fromNanos(since), nil
}

// Votes returns the votes of a request, oldest first.
func (db *DB) Votes(ctx context.Context, requestID string) ([]countersign.Vote, error) {
	return listVotes(ctx, db.read, requestID)
}

func listVotes(ctx context.Context, q querier, requestID string) ([]countersign.Vote, error) {
	rows, err := q.QueryContext(ctx, `SELECT request_id, approver_id, username, binding_hash, created_at FROM votes
		WHERE request_id = ? ORDER BY rowid`, requestID)
	if err != nil {
		return nil, fmt.Errorf("list votes: %w", err)
	}
	defer rows.Close()
	out := []countersign.Vote{}
	for rows.Next() {
		var v countersign.Vote
		var at int64
		if err := rows.Scan(&v.RequestID, &v.ApproverID, &v.Username, &v.BindingHash, &at); err != nil {
			return nil, fmt.Errorf("list votes: %w", err)
		}
		v.CreatedAt = fromNanos(at)
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list votes: %w", err)
	}
	return out, nil
}

// editPending replaces the action of the pending request r, as read in
// the transaction, with the voter's edit, keeping the original, and
// returns the request as edited. Errors: ECONFLICT when r no longer holds
// the action edited.
func editPending(ctx context.Context, tx querier, r *countersign.Request, v countersign.VoteInput) (*countersign.Request, error) {
	e := v.Edited
	if e.Original == nil || r.Original != nil || r.ArgsHash != e.Original.ArgsHash || r.PreviewHash != e.Original.PreviewHash {
		return nil, countersign.Errorf(countersign.ECONFLICT, "the request's action changed since it was read; reload the request and decide again")
	}
	set, args, err := editSet(e)
	if err != nil {
		return nil, err
	}
	args = append(args, r.ID)
	got, err := scanRequest(tx.QueryRowContext(ctx, `UPDATE requests SET `+strings.Join(set, ", ")+`
		WHERE id = ? AND status = 'pending' AND original = '' RETURNING `+requestColumns, args...))
	if err != nil {
		return nil, fmt.Errorf("edit the request: %w", err)
	}
	return got, nil
}
