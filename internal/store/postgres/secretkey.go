package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

// Option configures Open.
type Option func(*options)

type options struct {
	key *countersign.SecretKey
	// tracer sees every statement the pool's connections run (tests of
	// query plans); nil: none.
	tracer pgx.QueryTracer
}

// WithSecretKey opens the store with the server's secret key, which wraps
// the server keys the store holds and keys its audit chain. Every replica
// must be given the same key; a store sealed with another key is refused
// with countersign.ErrWrongSecretKey.
func WithSecretKey(k *countersign.SecretKey) Option {
	return func(o *options) { o.key = k }
}

var _ countersign.KeyedAuditor = (*DB)(nil)

// AuditKeyedFrom implements countersign.KeyedAuditor.
func (db *DB) AuditKeyedFrom() int64 { return db.keyedFrom.Load() }

// SecretKey implements countersign.KeyedAuditor.
func (db *DB) SecretKey() *countersign.SecretKey { return db.key }

// AuditKeyedEvent is countersign.AuditKeyedEvent, kept for callers of this
// package.
const AuditKeyedEvent = countersign.AuditKeyedEvent

// seal checks the store against the secret key at open, as the SQLite
// store's seal does: a sealed store must carry the check of this key; a
// store never sealed is sealed in one transaction (server keys wrapped,
// the chain keyed from the next entry on, with an entry saying so). The
// transaction first locks the head of the audit chain, so that replicas
// starting together seal once: the second waits, then finds the check.
func (db *DB) seal(ctx context.Context) error {
	if db.key == nil {
		var n int
		if err := db.pool.QueryRow(ctx, `SELECT COUNT(*) FROM secret_key`).Scan(&n); err != nil {
			return fmt.Errorf("read the secret key check: %w", err)
		}
		if n > 0 {
			return countersign.ErrSecretKeyNeeded
		}
		return nil
	}
	var keyedFrom int64
	err := db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockHeadSQL); err != nil {
			return fmt.Errorf("lock the audit head: %w", err)
		}
		var c countersign.KeyCheck
		err := tx.QueryRow(ctx, `SELECT audit_keyed_from, mac FROM secret_key WHERE id = 1`).Scan(&c.AuditKeyedFrom, &c.MAC)
		if err == nil {
			keyedFrom = c.AuditKeyedFrom
			return db.key.Verify(c)
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read the secret key check: %w", err)
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
			if err := db.appendAudit(ctx, tx, time.Now(), auditItem{ev: countersign.KeyedEvent(keyedFrom)}); err != nil {
				return err
			}
		}
		c = db.key.NewKeyCheck(keyedFrom)
		if _, err := tx.Exec(ctx, `INSERT INTO secret_key (id, audit_keyed_from, mac) VALUES (1, $1, $2)`, c.AuditKeyedFrom, c.MAC); err != nil {
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
func wrapServerKeys(ctx context.Context, tx pgx.Tx, key *countersign.SecretKey) error {
	rows, err := tx.Query(ctx, `SELECT name, key FROM server_keys ORDER BY name FOR UPDATE`)
	if err != nil {
		return fmt.Errorf("read server keys: %w", err)
	}
	type row struct {
		name string
		key  []byte
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.name, &x.key)
	})
	if err != nil {
		return fmt.Errorf("read server keys: %w", err)
	}
	for _, r := range all {
		sealed, err := key.SealServerKey(r.name, r.key)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE server_keys SET key = $1 WHERE name = $2`, sealed, r.name); err != nil {
			return fmt.Errorf("wrap server key: %w", err)
		}
	}
	return nil
}

// unwrapServerKey opens a stored server key and checks its size.
func (db *DB) unwrapServerKey(name string, stored []byte, size int) ([]byte, error) {
	return countersign.OpenServerKey(db.key, name, stored, size)
}

// sealImported seals what a copy of a store never sealed brought in: its
// server keys wrapped, its chain keyed from the next entry on.
func sealImported(ctx context.Context, tx pgx.Tx, key *countersign.SecretKey) (countersign.KeyCheck, error) {
	if err := wrapServerKeys(ctx, tx, key); err != nil {
		return countersign.KeyCheck{}, fmt.Errorf("import: %w", err)
	}
	seq, _, err := auditHead(ctx, tx)
	if err != nil {
		return countersign.KeyCheck{}, err
	}
	c := key.NewKeyCheck(seq + 1)
	if _, err := tx.Exec(ctx, `INSERT INTO secret_key (id, audit_keyed_from, mac) VALUES (1, $1, $2)
		ON CONFLICT (id) DO UPDATE SET audit_keyed_from = excluded.audit_keyed_from, mac = excluded.mac`, c.AuditKeyedFrom, c.MAC); err != nil {
		return c, fmt.Errorf("import: record the secret key check: %w", err)
	}
	return c, nil
}
