package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
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
	return db.changeChannels(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO notify_channels (`+channelColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			c.ID, c.AccountID, c.Name, string(c.Type), string(c.Config), orEmpty(c.Secret), nanos(c.CreatedAt))
		switch {
		case isUnique(err):
			return countersign.ErrChannelNameTaken(c.Name)
		case isForeignKey(err):
			return countersign.NotFound("account")
		case err != nil:
			return fmt.Errorf("insert channel: %w", badText(err))
		}
		return nil
	})
}

// changeChannels runs a change of channels in a transaction that announces
// it (channelMark) to the other replicas, and forgets the channels this
// process keeps once it is committed (see channelCache).
func (db *DB) changeChannels(ctx context.Context, fn func(tx pgx.Tx) error) error {
	err := db.update(ctx, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, notifyChannel, db.payload("", "", channelMark)); err != nil {
			return fmt.Errorf("announce the change of channels: %w", err)
		}
		return nil
	})
	db.channels.clear()
	return err
}

// UpdateChannel replaces a channel's type, config and secret. Errors:
// EINVALID, ENOTFOUND.
func (db *DB) UpdateChannel(ctx context.Context, c *countersign.Channel) error {
	if !c.Type.Valid() {
		return countersign.ErrUnknownChannelType(c.Type)
	}
	if hasNUL(c.ID, c.AccountID) {
		return channelNotFound()
	}
	return db.changeChannels(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE notify_channels SET type = $1, config = $2, secret = $3
			WHERE id = $4 AND account_id = $5`, string(c.Type), string(c.Config), orEmpty(c.Secret), c.ID, c.AccountID)
		if err != nil {
			return fmt.Errorf("update channel: %w", badText(err))
		}
		if tag.RowsAffected() == 0 {
			return channelNotFound()
		}
		return nil
	})
}

// Channel returns a channel by id. Errors: ENOTFOUND.
func (db *DB) Channel(ctx context.Context, id string) (*countersign.Channel, error) {
	if hasNUL(id) {
		return nil, channelNotFound()
	}
	var c *countersign.Channel
	err := db.read(ctx, func(q querier) (err error) {
		c, err = scanChannel(q.QueryRow(ctx, `SELECT `+channelColumns+` FROM notify_channels WHERE id = $1`, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, channelNotFound()
	} else if err != nil {
		return nil, fmt.Errorf("read channel: %w", err)
	}
	return c, nil
}

// Channels lists an account's channels by name, or every account's when
// accountID is empty. An account's are kept while the change feed listens
// (see channelCache).
func (db *DB) Channels(ctx context.Context, accountID string) ([]*countersign.Channel, error) {
	if hasNUL(accountID) {
		return []*countersign.Channel{}, nil
	}
	if accountID == "" {
		return db.readChannels(ctx, "")
	}
	list, gen, ok := db.channels.get(accountID)
	if ok {
		return list, nil
	}
	list, err := db.readChannels(ctx, accountID)
	if err == nil {
		db.channels.put(accountID, list, gen)
	}
	return list, err
}

func (db *DB) readChannels(ctx context.Context, accountID string) ([]*countersign.Channel, error) {
	query, args := `SELECT `+channelColumns+` FROM notify_channels ORDER BY account_id, name`, []any{}
	if accountID != "" {
		query, args = `SELECT `+channelColumns+` FROM notify_channels WHERE account_id = $1 ORDER BY name`, []any{accountID}
	}
	var out []*countersign.Channel
	err := db.read(ctx, func(q querier) (err error) {
		out, err = collect(ctx, q, scanChannel, query, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list channels: %w", err)
	}
	return out, nil
}

// RemoveChannel removes a channel of the account, by id or name, and its
// outbox items, in one transaction. Errors: ENOTFOUND.
func (db *DB) RemoveChannel(ctx context.Context, accountID, idOrName string) error {
	if hasNUL(accountID, idOrName) {
		return channelNotFound()
	}
	return db.changeChannels(ctx, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM notify_channels WHERE account_id = $1 AND (id = $2 OR name = $2)
			ORDER BY (id = $2) DESC LIMIT 1 FOR UPDATE`, accountID, idOrName).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return channelNotFound()
		} else if err != nil {
			return fmt.Errorf("find channel: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM outbox WHERE channel_id = $1`, id); err != nil {
			return fmt.Errorf("remove the channel's outbox: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM notify_channels WHERE id = $1`, id); err != nil {
			return fmt.Errorf("remove channel: %w", err)
		}
		return nil
	})
}

func scanChannel(s pgx.Row) (*countersign.Channel, error) {
	var c countersign.Channel
	var typ, config string
	var created int64
	if err := s.Scan(&c.ID, &c.AccountID, &c.Name, &typ, &config, &c.Secret, &created); err != nil {
		return nil, err
	}
	c.Type = countersign.ChannelType(typ)
	c.Config = rawJSON(config)
	c.CreatedAt = fromNanos(created)
	if len(c.Secret) == 0 {
		c.Secret = nil
	}
	return &c, nil
}

func channelNotFound() error {
	return countersign.NotFound("channel")
}
