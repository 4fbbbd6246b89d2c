package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/countersign/countersign"
)

// CreateOAuthClient implements countersign.OAuthStore. It changes nothing a
// cache holds.
func (db *DB) CreateOAuthClient(ctx context.Context, c *countersign.OAuthClient, lim countersign.ClientLimits) error {
	args, err := oauthClientArgs(c)
	if err != nil {
		return fmt.Errorf("create oauth client: %w", err)
	}
	return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		if !lim.StaleBefore.IsZero() {
			if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_clients WHERE last_used_at = 0 AND created_at < ?`, nanos(lim.StaleBefore)); err != nil {
				return fmt.Errorf("expire oauth clients: %w", err)
			}
		}
		if err := clientLimit(ctx, tx, `SELECT COUNT(*) FROM oauth_clients WHERE registered_from = ? AND last_used_at = 0`, lim.PerAddress,
			countersign.ErrClientsFromAddress(), c.RegisteredFrom); err != nil {
			return err
		}
		if c.RegisteredNet != "" {
			if err := clientLimit(ctx, tx, `SELECT COUNT(*) FROM oauth_clients WHERE registered_net = ? AND last_used_at = 0`, lim.PerNetwork,
				countersign.ErrClientsFromNetwork(), c.RegisteredNet); err != nil {
				return err
			}
		}
		if err := makeRoom(ctx, tx, lim.Max); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO oauth_clients (`+oauthClientColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
		if isUnique(err) {
			return countersign.ErrExists("client")
		} else if err != nil {
			return fmt.Errorf("create oauth client: %w", err)
		}
		return nil
	})
}

// makeRoom deletes the oldest never-used clients when the server holds max
// clients already, so that a flood of registrations cannot keep a new
// client out; only when every client has been used is the server full.
func makeRoom(ctx context.Context, tx querier, max int) error {
	if max <= 0 {
		return nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM oauth_clients`).Scan(&n); err != nil {
		return fmt.Errorf("count oauth clients: %w", err)
	}
	if n < max {
		return nil
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM oauth_clients WHERE id IN
		(SELECT id FROM oauth_clients WHERE last_used_at = 0 ORDER BY created_at, id LIMIT ?)`, n-max+1)
	if err != nil {
		return fmt.Errorf("make room for an oauth client: %w", err)
	}
	if gone, _ := res.RowsAffected(); n-int(gone) >= max {
		return countersign.ErrClientsFull()
	}
	return nil
}

