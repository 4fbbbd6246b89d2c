package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// Nothing here is cached: every replica reads grants and tokens from the
// database on each use, so a revoked grant stops working on all of them at
// once.

// CreateOAuthClient implements countersign.OAuthStore. The counts, the
// deletions and the insert take a transaction-scoped advisory lock, so
// that two registrations at once cannot both pass a limit.
func (db *DB) CreateOAuthClient(ctx context.Context, c *countersign.OAuthClient, lim countersign.ClientLimits) error {
	if hasNUL(c.ID, c.Name, c.AuthMethod, c.RegisteredFrom, c.RegisteredNet, strings.Join(c.RedirectURIs, "")) {
		return countersign.Errorf(countersign.EINVALID, "text must not contain NUL characters")
	}
	args, err := oauthClientArgs(c)
	if err != nil {
		return fmt.Errorf("create oauth client: %w", err)
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7007)`); err != nil {
			return fmt.Errorf("lock oauth clients: %w", err)
		}
		if !lim.StaleBefore.IsZero() {
			if _, err := tx.Exec(ctx, `DELETE FROM oauth_clients WHERE last_used_at = 0 AND created_at < $1`, nanos(lim.StaleBefore)); err != nil {
				return fmt.Errorf("expire oauth clients: %w", err)
			}
		}
		if err := clientLimit(ctx, tx, `SELECT COUNT(*) FROM oauth_clients WHERE registered_from = $1 AND last_used_at = 0`, lim.PerAddress,
			countersign.ErrClientsFromAddress(), c.RegisteredFrom); err != nil {
			return err
		}
		if c.RegisteredNet != "" {
			if err := clientLimit(ctx, tx, `SELECT COUNT(*) FROM oauth_clients WHERE registered_net = $1 AND last_used_at = 0`, lim.PerNetwork,
				countersign.ErrClientsFromNetwork(), c.RegisteredNet); err != nil {
				return err
			}
		}
		if err := makeRoom(ctx, tx, lim.Max); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO oauth_clients (`+oauthClientColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, args...)
		if isUnique(err) {
			return countersign.ErrExists("client")
		} else if err != nil {
			return fmt.Errorf("create oauth client: %w", badText(err))
		}
		return nil
	})
}

// makeRoom deletes the oldest never-used clients when the server holds max
// clients already, so that a flood of registrations cannot keep a new
// client out; only when every client has been used is the server full.
func makeRoom(ctx context.Context, tx pgx.Tx, max int) error {
	if max <= 0 {
		return nil
	}
	var n int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM oauth_clients`).Scan(&n); err != nil {
		return fmt.Errorf("count oauth clients: %w", err)
	}
	if n < max {
		return nil
	}
	tag, err := tx.Exec(ctx, `DELETE FROM oauth_clients WHERE id IN
		(SELECT id FROM oauth_clients WHERE last_used_at = 0 ORDER BY created_at, id LIMIT $1)`, n-max+1)
	if err != nil {
		return fmt.Errorf("make room for an oauth client: %w", err)
	}
	if n-int(tag.RowsAffected()) >= max {
		return countersign.ErrClientsFull()
	}
	return nil
}

func clientLimit(ctx context.Context, tx pgx.Tx, query string, limit int, refusal error, args ...any) error {
	if limit <= 0 {
		return nil
	}
	var n int
	if err := tx.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		return fmt.Errorf("count oauth clients: %w", err)
	}
	if n >= limit {
		return refusal
	}
	return nil
}

// oauthClientArgs are the values of an oauth_clients row, in the order of
// oauthClientColumns.
func oauthClientArgs(c *countersign.OAuthClient) ([]any, error) {
	uris, err := json.Marshal(c.RedirectURIs)
	if err != nil {
		return nil, err
	}
	return []any{c.ID, c.SecretHash, c.Name, string(uris), c.AuthMethod, c.RegisteredFrom, nanos(c.CreatedAt), nanos(c.LastUsedAt), c.RegisteredNet}, nil
}

const oauthClientColumns = `id, secret_hash, name, redirect_uris, auth_method, registered_from, created_at, last_used_at, registered_net`

func scanOAuthClient(s pgx.Row) (*countersign.OAuthClient, error) {
	var c countersign.OAuthClient
	var uris string
	var created, used int64
	if err := s.Scan(&c.ID, &c.SecretHash, &c.Name, &uris, &c.AuthMethod, &c.RegisteredFrom, &created, &used, &c.RegisteredNet); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(uris), &c.RedirectURIs); err != nil {
		return nil, fmt.Errorf("redirect uris: %w", err)
	}
	c.CreatedAt, c.LastUsedAt = fromNanos(created), fromNanos(used)
	return &c, nil
}

// OAuthClient implements countersign.OAuthStore.
func (db *DB) OAuthClient(ctx context.Context, id string) (*countersign.OAuthClient, error) {
	if hasNUL(id) {
		return nil, countersign.NotFound("client")
	}
	var c *countersign.OAuthClient
	err := db.read(ctx, func(q querier) (err error) {
		c, err = scanOAuthClient(q.QueryRow(ctx, `SELECT `+oauthClientColumns+` FROM oauth_clients WHERE id = $1`, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.NotFound("client")
	} else if err != nil {
		return nil, fmt.Errorf("read oauth client: %w", err)
	}
	return c, nil
}

// CreateGrant implements countersign.OAuthStore.
func (db *DB) CreateGrant(ctx context.Context, g *countersign.Grant, key *countersign.AgentKey, sess *countersign.Session, code *countersign.OAuthToken) error {
	if hasNUL(g.ClientID, g.ClientName, key.Name) {
		return countersign.Errorf(countersign.EINVALID, "text must not contain NUL characters")
	}
	key.ID = orID(key.ID, "key_")
	g.ID = orID(g.ID, "grt_")
	g.KeyID, g.KeyName = key.ID, key.Name
	return db.update(ctx, func(tx pgx.Tx) error {
		if err := grantMember(ctx, tx, g.ApproverID, g.AccountID); err != nil {
			return err
		}
		// An allowed client is used: it no longer expires, nor makes
		// room. One deleted since its consent page was shown gets no
		// grant; the row locked here cannot be deleted until the grant
		// is committed, and is then used.
		tag, err := tx.Exec(ctx, `UPDATE oauth_clients SET last_used_at = $1 WHERE id = $2`, nanos(g.CreatedAt), g.ClientID)
		if err != nil {
			return fmt.Errorf("mark oauth client used: %w", badText(err))
		} else if tag.RowsAffected() != 1 {
			return countersign.ErrClientGone
		}
		if err := insertAgentKey(ctx, tx, key); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO grants (`+grantColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, grantArgs(g)...); err != nil {
			return fmt.Errorf("create grant: %w", badText(err))
		}
		if sess != nil {
			sess.GrantID = g.ID
			if err := insertSession(ctx, tx, sess); err != nil {
				return err
			}
		}
		if code != nil {
			code.GrantID = g.ID
			if err := insertOAuthToken(ctx, tx, code); err != nil {
				return err
			}
		}
		return nil
	})
}

