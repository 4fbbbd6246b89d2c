package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// CreateSession implements countersign.SessionStore.
func (db *DB) CreateSession(ctx context.Context, s *countersign.Session) error {
	return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions
			(hash, approver_id, account_id, created_at, expires_at, last_seen_at, user_agent, client, grant_id)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			s.Hash, s.ApproverID, s.AccountID, nanos(s.CreatedAt), nanos(s.ExpiresAt), nanos(s.LastSeenAt), s.UserAgent, s.Client, s.GrantID)
		if isForeignKey(err) {
			return countersign.NotFound("approver or account")
		} else if err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		return nil
	})
}

const sessionColumns = `s.hash, s.approver_id, s.account_id, s.created_at, s.expires_at, s.last_seen_at, s.user_agent, s.client, s.grant_id`

func scanSession(s scanner, extra ...any) (*countersign.Session, error) {
	var out countersign.Session
	var created, expires, seen int64
	dest := append([]any{&out.Hash, &out.ApproverID, &out.AccountID, &created, &expires, &seen, &out.UserAgent, &out.Client, &out.GrantID}, extra...)
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	out.CreatedAt, out.ExpiresAt, out.LastSeenAt = fromNanos(created), fromNanos(expires), fromNanos(seen)
	return &out, nil
}

// SessionByHash implements countersign.SessionStore. The join on memberships
// makes a session end the moment its approver leaves the account.
func (db *DB) SessionByHash(ctx context.Context, hash string, now time.Time) (*countersign.Session, *countersign.Approver, error) {
	var a countersign.Approver
	var aCreated int64
	var role countersign.Role
	s, err := scanSession(db.read.QueryRowContext(ctx, `
		SELECT `+sessionColumns+`, a.id, a.username, a.password_hash, a.created_at, m.role
		FROM sessions s
		JOIN approvers a ON a.id = s.approver_id
		JOIN memberships m ON m.approver_id = s.approver_id AND m.account_id = s.account_id
		WHERE s.hash = ? AND s.expires_at > ?`, hash, nanos(now)),
		&a.ID, &a.Username, &a.PasswordHash, &aCreated, &role)
	if err == sql.ErrNoRows {
		return nil, nil, countersign.NotFound("session")
	} else if err != nil {
		return nil, nil, fmt.Errorf("read session: %w", err)
	}
	a.CreatedAt = fromNanos(aCreated)
	s.Role = role
	return s, &a, nil
}

// TouchSession implements countersign.SessionStore.
func (db *DB) TouchSession(ctx context.Context, hash string, now time.Time) error {
	return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ? WHERE hash = ?`, nanos(now), hash); err != nil {
			return fmt.Errorf("touch session: %w", err)
		}
		return nil
	})
}

// Sessions implements countersign.SessionStore.
func (db *DB) Sessions(ctx context.Context, approverID string, now time.Time) ([]*countersign.Session, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+sessionColumns+` FROM sessions s
		WHERE s.approver_id = ? AND s.expires_at > ? ORDER BY s.created_at DESC`, approverID, nanos(now))
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	defer rows.Close()
	out := []*countersign.Session{}
	for rows.Next() {
		s, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("list sessions: %w", err)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// SwitchSessionAccount implements countersign.SessionStore.
func (db *DB) SwitchSessionAccount(ctx context.Context, hash, accountID string) error {
	return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET account_id = ? WHERE hash = ?
			AND EXISTS (SELECT 1 FROM memberships m WHERE m.approver_id = sessions.approver_id AND m.account_id = ?)`,
			accountID, hash, accountID)
		if err != nil {
			return fmt.Errorf("switch session account: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return countersign.ErrNoSuchAccount()
		}
		return nil
	})
}

// DeleteSession implements countersign.SessionStore.
func (db *DB) DeleteSession(ctx context.Context, hash string) error {
	return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE hash = ?`, hash); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		return nil
	})
}

// DeleteSessions implements countersign.SessionStore.
func (db *DB) DeleteSessions(ctx context.Context, approverID string) (int, error) {
	var n int64
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE approver_id = ?`, approverID)
		if err != nil {
			return fmt.Errorf("delete sessions: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return int(n), err
}

// SetPassword implements countersign.SessionStore.
func (db *DB) SetPassword(ctx context.Context, approverID, passwordHash string, keepGrants bool, at time.Time) ([]string, error) {
	return db.setPassword(ctx, approverID, passwordHash, false, keepGrants, at)
}

// ClearPassword implements countersign.SessionStore.
func (db *DB) ClearPassword(ctx context.Context, approverID string, keepGrants bool, at time.Time) ([]string, error) {
	return db.setPassword(ctx, approverID, "", true, keepGrants, at)
}

// setPassword stores a password hash, with needPasskey only while the
// approver has a passkey: the check is the UPDATE's own, as RemovePasskey's
// is its DELETE's, so that of the two at once one sees the other's change.
func (db *DB) setPassword(ctx context.Context, approverID, passwordHash string, needPasskey, keepGrants bool, at time.Time) ([]string, error) {
	var revoked []string
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `UPDATE approvers SET password_hash = ? WHERE id = ?
			AND (NOT ? OR EXISTS (SELECT 1 FROM webauthn_credentials WHERE approver_id = ?))`,
			passwordHash, approverID, needPasskey, approverID)
		if err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return noPasswordSet(ctx, tx, approverID)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE approver_id = ?`, approverID); err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if keepGrants {
			return nil
		}
		revoked, err = revokeApproverGrants(ctx, tx, approverID, "", countersign.RevokedPasswordReset, at)
		return err
	})
	return revoked, err
}

// noPasswordSet says why a password was not set: the approver is there,
// so it has no passkey; or it is not.
func noPasswordSet(ctx context.Context, tx querier, approverID string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM approvers WHERE id = ?`, approverID).Scan(&one)
	if err == sql.ErrNoRows {
		return countersign.NotFound("approver")
	} else if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	return countersign.ErrNoPasskeyToSignIn()
}