func clientLimit(ctx context.Context, tx querier, query string, limit int, refusal error, args ...any) error {
	if limit <= 0 {
		return nil
	}
	var n int
	if err := tx.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
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

func scanOAuthClient(s scanner) (*countersign.OAuthClient, error) {
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
	c, err := scanOAuthClient(db.read.QueryRowContext(ctx, `SELECT `+oauthClientColumns+` FROM oauth_clients WHERE id = ?`, id))
	if err == sql.ErrNoRows {
		return nil, countersign.NotFound("client")
	} else if err != nil {
		return nil, fmt.Errorf("read oauth client: %w", err)
	}
	return c, nil
}

// CreateGrant implements countersign.OAuthStore. A new key moves no cache,
// but it is configuration: it goes through updateCached like every key.
func (db *DB) CreateGrant(ctx context.Context, g *countersign.Grant, key *countersign.AgentKey, sess *countersign.Session, code *countersign.OAuthToken) error {
	key.ID = orID(key.ID, "key_")
	g.ID = orID(g.ID, "grt_")
	g.KeyID, g.KeyName = key.ID, key.Name
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		if err := grantMember(ctx, tx, g.ApproverID, g.AccountID); err != nil {
			return err
		}
		// An allowed client is used: it no longer expires, nor makes
		// room. One deleted since its consent page was shown gets no
		// grant.
		res, err := tx.ExecContext(ctx, `UPDATE oauth_clients SET last_used_at = ? WHERE id = ?`, nanos(g.CreatedAt), g.ClientID)
		if err != nil {
			return fmt.Errorf("mark oauth client used: %w", err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			return countersign.ErrClientGone
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO agent_keys (`+agentKeyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			key.ID, key.AccountID, key.Name, key.Hash, key.Hint, nanos(key.CreatedAt), 0, []byte{})
		if isForeignKey(err) {
			return countersign.NotFound("account")
		} else if isUnique(err) {
			return countersign.ErrKeyNameTaken(key.Name)
		} else if err != nil {
			return fmt.Errorf("create grant key: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO grants (`+grantColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, grantArgs(g)...); err != nil {
			return fmt.Errorf("create grant: %w", err)
		}
		if sess != nil {
			sess.GrantID = g.ID
			_, err := tx.ExecContext(ctx, `INSERT INTO sessions
				(hash, approver_id, account_id, created_at, expires_at, last_seen_at, user_agent, client, grant_id)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				sess.Hash, sess.ApproverID, sess.AccountID, nanos(sess.CreatedAt), nanos(sess.ExpiresAt), nanos(sess.LastSeenAt), sess.UserAgent, sess.Client, sess.GrantID)
			if isForeignKey(err) {
				return countersign.NotFound("approver or account")
			} else if err != nil {
				return fmt.Errorf("create grant session: %w", err)
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

func scanGrant(s scanner, extra ...any) (*countersign.Grant, error) {
	var g countersign.Grant
	var tiers string
	var created, used, revoked int64
	dest := append([]any{&g.ID, &g.AccountID, &g.KeyID, &g.KeyName, &g.ClientID, &g.ClientName, &g.ApproverID, &g.ApproverName,
		&tiers, &created, &used, &revoked}, extra...)
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	if tiers != "" {
		g.Tiers = strings.Split(tiers, ",")
	}
	g.CreatedAt, g.LastUsedAt, g.RevokedAt = fromNanos(created), fromNanos(used), fromNanos(revoked)
	return &g, nil
}

// Grant implements countersign.OAuthStore.
func (db *DB) Grant(ctx context.Context, id string) (*countersign.Grant, error) {
	g, err := scanGrant(db.read.QueryRowContext(ctx, grantSelect+` WHERE g.id = ?`, id))
	if err == sql.ErrNoRows {
		return nil, countersign.NotFound("grant")
	} else if err != nil {
		return nil, fmt.Errorf("read grant: %w", err)
	}
	return g, nil
}

// Grants implements countersign.OAuthStore.
func (db *DB) Grants(ctx context.Context, accountID string) ([]*countersign.Grant, error) {
	rows, err := db.read.QueryContext(ctx, grantSelect+` WHERE ? = '' OR g.account_id = ? ORDER BY g.created_at DESC, g.id`, accountID, accountID)
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	defer rows.Close()
	out := []*countersign.Grant{}
	for rows.Next() {
		g, err := scanGrant(rows)
		if err != nil {
			return nil, fmt.Errorf("list grants: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// RevokeGrant implements countersign.OAuthStore. It goes through updateCached,
// which moves the change counter: once it returned, no server on the file
// lets a cached access token of the grant in.
func (db *DB) RevokeGrant(ctx context.Context, accountID, id string, at time.Time) error {
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		return revokeGrant(ctx, tx, accountID, id, at)
	})
}

// revokeGrant revokes a grant of the account (any when accountID is
// empty) with its key, tokens and consent sessions, in tx.
func revokeGrant(ctx context.Context, tx querier, accountID, id string, at time.Time) error {
	var keyID string
	var revoked int64
	err := tx.QueryRowContext(ctx, `SELECT key_id, revoked_at FROM grants WHERE id = ? AND (? = '' OR account_id = ?)`,
		id, accountID, accountID).Scan(&keyID, &revoked)
	if err == sql.ErrNoRows {
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
		{`UPDATE grants SET revoked_at = ? WHERE id = ?`, []any{nanos(at), id}},
		{`UPDATE agent_keys SET revoked_at = ? WHERE id = ? AND revoked_at = 0`, []any{nanos(at), keyID}},
		{`DELETE FROM oauth_tokens WHERE grant_id = ?`, []any{id}},
		{`DELETE FROM sessions WHERE grant_id = ?`, []any{id}},
	} {
		if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("revoke grant: %w", err)
		}
	}
	return nil
}

// TouchGrant implements countersign.OAuthStore.
func (db *DB) TouchGrant(ctx context.Context, id string, now time.Time) error {
	return db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		if _, err := tx.ExecContext(ctx, `UPDATE grants SET last_used_at = ? WHERE id = ?`, nanos(now), id); err != nil {
			return fmt.Errorf("touch grant: %w", err)
		}
		return nil
	})
}

const oauthTokenColumns = `hash, kind, grant_id, client_id, resource, redirect_uri, challenge, created_at, expires_at, used_at`

func insertOAuthToken(ctx context.Context, tx querier, t *countersign.OAuthToken) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO oauth_tokens (`+oauthTokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.Hash, t.Kind, t.GrantID, t.ClientID, t.Resource, t.RedirectURI, t.Challenge, nanos(t.CreatedAt), nanos(t.ExpiresAt), nanos(t.UsedAt))
	if err != nil {
		return fmt.Errorf("create oauth token: %w", err)
	}
	return nil
}

func scanOAuthToken(s scanner, extra ...any) (*countersign.OAuthToken, error) {
	var t countersign.OAuthToken
	var created, expires, used int64
	dest := append([]any{&t.Hash, &t.Kind, &t.GrantID, &t.ClientID, &t.Resource, &t.RedirectURI, &t.Challenge, &created, &expires, &used}, extra...)
	if err := s.Scan(dest...); err != nil {
		return nil, err
	}
	t.CreatedAt, t.ExpiresAt, t.UsedAt = fromNanos(created), fromNanos(expires), fromNanos(used)
	return &t, nil
}

// RedeemOAuthToken implements countersign.OAuthStore. Using a token changes
// nothing a cache holds; the conditional UPDATE lets one caller of many win.
func (db *DB) RedeemOAuthToken(ctx context.Context, hash, kind string, now time.Time, check func(*countersign.OAuthToken) error, issue []*countersign.OAuthToken) (*countersign.OAuthToken, *countersign.Grant, error) {
	var tok *countersign.OAuthToken
	var g *countersign.Grant
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		var err error
		tok, err = scanOAuthToken(tx.QueryRowContext(ctx, `SELECT `+oauthTokenColumns+` FROM oauth_tokens WHERE hash = ? AND kind = ?`, hash, kind))
		if err == sql.ErrNoRows {
			return countersign.ErrUnknownToken()
		} else if err != nil {
			return fmt.Errorf("read oauth token: %w", err)
		}
		g, err = scanGrant(tx.QueryRowContext(ctx, grantSelect+` WHERE g.id = ?`, tok.GrantID))
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
		res, err := tx.ExecContext(ctx, `UPDATE oauth_tokens SET used_at = ? WHERE hash = ? AND used_at = 0`, nanos(now), hash)
		if err != nil {
			return fmt.Errorf("use oauth token: %w", err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return countersign.ErrTokenUsed()
		}
		// A grant's expired tokens go as it is used, so that a grant
		// refreshed for months keeps only what can still be presented.
		if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_tokens WHERE grant_id = ? AND expires_at <= ?`, tok.GrantID, nanos(now)); err != nil {
			return fmt.Errorf("prune oauth tokens: %w", err)
		}
		for _, t := range issue {
			t.GrantID = tok.GrantID
			if err := insertOAuthToken(ctx, tx, t); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE oauth_clients SET last_used_at = ? WHERE id = ?`, nanos(now), tok.ClientID); err != nil {
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

// accessEntry is an access token with its grant, as cached.
type accessEntry struct {
	t countersign.OAuthToken
	g countersign.Grant
}

// AccessToken implements countersign.OAuthStore. Like agent keys, access
// tokens are cached between changes: revoking a grant moves the change
// counter, and a cached token still expires on time.
func (db *DB) AccessToken(ctx context.Context, hash string, now time.Time) (*countersign.OAuthToken, *countersign.Grant, error) {
	version, caching := db.eng.CacheVersion() // before the database: see AgentKeyByHash
	wall := time.Now()
	var e accessEntry
	ok := false
	if caching {
		e, ok = db.caches.access.Get(hash, version, wall)
	}
	if !ok {
		var g *countersign.Grant
		t, err := scanOAuthToken(db.read.QueryRowContext(ctx, `SELECT `+oauthTokenColumns+` FROM oauth_tokens WHERE hash = ? AND kind = ?`, hash, countersign.TokenAccess))
		if err == nil {
			g, err = scanGrant(db.read.QueryRowContext(ctx, grantSelect+` WHERE g.id = ?`, t.GrantID))
		}
		if err == sql.ErrNoRows {
			return nil, nil, countersign.NotFound("access token")
		} else if err != nil {
			return nil, nil, fmt.Errorf("read access token: %w", err)
		}
		e = accessEntry{t: *t, g: *g}
		if caching {
			db.caches.access.Put(hash, e, version, wall)
		}
	}
	if !e.t.Presentable(&e.g, now) {
		return nil, nil, countersign.NotFound("access token")
	}
	t, g := e.t, e.g
	g.Tiers = append([]string(nil), e.g.Tiers...)
	return &t, &g, nil
}

// DeleteOAuthToken implements countersign.OAuthStore. Through updateCached: an
// access token may be cached.
func (db *DB) DeleteOAuthToken(ctx context.Context, hash, clientID string, at time.Time) (string, error) {
	var revoked string
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		revoked = ""
		var kind, grant string
		err := tx.QueryRowContext(ctx, `SELECT kind, grant_id FROM oauth_tokens WHERE hash = ? AND client_id = ?`, hash, clientID).Scan(&kind, &grant)
		if err == sql.ErrNoRows {
			return nil
		} else if err != nil {
			return fmt.Errorf("read oauth token: %w", err)
		}
		if kind == countersign.TokenRefresh {
			revoked = grant
			return revokeGrant(ctx, tx, "", grant, at)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM oauth_tokens WHERE hash = ?`, hash); err != nil {
			return fmt.Errorf("delete oauth token: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return revoked, nil
}

// scanGrantRow reads a grants row as it is stored (grantColumns), for the
// copy.
func scanGrantRow(s scanner) (*countersign.Grant, error) {
	var g countersign.Grant
	var tiers string
	var created, used, revoked int64
	if err := s.Scan(&g.ID, &g.AccountID, &g.KeyID, &g.ClientID, &g.ClientName, &g.ApproverID, &g.ApproverName,
		&tiers, &created, &used, &revoked); err != nil {
		return nil, err
	}
	if tiers != "" {
		g.Tiers = strings.Split(tiers, ",")
	}
	g.CreatedAt, g.LastUsedAt, g.RevokedAt = fromNanos(created), fromNanos(used), fromNanos(revoked)
	return &g, nil
}
