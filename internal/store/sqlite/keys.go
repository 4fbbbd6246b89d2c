package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

const agentKeyColumns = `id, account_id, name, hash, hint, created_at, revoked_at, seed_secret`

// CreateAgentKey adds an agent key, giving it an id when k.ID is empty.
// Errors: ECONFLICT on a duplicate name within the account, ENOTFOUND when
// the account does not exist.
func (db *DB) CreateAgentKey(ctx context.Context, k *countersign.AgentKey) error {
	k.ID = orID(k.ID, "key_")
	_, err := db.configExec(ctx, `INSERT INTO agent_keys (`+agentKeyColumns+`, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.AccountID, k.Name, k.Hash, k.Hint, nanos(k.CreatedAt), nanos(k.RevokedAt), orEmpty(k.SeedSecret), k.CreatedBy)
	if isUnique(err) {
		return countersign.ErrKeyNameTaken(k.Name)
	} else if isForeignKey(err) {
		return countersign.NotFound("account")
	} else if err != nil {
		return fmt.Errorf("create agent key: %w", err)
	}
	return nil
}

// AgentKeyByHash returns a key, revoked or not, by the hash of its secret.
// Errors: ENOTFOUND.
func (db *DB) AgentKeyByHash(ctx context.Context, hash string) (*countersign.AgentKey, error) {
	// The counter is read before the database, so that a change
	// committed in between leaves an entry that is never served.
	version, caching := db.eng.CacheVersion()
	now := time.Now()
	if caching {
		if k, ok := db.caches.keys.Get(hash, version, now); ok {
			k.SeedSecret = append([]byte(nil), k.SeedSecret...)
			return &k, nil
		}
	}
	k, err := scanAgentKey(db.read.QueryRowContext(ctx, `SELECT `+agentKeyColumns+` FROM agent_keys WHERE hash = ?`, hash))
	if err == sql.ErrNoRows {
		return nil, countersign.NotFound("agent key")
	} else if err != nil {
		return nil, fmt.Errorf("read agent key: %w", err)
	}
	if caching {
		c := *k
		c.SeedSecret = append([]byte(nil), k.SeedSecret...)
		db.caches.keys.Put(hash, c, version, now)
	}
	return k, nil
}

// AgentKeys lists an account's keys by name.
func (db *DB) AgentKeys(ctx context.Context, accountID string) ([]*countersign.AgentKey, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+agentKeyColumns+` FROM agent_keys WHERE account_id = ? ORDER BY name`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list agent keys: %w", err)
	}
	defer rows.Close()
	out := []*countersign.AgentKey{}
	for rows.Next() {
		k, err := scanAgentKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list agent keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agent keys: %w", err)
	}
	return out, nil
}

// RevokeAgentKey revokes a key of the account by id or name; an id wins
// over a name. A grant's key revokes its grant with it. Errors: ENOTFOUND,
// ECONFLICT if already revoked.
func (db *DB) RevokeAgentKey(ctx context.Context, accountID, idOrName string, at time.Time) error {
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		return revokeAgentKey(ctx, tx, accountID, idOrName, at)
	})
}

func revokeAgentKey(ctx context.Context, tx querier, accountID, idOrName string, at time.Time) error {
	var id string
	var revoked int64
	err := tx.QueryRowContext(ctx, `
		SELECT id, revoked_at FROM agent_keys
		WHERE account_id = ? AND (id = ? OR name = ?)
		ORDER BY id = ? DESC LIMIT 1`, accountID, idOrName, idOrName, idOrName).Scan(&id, &revoked)
	if err == sql.ErrNoRows {
		return countersign.NotFound("agent key")
	} else if err != nil {
		return fmt.Errorf("read agent key: %w", err)
	}
	if revoked != 0 {
		return countersign.ErrAlreadyRevoked("agent key")
	}
	if _, err := tx.ExecContext(ctx, `UPDATE agent_keys SET revoked_at = ? WHERE id = ?`, nanos(at), id); err != nil {
		return fmt.Errorf("revoke agent key: %w", err)
	}
	return revokeKeyGrant(ctx, tx, id, at)
}

func scanAgentKey(s scanner) (*countersign.AgentKey, error) {
	var k countersign.AgentKey
	var created, revoked int64
	var secret []byte
	if err := s.Scan(&k.ID, &k.AccountID, &k.Name, &k.Hash, &k.Hint, &created, &revoked, &secret); err != nil {
		return nil, err
	}
	k.CreatedAt, k.RevokedAt = fromNanos(created), fromNanos(revoked)
	if len(secret) > 0 {
		k.SeedSecret = secret
	}
	return &k, nil
}

// orEmpty stores a nil byte slice as an empty blob, not NULL.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// SeedKeys returns the unrevoked keys designated for the seed-compatible
// routes, with their sealed secrets.
func (db *DB) SeedKeys(ctx context.Context) ([]*countersign.AgentKey, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+agentKeyColumns+` FROM agent_keys
		WHERE length(seed_secret) > 0 AND revoked_at = 0 ORDER BY created_at`)
	if err != nil {
		return nil, fmt.Errorf("list seed keys: %w", err)
	}
	defer rows.Close()
	out := []*countersign.AgentKey{}
	for rows.Next() {
		k, err := scanAgentKey(rows)
		if err != nil {
			return nil, fmt.Errorf("list seed keys: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// CreateApproverToken adds an approver API token, giving it an id when
// t.ID is empty. Errors: ENOTFOUND when the approver or the account does not
// exist, ECONFLICT on a duplicate id.
func (db *DB) CreateApproverToken(ctx context.Context, t *countersign.ApproverToken) error {
	t.ID = orID(t.ID, "tok_")
	_, err := db.configExec(ctx, `
		INSERT INTO approver_tokens (id, approver_id, account_id, name, hash, hint, created_at, revoked_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.ApproverID, t.AccountID, t.Name, t.Hash, t.Hint, nanos(t.CreatedAt), nanos(t.RevokedAt))
	if isUnique(err) {
		return countersign.ErrExists("approver token")
	} else if isForeignKey(err) {
		return countersign.NotFound("approver or account")
	} else if err != nil {
		return fmt.Errorf("create approver token: %w", err)
	}
	return nil
}

// ApproverTokenByHash returns a token, revoked or not, with its approver.
// A token of an approver who left its account is not found. Errors:
// ENOTFOUND.
func (db *DB) ApproverTokenByHash(ctx context.Context, hash string) (*countersign.ApproverToken, *countersign.Approver, error) {
	version, caching := db.eng.CacheVersion() // before the database: see AgentKeyByHash
	now := time.Now()
	if caching {
		if e, ok := db.caches.tokens.Get(hash, version, now); ok {
			return &e.t, &e.a, nil
		}
	}
	t, a, err := db.approverTokenByHash(ctx, hash)
	if err == nil && caching {
		db.caches.tokens.Put(hash, tokenEntry{t: *t, a: *a}, version, now)
	}
	return t, a, err
}

func (db *DB) approverTokenByHash(ctx context.Context, hash string) (*countersign.ApproverToken, *countersign.Approver, error) {
	var t countersign.ApproverToken
	var a countersign.Approver
	var tCreated, tRevoked, aCreated int64
	err := db.read.QueryRowContext(ctx, `
		SELECT t.id, t.approver_id, t.account_id, t.name, t.hash, t.hint, t.created_at, t.revoked_at,
		       a.id, a.username, a.password_hash, a.created_at, m.role
		FROM approver_tokens t JOIN approvers a ON a.id = t.approver_id
		JOIN memberships m ON m.approver_id = t.approver_id AND m.account_id = t.account_id
		WHERE t.hash = ?`, hash).
		Scan(&t.ID, &t.ApproverID, &t.AccountID, &t.Name, &t.Hash, &t.Hint, &tCreated, &tRevoked,
			&a.ID, &a.Username, &a.PasswordHash, &aCreated, &t.Role)
	if err == sql.ErrNoRows {
		return nil, nil, countersign.NotFound("approver token")
	} else if err != nil {
		return nil, nil, fmt.Errorf("read approver token: %w", err)
	}
	t.CreatedAt, t.RevokedAt, a.CreatedAt = fromNanos(tCreated), fromNanos(tRevoked), fromNanos(aCreated)
	return &t, &a, nil
}

// ApproverTokens implements countersign.Store.
func (db *DB) ApproverTokens(ctx context.Context, approverID string) ([]*countersign.ApproverToken, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT id, approver_id, account_id, name, hash, hint, created_at, revoked_at
		FROM approver_tokens WHERE approver_id = ? ORDER BY created_at, id`, approverID)
	if err != nil {
		return nil, fmt.Errorf("list approver tokens: %w", err)
	}
	defer rows.Close()
	out := []*countersign.ApproverToken{}
	for rows.Next() {
		var t countersign.ApproverToken
		var created, revoked int64
		if err := rows.Scan(&t.ID, &t.ApproverID, &t.AccountID, &t.Name, &t.Hash, &t.Hint, &created, &revoked); err != nil {
			return nil, fmt.Errorf("list approver tokens: %w", err)
		}
		t.CreatedAt, t.RevokedAt = fromNanos(created), fromNanos(revoked)
		out = append(out, &t)
	}
	return out, rows.Err()
}

// RevokeApproverToken implements countersign.Store. One conditional update:
// of two revocations, one succeeds and the other is told.
func (db *DB) RevokeApproverToken(ctx context.Context, approverID, idOrName string, at time.Time) error {
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		var id string
		var revoked int64
		err := tx.QueryRowContext(ctx, `SELECT id, revoked_at FROM approver_tokens
			WHERE approver_id = ? AND (id = ? OR name = ?) ORDER BY id = ? DESC, revoked_at = 0 DESC LIMIT 1`,
			approverID, idOrName, idOrName, idOrName).Scan(&id, &revoked)
		if err == sql.ErrNoRows {
			return countersign.NotFound("approver token")
		} else if err != nil {
			return fmt.Errorf("read approver token: %w", err)
		}
		if revoked != 0 {
			return countersign.ErrAlreadyRevoked("approver token")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE approver_tokens SET revoked_at = ? WHERE id = ?`, nanos(at), id); err != nil {
			return fmt.Errorf("revoke approver token: %w", err)
		}
		return nil
	})
}
