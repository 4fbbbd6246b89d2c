package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/countersign/countersign"
)

// Option configures Open.
type Option func(*options)

type options struct {
	key        *countersign.SecretKey
	keyExisted bool
	maxLog     int64
	log        *slog.Logger
	trace      func(query string) // engine.Config.Trace, for tests
}

// WithSecretKey opens the store with the server's secret key, which wraps
// the server keys the store holds and keys its audit chain. A store sealed
// with another key is refused with countersign.ErrWrongSecretKey.
func WithSecretKey(k *countersign.SecretKey) Option {
	return func(o *options) { o.key = k }
}

// WithKeyFileExisted says that the key file given with WithSecretKey was
// there before this start, beside the data (made by an earlier start, not
// now). Such a store was sealed then: one that holds data but no check of
// the key has lost it (someone with the database but not the key removed
// it, to have a rewritten audit chain and server keys of their own sealed
// as an old store's), and is refused with ErrKeyCheckGone instead of being
// sealed again.
func WithKeyFileExisted() Option {
	return func(o *options) { o.keyExisted = true }
}

// ErrKeyCheckGone is the error of a store that holds data but no record of
// the secret key it was sealed with, opened with a key file that existed
// before (WithKeyFileExisted).
var ErrKeyCheckGone = errors.New("the store holds no record of the secret key it was sealed with, though its key file was there before this start: the database was changed by someone without the key, or restored from a backup older than the key file")

var _ countersign.KeyedAuditor = (*DB)(nil)

// AuditKeyedFrom implements countersign.KeyedAuditor.
func (db *DB) AuditKeyedFrom() int64 { return db.keyedFrom.Load() }

// SecretKey implements countersign.KeyedAuditor.
func (db *DB) SecretKey() *countersign.SecretKey { return db.key }

// AuditKeyedEvent is countersign.AuditKeyedEvent, kept for callers of this
// package.
const AuditKeyedEvent = countersign.AuditKeyedEvent

// seal checks the store against the secret key at open. A store sealed
// before must carry the check of this very key. A store never sealed (a new
// one, or one an earlier version wrote, whose server keys are stored as
// they are and whose audit entries carry bare hashes) is sealed now, in one
// transaction: every server key is wrapped, the chain is keyed from the next
// entry on, and an entry that says so links the old chain to the keyed one,
// so that the old part cannot be rewritten without the key either.
func (db *DB) seal(ctx context.Context) error {
	if db.key == nil {
		var n int
		if err := db.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM secret_key`).Scan(&n); err != nil {
			return fmt.Errorf("read the secret key check: %w", err)
		}
		if n > 0 {
			return countersign.ErrSecretKeyNeeded
		}
		return nil
	}
	var keyedFrom int64
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		var c countersign.KeyCheck
		err := tx.QueryRowContext(ctx, `SELECT audit_keyed_from, mac FROM secret_key WHERE id = 1`).Scan(&c.AuditKeyedFrom, &c.MAC)
		if err == nil {
			keyedFrom = c.AuditKeyedFrom
			return db.key.Verify(c)
		} else if err != sql.ErrNoRows {
			return fmt.Errorf("read the secret key check: %w", err)
		}
		if db.keyExisted {
			var data bool
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM accounts) OR EXISTS (SELECT 1 FROM approvers)
				OR EXISTS (SELECT 1 FROM requests) OR EXISTS (SELECT 1 FROM server_keys) OR EXISTS (SELECT 1 FROM audit_log)`).Scan(&data); err != nil {
				return fmt.Errorf("read the store: %w", err)
			}
			if data {
				return ErrKeyCheckGone
			}
		}
		if err := wrapServerKeys(ctx, tx, db.key); err != nil {
			return err
		}
		seq, _, err := auditHead(ctx, tx)
		if err != nil {
			return err
		}
		keyedFrom = seq + 1
		if seq > 0 {
			if err := appendAudit(ctx, tx, time.Now(), "", "", countersign.KeyedEvent(keyedFrom)); err != nil {
				return err
			}
		}
		c = db.key.NewKeyCheck(keyedFrom)
		if _, err := tx.ExecContext(ctx, `INSERT INTO secret_key (id, audit_keyed_from, mac) VALUES (1, ?, ?)`, c.AuditKeyedFrom, c.MAC); err != nil {
			return fmt.Errorf("record the secret key check: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	db.keyedFrom.Store(keyedFrom)
	return nil
}

// wrapServerKeys wraps every server key of a store that was never sealed.
func wrapServerKeys(ctx context.Context, tx querier, key *countersign.SecretKey) error {
	rows, err := tx.QueryContext(ctx, `SELECT name, key FROM server_keys ORDER BY name`)
	if err != nil {
		return fmt.Errorf("read server keys: %w", err)
	}
	type row struct {
		name string
		key  []byte
	}
	var all []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.name, &r.key); err != nil {
			rows.Close()
			return fmt.Errorf("read server keys: %w", err)
		}
		all = append(all, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read server keys: %w", err)
	}
	for _, r := range all {
		sealed, err := key.SealServerKey(r.name, r.key)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE server_keys SET key = ? WHERE name = ?`, sealed, r.name); err != nil {
			return fmt.Errorf("wrap server key: %w", err)
		}
	}
	return nil
}
