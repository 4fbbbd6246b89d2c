package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

const agentKeyColumns = `id, account_id, name, hash, hint, created_at, revoked_at, seed_secret`

// CreateAgentKey adds an agent key, giving it an id when k.ID is empty.
// Errors: ECONFLICT on a duplicate name within the account, ENOTFOUND when
// the account does not exist.
func (db *DB) CreateAgentKey(ctx context.Context, k *countersign.AgentKey) error {
	k.ID = orID(k.ID, "key_")
	return db.update(ctx, func(tx pgx.Tx) error {
		return insertAgentKey(ctx, tx, k)
	})
}

func insertAgentKey(ctx context.Context, q querier, k *countersign.AgentKey) error {
	_, err := q.Exec(ctx, `INSERT INTO agent_keys (`+agentKeyColumns+`, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		k.ID, k.AccountID, k.Name, k.Hash, k.Hint, nanos(k.CreatedAt), nanos(k.RevokedAt), orEmpty(k.SeedSecret), k.CreatedBy)
	if isUnique(err) {
		return countersign.ErrKeyNameTaken(k.Name)
	} else if isForeignKey(err) {
		return countersign.NotFound("account")
	} else if err != nil {
		return fmt.Errorf("create agent key: %w", badText(err))
	}
	return nil
}

// AgentKeyByHash returns a key, revoked or not, by the hash of its secret.
// Errors: ENOTFOUND.
func (db *DB) AgentKeyByHash(ctx context.Context, hash string) (*countersign.AgentKey, error) {
	if hasNUL(hash) {
		return nil, countersign.NotFound("agent key")
	}
	k, gen, ok := db.creds.agentKey(hash)
	if ok {
		return k, nil
	}
	err := db.read(ctx, func(q querier) (err error) {
		k, err = scanAgentKey(q.QueryRow(ctx, `SELECT `+agentKeyColumns+` FROM agent_keys WHERE hash = $1 LIMIT 1`, hash))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.NotFound("agent key")
	} else if err != nil {
		return nil, fmt.Errorf("read agent key: %w", err)
	}
	db.creds.putAgentKey(hash, k, gen)
	return k, nil
}

// AgentKeys lists an account's keys by name.
func (db *DB) AgentKeys(ctx context.Context, accountID string) ([]*countersign.AgentKey, error) {
	var out []*countersign.AgentKey
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, scanAgentKey, `SELECT `+agentKeyColumns+` FROM agent_keys WHERE account_id = $1 ORDER BY name`, accountID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list agent keys: %w", err)
	}
	return out, nil
}

// RevokeAgentKey revokes a key of the account by id or name; an id wins
// over a name. A grant's key revokes its grant with it. Errors: ENOTFOUND,
// ECONFLICT if already revoked.
func (db *DB) RevokeAgentKey(ctx context.Context, accountID, idOrName string, at time.Time) error {
	return db.update(ctx, func(tx pgx.Tx) error {
		return db.revokeAgentKey(ctx, tx, accountID, idOrName, at)
	})
}

func (db *DB) revokeAgentKey(ctx context.Context, tx pgx.Tx, accountID, idOrName string, at time.Time) error {
	var id string
	err := tx.QueryRow(ctx, `
		SELECT id FROM agent_keys
		WHERE account_id = $1 AND (id = $2 OR name = $2)
		ORDER BY (id = $2) DESC LIMIT 1`, accountID, idOrName).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return countersign.NotFound("agent key")
	} else if err != nil {
		return fmt.Errorf("read agent key: %w", err)
	}
	grantID, grantAccount, err := lockKeyGrant(ctx, tx, id)
	if err != nil {
		return err
	}
	// FOR UPDATE: of two revocations at once, the second sees the first's.
	var revoked int64
	if err := tx.QueryRow(ctx, `SELECT revoked_at FROM agent_keys WHERE id = $1 FOR UPDATE`, id).Scan(&revoked); err != nil {
		return fmt.Errorf("read agent key: %w", err)
	}
	if revoked != 0 {
		return countersign.ErrAlreadyRevoked("agent key")
	}
	if _, err := tx.Exec(ctx, `UPDATE agent_keys SET revoked_at = $1 WHERE id = $2`, nanos(at), id); err != nil {
		return fmt.Errorf("revoke agent key: %w", err)
	}
	return db.revokeKeyGrant(ctx, tx, grantID, grantAccount, at)
}

func scanAgentKey(s pgx.Row) (*countersign.AgentKey, error) {
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

// SeedKeys returns the unrevoked keys designated for the seed-compatible
// routes, with their sealed secrets.
func (db *DB) SeedKeys(ctx context.Context) ([]*countersign.AgentKey, error) {
	var out []*countersign.AgentKey
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, scanAgentKey, `SELECT `+agentKeyColumns+` FROM agent_keys
			WHERE octet_length(seed_secret) > 0 AND revoked_at = 0 ORDER BY created_at, id`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list seed keys: %w", err)
	}
	return out, nil
}

// CreateApproverToken adds an approver API token, giving it an id when
// t.ID is empty. Errors: ENOTFOUND when the approver or the account does not
// exist, ECONFLICT on a duplicate id.
func (db *DB) CreateApproverToken(ctx context.Context, t *countersign.ApproverToken) error {
	t.ID = orID(t.ID, "tok_")
	return db.update(ctx, func(tx pgx.Tx) error {
		return insertApproverToken(ctx, tx, t)
	})
}

func insertApproverToken(ctx context.Context, q querier, t *countersign.ApproverToken) error {
	_, err := q.Exec(ctx, `
		INSERT INTO approver_tokens (id, approver_id, account_id, name, hash, hint, created_at, revoked_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		t.ID, t.ApproverID, t.AccountID, t.Name, t.Hash, t.Hint, nanos(t.CreatedAt), nanos(t.RevokedAt))
	if isUnique(err) {
		return countersign.ErrExists("approver token")
	} else if isForeignKey(err) {
		return countersign.NotFound("approver or account")
	} else if err != nil {
		return fmt.Errorf("create approver token: %w", badText(err))
	}
	return nil
}

const approverTokenColumns = `t.id, t.approver_id, t.account_id, t.name, t.hash, t.hint, t.created_at, t.revoked_at`

func scanApproverToken(s pgx.Row, extra ...any) (*countersign.ApproverToken, error) {
	var t countersign.ApproverToken
	var created, revoked int64
	dest := append([]any{&t.ID, &t.ApproverID, &t.AccountID, &t.Name, &t.Hash, &t.Hint, &created, &revoked}, extra...)
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	t.CreatedAt, t.RevokedAt = fromNanos(created), fromNanos(revoked)
	return &t, nil
}

// ApproverTokenByHash returns a token, revoked or not, with its approver.
// A token of an approver who left its account is not found. Errors:
// ENOTFOUND.
func (db *DB) ApproverTokenByHash(ctx context.Context, hash string) (*countersign.ApproverToken, *countersign.Approver, error) {
	if hasNUL(hash) {
		return nil, nil, countersign.NotFound("approver token")
	}
	t, a, gen, ok := db.creds.approverToken(hash)
	if ok {
		return t, a, nil
	}
	t, a, err := db.approverTokenByHash(ctx, hash)
	if err != nil {
		return nil, nil, err
	}
	db.creds.putApproverToken(hash, t, a, gen)
	return t, a, nil
}

func (db *DB) approverTokenByHash(ctx context.Context, hash string) (*countersign.ApproverToken, *countersign.Approver, error) {
	var t *countersign.ApproverToken
	var a countersign.Approver
	var aCreated int64
	var role countersign.Role
	err := db.read(ctx, func(q querier) (err error) {
		t, err = scanApproverToken(q.QueryRow(ctx, `
			SELECT `+approverTokenColumns+`, a.id, a.username, a.password_hash, a.created_at, m.role
			FROM approver_tokens t JOIN approvers a ON a.id = t.approver_id
			JOIN memberships m ON m.approver_id = t.approver_id AND m.account_id = t.account_id
			WHERE t.hash = $1 LIMIT 1`, hash),
			&a.ID, &a.Username, &a.PasswordHash, &aCreated, &role)
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, countersign.NotFound("approver token")
	} else if err != nil {
		return nil, nil, fmt.Errorf("read approver token: %w", err)
	}
	a.CreatedAt = fromNanos(aCreated)
	t.Role = role
	return t, &a, nil
}

// ApproverTokens implements countersign.Store.
func (db *DB) ApproverTokens(ctx context.Context, approverID string) ([]*countersign.ApproverToken, error) {
	if hasNUL(approverID) {
		return []*countersign.ApproverToken{}, nil
	}
	var out []*countersign.ApproverToken
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, func(r pgx.Row) (*countersign.ApproverToken, error) { return scanApproverToken(r) },
			`SELECT `+approverTokenColumns+` FROM approver_tokens t WHERE t.approver_id = $1 ORDER BY t.created_at, t.id`, approverID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list approver tokens: %w", err)
	}
	return out, nil
}

// RevokeApproverToken implements countersign.Store: by id, or else by
// name, preferring an unrevoked token of that name. The row is locked, so
// of two revocations at once one succeeds and the other is told.
func (db *DB) RevokeApproverToken(ctx context.Context, approverID, idOrName string, at time.Time) error {
	if hasNUL(approverID, idOrName) {
		return countersign.NotFound("approver token")
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		var id string
		var revoked int64
		err := tx.QueryRow(ctx, `SELECT id, revoked_at FROM approver_tokens
			WHERE approver_id = $1 AND (id = $2 OR name = $2) ORDER BY (id = $2) DESC, (revoked_at = 0) DESC LIMIT 1
			FOR UPDATE`, approverID, idOrName).Scan(&id, &revoked)
		if errors.Is(err, pgx.ErrNoRows) {
			return countersign.NotFound("approver token")
		} else if err != nil {
			return fmt.Errorf("read approver token: %w", err)
		}
		if revoked != 0 {
			return countersign.ErrAlreadyRevoked("approver token")
		}
		if _, err := tx.Exec(ctx, `UPDATE approver_tokens SET revoked_at = $1 WHERE id = $2`, nanos(at), id); err != nil {
			return fmt.Errorf("revoke approver token: %w", err)
		}
		return nil
	})
}
