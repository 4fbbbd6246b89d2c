package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// revokeApproverGrants revokes, in tx, every live grant the approver
// allowed in the account (in every account when accountID is empty), as
// revokeGrant does, and writes an audit entry for each with the reason. It
// returns the ids of the grants it revoked, oldest first.
func revokeApproverGrants(ctx context.Context, tx querier, approverID, accountID, reason string, at time.Time) ([]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id, account_id FROM grants
		WHERE approver_id = ? AND (? = '' OR account_id = ?) AND revoked_at = 0
		ORDER BY created_at, id`, approverID, accountID, accountID)
	if err != nil {
		return nil, fmt.Errorf("list the approver's grants: %w", err)
	}
	var ids, accounts []string
	for rows.Next() {
		var id, acc string
		if err := rows.Scan(&id, &acc); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list the approver's grants: %w", err)
		}
		ids, accounts = append(ids, id), append(accounts, acc)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list the approver's grants: %w", err)
	}
	for i, id := range ids {
		if err := revokeGrantFor(ctx, tx, accounts[i], id, reason, at); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// revokeKeyGrant revokes, in tx, the live grant whose key keyID is, if
// any: a grant's key revoked by itself must end what revoking the grant
// ends, its tokens and the sessions its consent signed in.
func revokeKeyGrant(ctx context.Context, tx querier, keyID string, at time.Time) error {
	var id, acc string
	err := tx.QueryRowContext(ctx, `SELECT id, account_id FROM grants WHERE key_id = ? AND revoked_at = 0`, keyID).Scan(&id, &acc)
	if err == sql.ErrNoRows {
		return nil
	} else if err != nil {
		return fmt.Errorf("read the key's grant: %w", err)
	}
	return revokeGrantFor(ctx, tx, acc, id, countersign.RevokedKeyRevoked, at)
}

// revokeGrantFor revokes a grant of the account and records why in the
// audit log, in tx.
func revokeGrantFor(ctx context.Context, tx querier, accountID, id, reason string, at time.Time) error {
	if err := revokeGrant(ctx, tx, accountID, id, at); err != nil {
		return err
	}
	return appendAudit(ctx, tx, at, accountID, "", countersign.GrantRevokedEvent(id, reason))
}

// grantMember checks, in the transaction that stores a grant, that its
// approver is still a member of its account, and its admin: a removal or
// a demotion that committed first would otherwise leave a grant it never
// saw.
func grantMember(ctx context.Context, tx querier, approverID, accountID string) error {
	var role countersign.Role
	err := tx.QueryRowContext(ctx, `SELECT role FROM memberships WHERE approver_id = ? AND account_id = ?`, approverID, accountID).Scan(&role)
	if err == sql.ErrNoRows {
		return countersign.ErrGrantNotMember()
	} else if err != nil {
		return fmt.Errorf("check the grant's approver: %w", err)
	}
	if !role.Administers() {
		return countersign.ErrNotAdmin()
	}
	return nil
}