// RemoveMembership implements countersign.SessionStore.
func (db *DB) RemoveMembership(ctx context.Context, approverID, accountID string, at time.Time) ([]string, error) {
	return db.removeMembership(ctx, approverID, accountID, at, false)
}

// RemoveMembershipKeepingAdmin implements countersign.SessionStore.
func (db *DB) RemoveMembershipKeepingAdmin(ctx context.Context, approverID, accountID string, at time.Time) ([]string, error) {
	return db.removeMembership(ctx, approverID, accountID, at, true)
}

func (db *DB) removeMembership(ctx context.Context, approverID, accountID string, at time.Time, keepAdmin bool) ([]string, error) {
	var revoked []string
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM memberships WHERE approver_id = ? AND account_id = ? AND (? OR `+keepsAdmin+`)`,
			approverID, accountID, !keepAdmin)
		if err != nil {
			return fmt.Errorf("remove membership: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return notMemberOrLastAdmin(ctx, tx, approverID, accountID)
		}
		for _, q := range []string{
			`DELETE FROM sessions WHERE approver_id = ? AND account_id = ?`,
			`UPDATE approver_tokens SET revoked_at = ` + fmt.Sprint(nanos(at)) + ` WHERE approver_id = ? AND account_id = ? AND revoked_at = 0`,
		} {
			if _, err := tx.ExecContext(ctx, q, approverID, accountID); err != nil {
				return fmt.Errorf("remove membership: %w", err)
			}
		}
		revoked, err = revokeApproverGrants(ctx, tx, approverID, accountID, countersign.RevokedApproverRemoved, at)
		return err
	})
	return revoked, err
}

// RemoveApprover implements countersign.SessionStore.
func (db *DB) RemoveApprover(ctx context.Context, approverID string, at time.Time) ([]string, error) {
	var revoked []string
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		for _, q := range []string{
			`DELETE FROM sessions WHERE approver_id = ?`,
			`DELETE FROM webauthn_credentials WHERE approver_id = ?`,
			`DELETE FROM approver_tokens WHERE approver_id = ?`,
			`DELETE FROM memberships WHERE approver_id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, approverID); err != nil {
				return fmt.Errorf("remove approver: %w", err)
			}
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM approvers WHERE id = ?`, approverID)
		if err != nil {
			return fmt.Errorf("remove approver: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return countersign.NotFound("approver")
		}
		revoked, err = revokeApproverGrants(ctx, tx, approverID, "", countersign.RevokedApproverRemoved, at)
		return err
	})
	return revoked, err
}

// MembershipAccounts implements countersign.SessionStore.
func (db *DB) MembershipAccounts(ctx context.Context, approverID string) ([]*countersign.Account, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT a.id, a.name, a.created_at FROM accounts a
		JOIN memberships m ON m.account_id = a.id WHERE m.approver_id = ? ORDER BY a.name`, approverID)
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	defer rows.Close()
	out := []*countersign.Account{}
	for rows.Next() {
		a, err := scanAccount(rows)
		if err != nil {
			return nil, fmt.Errorf("list accounts: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ServerKey implements countersign.SessionStore. A key that exists is read
// from the read pool; INSERT OR IGNORE then SELECT makes two processes
// drawing at once agree on the first. On a store opened with the secret
// key, keys are stored wrapped with it and unwrapped here.
func (db *DB) ServerKey(ctx context.Context, name string, size int) ([]byte, error) {
	var key []byte
	err := db.read.QueryRowContext(ctx, `SELECT key FROM server_keys WHERE name = ?`, name).Scan(&key)
	if err == nil {
		return db.unwrapServerKey(name, key, size)
	} else if err != sql.ErrNoRows {
		return nil, fmt.Errorf("server key: %w", err)
	}
	// No cache holds server keys.
	err = db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		fresh := make([]byte, size)
		rand.Read(fresh)
		stored := fresh
		if db.key != nil {
			stored = db.key.WrapServerKey(name, fresh)
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO server_keys (name, key, created_at) VALUES (?, ?, ?)`,
			name, stored, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("server key: %w", err)
		}
		return tx.QueryRowContext(ctx, `SELECT key FROM server_keys WHERE name = ?`, name).Scan(&key)
	})
	if err != nil {
		return nil, err
	}
	return db.unwrapServerKey(name, key, size)
}

// unwrapServerKey opens a stored server key and checks its size.
func (db *DB) unwrapServerKey(name string, stored []byte, size int) ([]byte, error) {
	return countersign.OpenServerKey(db.key, name, stored, size)
}
