package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

const channelColumns = `id, account_id, name, type, config, secret, created_at`

// CreateChannel adds a notification channel. Errors: EINVALID, ECONFLICT
// when the account has a channel of that name, ENOTFOUND for an unknown
// account.
func (db *DB) CreateChannel(ctx context.Context, c *countersign.Channel) error {
	if !c.Type.Valid() {
		return countersign.ErrUnknownChannelType(c.Type)
	}
	c.ID = orID(c.ID, "chn_")
	_, err := db.configExec(ctx, `INSERT INTO notify_channels (`+channelColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		c.ID, c.AccountID, c.Name, c.Type, string(c.Config), secretBytes(c.Secret), nanos(c.CreatedAt))
	switch {
	case isUnique(err):
		return countersign.ErrChannelNameTaken(c.Name)
	case isForeignKey(err):
		return countersign.NotFound("account")
	case err != nil:
		return fmt.Errorf("insert channel: %w", err)
	}
	return nil
}

// UpdateChannel replaces a channel's type, config and secret. Errors:
// EINVALID, ENOTFOUND.
func (db *DB) UpdateChannel(ctx context.Context, c *countersign.Channel) error {
	if !c.Type.Valid() {
		return countersign.ErrUnknownChannelType(c.Type)
	}
	res, err := db.configExec(ctx, `UPDATE notify_channels SET type = ?, config = ?, secret = ?
		WHERE id = ? AND account_id = ?`, c.Type, string(c.Config), secretBytes(c.Secret), c.ID, c.AccountID)
	if err != nil {
		return fmt.Errorf("update channel: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update channel: %w", err)
	} else if n == 0 {
		return channelNotFound()
	}
	return nil
}

// Channel returns a channel by id. Errors: ENOTFOUND.
func (db *DB) Channel(ctx context.Context, id string) (*countersign.Channel, error) {
	c, err := scanChannel(db.read.QueryRowContext(ctx, `SELECT `+channelColumns+` FROM notify_channels WHERE id = ?`, id))
	if err == sql.ErrNoRows {
		return nil, channelNotFound()
	} else if err != nil {
		return nil, fmt.Errorf("read channel: %w", err)
	}
	return c, nil
}

// Channels lists an account's channels by name, or every account's when
// accountID is empty.
func (db *DB) Channels(ctx context.Context, accountID string) ([]*countersign.Channel, error) {
	version, caching := db.eng.CacheVersion() // before the database: see AgentKeyByHash
	caching = caching && accountID != ""
	now := time.Now()
	if caching {
		if cs, ok := db.caches.channels.Get(accountID, version, now); ok {
			return copyChannels(cs), nil
		}
	}
	out, err := db.channels(ctx, accountID)
	if err == nil && caching {
		cs := make([]countersign.Channel, len(out))
		for i, c := range out {
			cs[i] = *c
		}
		db.caches.channels.Put(accountID, cs, version, now)
		return copyChannels(cs), nil
	}
	return out, err
}

func (db *DB) channels(ctx context.Context, accountID string) ([]*countersign.Channel, error) {
	query, args := `SELECT `+channelColumns+` FROM notify_channels ORDER BY account_id, name`, []any{}
	if accountID != "" {
		query, args = `SELECT `+channelColumns+` FROM notify_channels WHERE account_id = ? ORDER BY name`, []any{accountID}
	}
	rows, err := db.read.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	defer rows.Close()
	out := []*countersign.Channel{}
	for rows.Next() {
		c, err := scanChannel(rows)
		if err != nil {
			return nil, fmt.Errorf("list channels: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	return out, nil
}

// RemoveChannel removes a channel of the account, by id or name, and its
// outbox items, in one transaction. Errors: ENOTFOUND.
func (db *DB) RemoveChannel(ctx context.Context, accountID, idOrName string) error {
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM notify_channels WHERE account_id = ? AND (id = ? OR name = ?)`,
			accountID, idOrName, idOrName).Scan(&id)
		if err == sql.ErrNoRows {
			return channelNotFound()
		} else if err != nil {
			return fmt.Errorf("find channel: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM outbox WHERE channel_id = ?`, id); err != nil {
			return fmt.Errorf("remove the channel's outbox: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM notify_channels WHERE id = ?`, id); err != nil {
			return fmt.Errorf("remove channel: %w", err)
		}
		return nil
	})
}

func scanChannel(s scanner) (*countersign.Channel, error) {
	var c countersign.Channel
	var config string
	var created int64
	if err := s.Scan(&c.ID, &c.AccountID, &c.Name, &c.Type, &config, &c.Secret, &created); err != nil {
		return nil, err
	}
	c.Config = rawJSON(config)
	c.CreatedAt = fromNanos(created)
	if len(c.Secret) == 0 {
		c.Secret = nil
	}
	return &c, nil
}

// secretBytes stores a missing secret as an empty blob, never NULL.
func secretBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func channelNotFound() error {
	return countersign.NotFound("channel")
}