const grantColumns = `id, account_id, key_id, client_id, client_name, approver_id, approver_name, tiers, created_at, last_used_at, revoked_at`

func grantArgs(g *countersign.Grant) []any {
	return []any{g.ID, g.AccountID, g.KeyID, g.ClientID, g.ClientName, g.ApproverID, g.ApproverName,
		strings.Join(g.Tiers, ","), nanos(g.CreatedAt), nanos(g.LastUsedAt), nanos(g.RevokedAt)}
}

// grantSelect reads a grant with its key's name; a grant whose key was
// revoked reads as revoked.
const grantSelect = `SELECT g.id, g.account_id, g.key_id, k.name, g.client_id, g.client_name, g.approver_id, g.approver_name,
	g.tiers, g.created_at, g.last_used_at, CASE WHEN g.revoked_at <> 0 THEN g.revoked_at ELSE k.revoked_at END
	FROM grants g JOIN agent_keys k ON k.id = g.key_id`

func scanGrant(s pgx.Row) (*countersign.Grant, error) {
	var g countersign.Grant
	var tiers string
	var created, used, revoked int64
	if err := s.Scan(&g.ID, &g.AccountID, &g.KeyID, &g.KeyName, &g.ClientID, &g.ClientName, &g.ApproverID, &g.ApproverName,
		&tiers, &created, &used, &revoked); err != nil {
		return nil, err
	}
	return finishGrant(&g, tiers, created, used, revoked), nil
}

// scanGrantRow reads a grants row as stored (grantColumns), for the copy.
func scanGrantRow(s pgx.Row) (*countersign.Grant, error) {
	var g countersign.Grant
	var tiers string
	var created, used, revoked int64
	if err := s.Scan(&g.ID, &g.AccountID, &g.KeyID, &g.ClientID, &g.ClientName, &g.ApproverID, &g.ApproverName,
		&tiers, &created, &used, &revoked); err != nil {
		return nil, err
	}
	return finishGrant(&g, tiers, created, used, revoked), nil
}

func finishGrant(g *countersign.Grant, tiers string, created, used, revoked int64) *countersign.Grant {
	if tiers != "" {
		g.Tiers = strings.Split(tiers, ",")
	}
	g.CreatedAt, g.LastUsedAt, g.RevokedAt = fromNanos(created), fromNanos(used), fromNanos(revoked)
	return g
}

