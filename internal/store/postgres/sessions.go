package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// CreateSession implements countersign.SessionStore.
func (db *DB) CreateSession(ctx context.Context, s *countersign.Session) error {
	return db.update(ctx, func(tx pgx.Tx) error {
		return insertSession(ctx, tx, s)
	})
}

func insertSession(ctx context.Context, q querier, s *countersign.Session) error {
	_, err := q.Exec(ctx, `INSERT INTO sessions
		(hash, approver_id, account_id, created_at, expires_at, last_seen_at, user_agent, client, grant_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		s.Hash, s.ApproverID, s.AccountID, nanos(s.CreatedAt), nanos(s.ExpiresAt), nanos(s.LastSeenAt), s.UserAgent, s.Client, s.GrantID)
	if isForeignKey(err) {
		return countersign.NotFound("approver or account")
	} else if err != nil {
		return fmt.Errorf("create session: %w", badText(err))
	}
	return nil
}

const sessionColumns = `s.hash, s.approver_id, s.account_id, s.created_at, s.expires_at, s.last_seen_at, s.user_agent, s.client, s.grant_id`

func scanSession(s pgx.Row, extra ...any) (*countersign.Session, error) {
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
	if hasNUL(hash) {
		return nil, nil, countersign.NotFound("session")
	}
	var s *countersign.Session
	var a countersign.Approver
	var aCreated int64
	var role countersign.Role
	err := db.read(ctx, func(q querier) (err error) {
		s, err = scanSession(q.QueryRow(ctx, `
			SELECT `+sessionColumns+`, a.id, a.username, a.password_hash, a.created_at, m.role
			FROM sessions s
			JOIN approvers a ON a.id = s.approver_id
			JOIN memberships m ON m.approver_id = s.approver_id AND m.account_id = s.account_id
			WHERE s.hash = $1 AND s.expires_at > $2`, hash, nanos(now)),
			&a.ID, &a.Username, &a.PasswordHash, &aCreated, &role)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
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
	if hasNUL(hash) {
		return nil
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE sessions SET last_seen_at = $1 WHERE hash = $2`, nanos(now), hash); err != nil {
			return fmt.Errorf("touch session: %w", err)
		}
		return nil
	})
}

// Sessions implements countersign.SessionStore.
func (db *DB) Sessions(ctx context.Context, approverID string, now time.Time) ([]*countersign.Session, error) {
	if hasNUL(approverID) {
		return []*countersign.Session{}, nil
	}
	var out []*countersign.Session
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, func(r pgx.Row) (*countersign.Session, error) { return scanSession(r) },
			`SELECT `+sessionColumns+` FROM sessions s
			WHERE s.approver_id = $1 AND s.expires_at > $2 ORDER BY s.created_at DESC`, approverID, nanos(now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// SwitchSessionAccount implements countersign.SessionStore.
func (db *DB) SwitchSessionAccount(ctx context.Context, hash, accountID string) error {
	if hasNUL(hash, accountID) {
		return countersign.ErrNoSuchAccount()
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE sessions SET account_id = $1 WHERE hash = $2
			AND EXISTS (SELECT 1 FROM memberships m WHERE m.approver_id = sessions.approver_id AND m.account_id = $1)`,
			accountID, hash)
		if err != nil {
			return fmt.Errorf("switch session account: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return countersign.ErrNoSuchAccount()
		}
		return nil
	})
}

// DeleteSession implements countersign.SessionStore.
func (db *DB) DeleteSession(ctx context.Context, hash string) error {
	if hasNUL(hash) {
		return nil
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE hash = $1`, hash); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
		return nil
	})
}

