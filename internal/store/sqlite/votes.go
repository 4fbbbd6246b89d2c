package sqlite

import (
	"context"
	"fmt"

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
	_, err = tx.ExecContext(ctx, `INSERT INTO votes (request_id, approver_id, username, binding_hash, created_at) VALUES (?, ?, ?, ?, ?)`,
		r.ID, v.ApproverID, v.Username, v.BindingHash, nanos(v.Now))
	if isUnique(err) {
		return nil, nil, countersign.ErrAlreadyVoted()
	} else if err != nil {
		return nil, nil, fmt.Errorf("record vote: %w", err)
	}
	if err := appendAudit(ctx, tx, v.Now, r.AccountID, r.ID, voted); err != nil {
		return nil, nil, err
	}
	votes, err := listVotes(ctx, tx, r.ID)
	if err != nil {
		return nil, nil, err
	}
	votes = countersign.CountedVotes(votes, v.Counted, v.Since)
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
	update, args := updateStatement(t, requestColumns)
	row, err := transition(ctx, tx, t, update, args, approved, nil)
	if err != nil {
		return nil, nil, err
	}
	got, err := row.decode()
	if err != nil {
		return nil, nil, err
	}
	return got, votes, nil
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