// Grant implements countersign.OAuthStore.
func (db *DB) Grant(ctx context.Context, id string) (*countersign.Grant, error) {
	if hasNUL(id) {
		return nil, countersign.NotFound("grant")
	}
	var g *countersign.Grant
	err := db.read(ctx, func(q querier) (err error) {
		g, err = scanGrant(q.QueryRow(ctx, grantSelect+` WHERE g.id = $1`, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.NotFound("grant")
	} else if err != nil {
		return nil, fmt.Errorf("read grant: %w", err)
	}
	return g, nil
}

// Grants implements countersign.OAuthStore.
func (db *DB) Grants(ctx context.Context, accountID string) ([]*countersign.Grant, error) {
	var out []*countersign.Grant
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, scanGrant, grantSelect+` WHERE $1 = '' OR g.account_id = $1 ORDER BY g.created_at DESC, g.id`, accountID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	return out, nil
}

// RevokeGrant implements countersign.OAuthStore.
func (db *DB) RevokeGrant(ctx context.Context, accountID, id string, at time.Time) error {
	if hasNUL(accountID, id) {
		return countersign.NotFound("grant")
	}
	return db.update(ctx, func(tx pgx.Tx) error { return revokeGrant(ctx, tx, accountID, id, at) })
}

// revokeGrant revokes a grant of the account (any when accountID is
// empty) with its key, tokens and consent sessions, in tx.
func revokeGrant(ctx context.Context, tx pgx.Tx, accountID, id string, at time.Time) error {
	var keyID string
	var revoked int64
	err := tx.QueryRow(ctx, `SELECT key_id, revoked_at FROM grants WHERE id = $1 AND ($2 = '' OR account_id = $2) FOR UPDATE`,
		id, accountID).Scan(&keyID, &revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return countersign.NotFound("grant")
	} else if err != nil {
		return fmt.Errorf("read grant: %w", err)
	}
	if revoked != 0 {
		return countersign.ErrAlreadyRevoked("the grant")
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE grants SET revoked_at = $1 WHERE id = $2`, []any{nanos(at), id}},
		{`UPDATE agent_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at = 0`, []any{nanos(at), keyID}},
		{`DELETE FROM oauth_tokens WHERE grant_id = $1`, []any{id}},
		{`DELETE FROM sessions WHERE grant_id = $1`, []any{id}},
	} {
		if _, err := tx.Exec(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("revoke grant: %w", err)
		}
	}
	return nil
}

// TouchGrant implements countersign.OAuthStore.
func (db *DB) TouchGrant(ctx context.Context, id string, now time.Time) error {
	return db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE grants SET last_used_at = $1 WHERE id = $2`, nanos(now), id); err != nil {
			return fmt.Errorf("touch grant: %w", err)
		}
		return nil
	})
}

const oauthTokenColumns = `hash, kind, grant_id, client_id, resource, redirect_uri, challenge, created_at, expires_at, used_at`

func insertOAuthToken(ctx context.Context, q querier, t *countersign.OAuthToken) error {
	_, err := q.Exec(ctx, `INSERT INTO oauth_tokens (`+oauthTokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		t.Hash, t.Kind, t.GrantID, t.ClientID, t.Resource, t.RedirectURI, t.Challenge, nanos(t.CreatedAt), nanos(t.ExpiresAt), nanos(t.UsedAt))
	if err != nil {
		return fmt.Errorf("create oauth token: %w", badText(err))
	}
	return nil
}

func scanOAuthToken(s pgx.Row) (*countersign.OAuthToken, error) {
	var t countersign.OAuthToken
	var created, expires, used int64
	if err := s.Scan(&t.Hash, &t.Kind, &t.GrantID, &t.ClientID, &t.Resource, &t.RedirectURI, &t.Challenge, &created, &expires, &used); err != nil {
		return nil, err
	}
	t.CreatedAt, t.ExpiresAt, t.UsedAt = fromNanos(created), fromNanos(expires), fromNanos(used)
	return &t, nil
}

// RedeemOAuthToken implements countersign.OAuthStore. The row is locked
// (FOR UPDATE), so that of two replicas redeeming one token exactly one
// sees it unused.
func (db *DB) RedeemOAuthToken(ctx context.Context, hash, kind string, now time.Time, check func(*countersign.OAuthToken) error, issue []*countersign.OAuthToken) (*countersign.OAuthToken, *countersign.Grant, error) {
	if hasNUL(hash, kind) {
		return nil, nil, countersign.ErrUnknownToken()
	}
	var tok *countersign.OAuthToken
	var g *countersign.Grant
	err := db.update(ctx, func(tx pgx.Tx) error {
		var err error
		tok, err = scanOAuthToken(tx.QueryRow(ctx, `SELECT `+oauthTokenColumns+` FROM oauth_tokens WHERE hash = $1 AND kind = $2 FOR UPDATE`, hash, kind))
		if errors.Is(err, pgx.ErrNoRows) {
			return countersign.ErrUnknownToken()
		} else if err != nil {
			return fmt.Errorf("read oauth token: %w", err)
		}
		g, err = scanGrant(tx.QueryRow(ctx, grantSelect+` WHERE g.id = $1`, tok.GrantID))
		if err != nil {
			return fmt.Errorf("read grant: %w", err)
		}
		// The check comes first: a token presented by another client (or
		// with another redirect URI or verifier) is refused as what it is,
		// never reported as used, so that its replay revokes nothing.
		if check != nil {
			if err := check(tok); err != nil {
				return err
			}
		}
		if err := tok.Redeemable(g, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_tokens SET used_at = $1 WHERE hash = $2`, nanos(now), hash); err != nil {
			return fmt.Errorf("use oauth token: %w", err)
		}
		// A grant's expired tokens go as it is used, so that a grant
		// refreshed for months keeps only what can still be presented.
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_tokens WHERE grant_id = $1 AND expires_at <= $2`, tok.GrantID, nanos(now)); err != nil {
			return fmt.Errorf("prune oauth tokens: %w", err)
		}
		for _, t := range issue {
			t.GrantID = tok.GrantID
			if err := insertOAuthToken(ctx, tx, t); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE oauth_clients SET last_used_at = $1 WHERE id = $2`, nanos(now), tok.ClientID); err != nil {
			return fmt.Errorf("mark oauth client used: %w", err)
		}
		return nil
	})
	if countersign.ErrorCode(err) == countersign.ECONFLICT {
		return tok, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	return tok, g, nil
}

// AccessToken implements countersign.OAuthStore, in one query.
func (db *DB) AccessToken(ctx context.Context, hash string, now time.Time) (*countersign.OAuthToken, *countersign.Grant, error) {
	if hasNUL(hash) {
		return nil, nil, countersign.NotFound("access token")
	}
	var t *countersign.OAuthToken
	var g *countersign.Grant
	err := db.read(ctx, func(q querier) error {
		row := q.QueryRow(ctx, `SELECT t.hash, t.kind, t.grant_id, t.client_id, t.resource, t.redirect_uri, t.challenge, t.created_at, t.expires_at, t.used_at,
			g.id, g.account_id, g.key_id, k.name, g.client_id, g.client_name, g.approver_id, g.approver_name,
			g.tiers, g.created_at, g.last_used_at, CASE WHEN g.revoked_at <> 0 THEN g.revoked_at ELSE k.revoked_at END
			FROM oauth_tokens t JOIN grants g ON g.id = t.grant_id JOIN agent_keys k ON k.id = g.key_id
			WHERE t.hash = $1 AND t.kind = $2`, hash, countersign.TokenAccess)
		var tok countersign.OAuthToken
		var gr countersign.Grant
		var tc, te, tu, gc, gu, gr2 int64
		var tiers string
		if err := row.Scan(&tok.Hash, &tok.Kind, &tok.GrantID, &tok.ClientID, &tok.Resource, &tok.RedirectURI, &tok.Challenge, &tc, &te, &tu,
			&gr.ID, &gr.AccountID, &gr.KeyID, &gr.KeyName, &gr.ClientID, &gr.ClientName, &gr.ApproverID, &gr.ApproverName,
			&tiers, &gc, &gu, &gr2); err != nil {
			return err
		}
		tok.CreatedAt, tok.ExpiresAt, tok.UsedAt = fromNanos(tc), fromNanos(te), fromNanos(tu)
		t, g = &tok, finishGrant(&gr, tiers, gc, gu, gr2)
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, countersign.NotFound("access token")
	} else if err != nil {
		return nil, nil, fmt.Errorf("read access token: %w", err)
	}
	if !t.Presentable(g, now) {
		return nil, nil, countersign.NotFound("access token")
	}
	return t, g, nil
}

// DeleteOAuthToken implements countersign.OAuthStore.
func (db *DB) DeleteOAuthToken(ctx context.Context, hash, clientID string, at time.Time) (string, error) {
	if hasNUL(hash, clientID) {
		return "", nil
	}
	var revoked string
	err := db.update(ctx, func(tx pgx.Tx) error {
		revoked = ""
		var kind, grant string
		err := tx.QueryRow(ctx, `SELECT kind, grant_id FROM oauth_tokens WHERE hash = $1 AND client_id = $2`, hash, clientID).Scan(&kind, &grant)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read oauth token: %w", err)
		}
		if kind == countersign.TokenRefresh {
			revoked = grant
			return revokeGrant(ctx, tx, "", grant, at)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM oauth_tokens WHERE hash = $1`, hash); err != nil {
			return fmt.Errorf("delete oauth token: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return revoked, nil
}
