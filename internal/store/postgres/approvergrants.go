package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// revokeApproverGrants revokes, in tx, every live grant the approver
// allowed in the account (in every account when accountID is empty), as
// revokeGrant does, and writes an audit entry for each with the reason. It
// returns the ids of the grants it revoked, oldest first. It locks the
// grants first, then their keys, in the order RevokeGrant does.
func (db *DB) revokeApproverGrants(ctx context.Context, tx pgx.Tx, approverID, accountID, reason string, at time.Time) ([]string, error) {
	type grantRow struct{ id, account string }
	rows, err := collect(ctx, tx, func(r pgx.Row) (g grantRow, err error) {
		return g, r.Scan(&g.id, &g.account)
	}, `SELECT id, account_id FROM grants
		WHERE approver_id = $1 AND ($2 = '' OR account_id = $2) AND revoked_at = 0
		ORDER BY created_at, id FOR UPDATE`, approverID, accountID)
	if err != nil {
		return nil, fmt.Errorf("list the approver's grants: %w", err)
	}
	ids := []string{}
	var items []auditItem
	for _, g := range rows {
		if err := revokeGrant(ctx, tx, g.account, g.id, at); err != nil {
			return nil, err
		}
		ids = append(ids, g.id)
		items = append(items, auditItem{accountID: g.account, ev: countersign.GrantRevokedEvent(g.id, reason)})
	}
	if len(items) == 0 {
		return ids, nil
	}
	return ids, db.appendAudit(ctx, tx, at, items...)
}

// lockKeyGrant locks the grant whose key keyID is, if any, before the key
// itself is locked: RevokeGrant locks a grant and then its key, and a
// revocation of the key must take them in the same order, or the two could
// wait on each other. It returns the grant's id and account, empty for
// the key of no grant or of a grant already revoked.
func lockKeyGrant(ctx context.Context, tx pgx.Tx, keyID string) (id, accountID string, err error) {
	var revoked int64
	err = tx.QueryRow(ctx, `SELECT id, account_id, revoked_at FROM grants WHERE key_id = $1 FOR UPDATE`, keyID).Scan(&id, &accountID, &revoked)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && revoked != 0) {
		return "", "", nil
	} else if err != nil {
		return "", "", fmt.Errorf("read the key's grant: %w", err)
	}
	return id, accountID, nil
}

// revokeKeyGrant revokes, in tx, the grant lockKeyGrant locked: a grant's
// key revoked by itself must end what revoking the grant ends, its tokens
// and the sessions its consent signed in.
func (db *DB) revokeKeyGrant(ctx context.Context, tx pgx.Tx, id, accountID string, at time.Time) error {
	if id == "" {
		return nil
	}
	if err := revokeGrant(ctx, tx, accountID, id, at); err != nil {
		return err
	}
	return db.appendAudit(ctx, tx, at, auditItem{accountID: accountID, ev: countersign.GrantRevokedEvent(id, countersign.RevokedKeyRevoked)})
}

// grantMember checks, in the transaction that stores a grant, that its
// approver is still a member of its account, and its admin. FOR SHARE
// orders it with a removal or a demotion of the membership: one that
// changed the row first makes this find it gone or not an admin's; one
// that comes second waits for the grant's commit, and then revokes it
// (a removal) or leaves it (a demotion, as of every grant allowed before).
func grantMember(ctx context.Context, tx pgx.Tx, approverID, accountID string) error {
	var role countersign.Role
	err := tx.QueryRow(ctx, `SELECT role FROM memberships WHERE approver_id = $1 AND account_id = $2 FOR SHARE`, approverID, accountID).Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return countersign.ErrGrantNotMember()
	} else if err != nil {
		return fmt.Errorf("check the grant's approver: %w", err)
	}
	if !role.Administers() {
		return countersign.ErrNotAdmin()
	}
	return nil
}