// DeleteSessions implements countersign.SessionStore.
func (db *DB) DeleteSessions(ctx context.Context, approverID string) (int, error) {
	if hasNUL(approverID) {
		return 0, nil
	}
	var n int64
	err := db.update(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE approver_id = $1`, approverID)
		if err != nil {
			return fmt.Errorf("delete sessions: %w", err)
		}
		n = tag.RowsAffected()
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
// approver has a passkey. It locks the approver first, as RemovePasskey
// does: under READ COMMITTED the UPDATE's check would otherwise read the
// passkeys as they were when it began, before a removal it waited for;
// locked first, the UPDATE is a statement begun after that removal
// committed, and sees it.
func (db *DB) setPassword(ctx context.Context, approverID, passwordHash string, needPasskey, keepGrants bool, at time.Time) ([]string, error) {
	if hasNUL(approverID) {
		return nil, countersign.NotFound("approver")
	}
	var revoked []string
	err := db.update(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM approvers WHERE id = $1 FOR UPDATE`, approverID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return countersign.NotFound("approver")
		} else if err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		tag, err := tx.Exec(ctx, `UPDATE approvers SET password_hash = $1 WHERE id = $2
			AND (NOT $3 OR EXISTS (SELECT 1 FROM webauthn_credentials WHERE approver_id = $2))`, passwordHash, approverID, needPasskey)
		if err != nil {
			return fmt.Errorf("set password: %w", badText(err))
		}
		if tag.RowsAffected() != 1 {
			return countersign.ErrNoPasskeyToSignIn()
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE approver_id = $1`, approverID); err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		if keepGrants {
			return nil
		}
		revoked, err = db.revokeApproverGrants(ctx, tx, approverID, "", countersign.RevokedPasswordReset, at)
		return err
	})
	return revoked, err
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
	if hasNUL(approverID, accountID) {
		return nil, countersign.ErrNotMember()
	}
	var revoked []string
	err := db.update(ctx, func(tx pgx.Tx) error {
		if keepAdmin {
			if err := lockMembers(ctx, tx, accountID); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM memberships WHERE approver_id = $1 AND account_id = $2 AND ($3::boolean OR `+keepsAdmin+`)`,
			approverID, accountID, !keepAdmin)
		if err != nil {
			return fmt.Errorf("remove membership: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return notMemberOrLastAdmin(ctx, tx, approverID, accountID)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE approver_id = $1 AND account_id = $2`, approverID, accountID); err != nil {
			return fmt.Errorf("remove membership: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE approver_tokens SET revoked_at = $3
			WHERE approver_id = $1 AND account_id = $2 AND revoked_at = 0`, approverID, accountID, nanos(at)); err != nil {
			return fmt.Errorf("remove membership: %w", err)
		}
		revoked, err = db.revokeApproverGrants(ctx, tx, approverID, accountID, countersign.RevokedApproverRemoved, at)
		return err
	})
	return revoked, err
}

// RemoveApprover implements countersign.SessionStore. It locks the
// approver first, as RemovePasskey does, so that the two wait for each
// other instead of deadlocking.
func (db *DB) RemoveApprover(ctx context.Context, approverID string, at time.Time) ([]string, error) {
	if hasNUL(approverID) {
		return nil, countersign.NotFound("approver")
	}
	var revoked []string
	err := db.update(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM approvers WHERE id = $1 FOR UPDATE`, approverID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return countersign.NotFound("approver")
		} else if err != nil {
			return fmt.Errorf("remove approver: %w", err)
		}
		for _, q := range []string{
			`DELETE FROM sessions WHERE approver_id = $1`,
			`DELETE FROM webauthn_credentials WHERE approver_id = $1`,
			`DELETE FROM approver_tokens WHERE approver_id = $1`,
			`DELETE FROM memberships WHERE approver_id = $1`,
		} {
			if _, err := tx.Exec(ctx, q, approverID); err != nil {
				return fmt.Errorf("remove approver: %w", err)
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM approvers WHERE id = $1`, approverID)
		if err != nil {
			return fmt.Errorf("remove approver: %w", err)
		}
		if tag.RowsAffected() != 1 {
			return countersign.NotFound("approver")
		}
		revoked, err = db.revokeApproverGrants(ctx, tx, approverID, "", countersign.RevokedApproverRemoved, at)
		return err
	})
	return revoked, err
}

// MembershipAccounts implements countersign.SessionStore.
func (db *DB) MembershipAccounts(ctx context.Context, approverID string) ([]*countersign.Account, error) {
	if hasNUL(approverID) {
		return []*countersign.Account{}, nil
	}
	var out []*countersign.Account
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, scanAccount, `SELECT a.id, a.name, a.created_at FROM accounts a
			JOIN memberships m ON m.account_id = a.id WHERE m.approver_id = $1 ORDER BY a.name`, approverID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	return out, nil
}

// ServerKey implements countersign.SessionStore. INSERT … ON CONFLICT DO
// NOTHING then SELECT makes two replicas drawing at once agree on the
// first: the second's insert waits for the first's commit and then does
// nothing. On a store opened with the secret key, keys are stored wrapped
// with it and unwrapped here.
func (db *DB) ServerKey(ctx context.Context, name string, size int) ([]byte, error) {
	var key []byte
	err := db.update(ctx, func(tx pgx.Tx) error {
		fresh := make([]byte, size)
		rand.Read(fresh)
		stored := fresh
		if db.key != nil {
			stored = db.key.WrapServerKey(name, fresh)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO server_keys (name, key, created_at) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO NOTHING`, name, stored, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("server key: %w", badText(err))
		}
		return tx.QueryRow(ctx, `SELECT key FROM server_keys WHERE name = $1`, name).Scan(&key)
	})
	if err != nil {
		return nil, err
	}
	return db.unwrapServerKey(name, key, size)
}
