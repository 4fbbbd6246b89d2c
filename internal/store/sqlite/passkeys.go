package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

const passkeyColumns = `id, approver_id, credential_id, public_key, sign_count, aaguid, transports, flags, name, created_at, last_used_at`

// CreatePasskey implements countersign.PasskeyStore.
func (db *DB) CreatePasskey(ctx context.Context, p *countersign.Passkey) error {
	p.ID = orID(p.ID, "pk_")
	query, args, err := passkeyInsert(p)
	if err != nil {
		return err
	}
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		_, err := tx.ExecContext(ctx, query, args...)
		switch {
		case isForeignKey(err):
			return countersign.NotFound("approver")
		case isUnique(err):
			return countersign.ErrPasskeyTaken()
		case err != nil:
			return fmt.Errorf("create passkey: %w", err)
		}
		return nil
	})
}

// passkeyInsert is the statement that writes a passkey row as it is.
func passkeyInsert(p *countersign.Passkey) (string, []any, error) {
	transports, err := json.Marshal(orNone(p.Transports))
	if err != nil {
		return "", nil, fmt.Errorf("encode transports: %w", err)
	}
	return `INSERT INTO webauthn_credentials (` + passkeyColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		[]any{p.ID, p.ApproverID, orEmpty(p.CredentialID), orEmpty(p.PublicKey), int64(p.SignCount), orEmpty(p.AAGUID),
			string(transports), int64(p.Flags), p.Name, nanos(p.CreatedAt), nanos(p.LastUsedAt)}, nil
}

func orNone(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func scanPasskey(s scanner) (*countersign.Passkey, error) {
	var p countersign.Passkey
	var count, flags, created, used int64
	var transports string
	if err := s.Scan(&p.ID, &p.ApproverID, &p.CredentialID, &p.PublicKey, &count, &p.AAGUID, &transports, &flags,
		&p.Name, &created, &used); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(transports), &p.Transports); err != nil {
		return nil, fmt.Errorf("decode transports: %w", err)
	}
	// Both backends read an empty value back as nil.
	if len(p.AAGUID) == 0 {
		p.AAGUID = nil
	}
	p.SignCount, p.Flags = uint32(count), uint8(flags)
	p.CreatedAt, p.LastUsedAt = fromNanos(created), fromNanos(used)
	return &p, nil
}

// Passkeys implements countersign.PasskeyStore.
func (db *DB) Passkeys(ctx context.Context, approverID string) ([]*countersign.Passkey, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT `+passkeyColumns+` FROM webauthn_credentials
		WHERE approver_id = ? ORDER BY created_at, id`, approverID)
	if err != nil {
		return nil, fmt.Errorf("list passkeys: %w", err)
	}
	defer rows.Close()
	out := []*countersign.Passkey{}
	for rows.Next() {
		p, err := scanPasskey(rows)
		if err != nil {
			return nil, fmt.Errorf("list passkeys: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// PasskeyByCredentialID implements countersign.PasskeyStore.
func (db *DB) PasskeyByCredentialID(ctx context.Context, credentialID []byte) (*countersign.Passkey, error) {
	p, err := scanPasskey(db.read.QueryRowContext(ctx, `SELECT `+passkeyColumns+` FROM webauthn_credentials
		WHERE credential_id = ?`, orEmpty(credentialID)))
	if err == sql.ErrNoRows {
		return nil, countersign.NotFound("passkey")
	} else if err != nil {
		return nil, fmt.Errorf("read passkey: %w", err)
	}
	return p, nil
}

// UsePasskey implements countersign.PasskeyStore: the counter check and the
// update are one statement, so two uses of one assertion cannot both pass.
func (db *DB) UsePasskey(ctx context.Context, id string, signCount uint32, now time.Time) error {
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `UPDATE webauthn_credentials SET sign_count = ?, last_used_at = ?
			WHERE id = ? AND (sign_count < ? OR (sign_count = 0 AND ? = 0))`,
			int64(signCount), nanos(now), id, int64(signCount), int64(signCount))
		if err != nil {
			return fmt.Errorf("use passkey: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		var one int
		err = tx.QueryRowContext(ctx, `SELECT 1 FROM webauthn_credentials WHERE id = ?`, id).Scan(&one)
		if err != nil && err != sql.ErrNoRows {
			return fmt.Errorf("use passkey: %w", err)
		}
		return countersign.RefusePasskeyUse(err == nil)
	})
}

// RemovePasskey implements countersign.PasskeyStore. With keepLast, the
// DELETE itself checks that the approver keeps a password or a passkey it
// does not remove, so the check and the removal are one statement.
func (db *DB) RemovePasskey(ctx context.Context, approverID, idOrName string, keepLast bool) error {
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webauthn_credentials WHERE approver_id = ? AND (id = ? OR name = ?)
			AND (NOT ? OR EXISTS (SELECT 1 FROM approvers a WHERE a.id = ? AND a.password_hash <> '')
				OR EXISTS (SELECT 1 FROM webauthn_credentials o WHERE o.approver_id = ? AND o.id <> ? AND o.name <> ?))`,
			approverID, idOrName, idOrName, keepLast, approverID, approverID, idOrName, idOrName)
		if err != nil {
			return fmt.Errorf("remove passkey: %w", err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		return noPasskeyRemoved(ctx, tx, approverID, idOrName)
	})
}

// noPasskeyRemoved says why a removal removed nothing: the passkey is
// there, so it was the approver's last way to sign in; or it is not.
func noPasskeyRemoved(ctx context.Context, tx querier, approverID, idOrName string) error {
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM webauthn_credentials WHERE approver_id = ? AND (id = ? OR name = ?)`,
		approverID, idOrName, idOrName).Scan(&one)
	if err == sql.ErrNoRows {
		return countersign.ErrNoPasskey(idOrName)
	} else if err != nil {
		return fmt.Errorf("remove passkey: %w", err)
	}
	return countersign.ErrLastPasskey()
}

// CreateCeremony implements countersign.PasskeyStore.
func (db *DB) CreateCeremony(ctx context.Context, c *countersign.Ceremony, now time.Time) error {
	return db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM webauthn_ceremonies WHERE expires_at <= ?`, nanos(now)); err != nil {
			return fmt.Errorf("create ceremony: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO webauthn_ceremonies (hash, purpose, approver_id, data, expires_at)
			VALUES (?, ?, ?, ?, ?)`, c.Hash, c.Purpose, c.ApproverID, c.Data, nanos(c.ExpiresAt)); err != nil {
			return fmt.Errorf("create ceremony: %w", err)
		}
		return nil
	})
}

// TakeCeremony implements countersign.PasskeyStore: one DELETE … RETURNING,
// so that of two callers with one handle exactly one gets it.
func (db *DB) TakeCeremony(ctx context.Context, hash, purpose string, now time.Time) (*countersign.Ceremony, error) {
	var c *countersign.Ceremony
	err := db.updateCached(ctx, func(ctx context.Context, tx querier) error {
		var out countersign.Ceremony
		var expires int64
		err := tx.QueryRowContext(ctx, `DELETE FROM webauthn_ceremonies WHERE hash = ? AND purpose = ?
			RETURNING hash, purpose, approver_id, data, expires_at`, hash, purpose).
			Scan(&out.Hash, &out.Purpose, &out.ApproverID, &out.Data, &expires)
		if err == sql.ErrNoRows {
			return countersign.ErrNoCeremony()
		} else if err != nil {
			return fmt.Errorf("take ceremony: %w", err)
		}
		out.ExpiresAt = fromNanos(expires)
		if !out.ExpiresAt.After(now) {
			return nil // removed, and gone
		}
		c = &out
		return nil
	})
	if err == nil && c == nil {
		err = countersign.ErrCeremonyExpired()
	}
	return c, err
}

// ApproverByID implements countersign.PasskeyStore.
func (db *DB) ApproverByID(ctx context.Context, id string) (*countersign.Approver, error) {
	var a countersign.Approver
	var created int64
	err := db.read.QueryRowContext(ctx, `
		SELECT id, username, password_hash, created_at FROM approvers WHERE id = ?`, id).
		Scan(&a.ID, &a.Username, &a.PasswordHash, &created)
	if err == sql.ErrNoRows {
		return nil, countersign.NotFound("approver")
	} else if err != nil {
		return nil, fmt.Errorf("read approver: %w", err)
	}
	a.CreatedAt = fromNanos(created)
	return &a, nil
}

// Ceremony implements countersign.PasskeyStore.
func (db *DB) Ceremony(ctx context.Context, hash, purpose string, now time.Time) (*countersign.Ceremony, error) {
	var out countersign.Ceremony
	var expires int64
	err := db.read.QueryRowContext(ctx, `SELECT hash, purpose, approver_id, data, expires_at FROM webauthn_ceremonies
		WHERE hash = ? AND purpose = ? AND expires_at > ?`, hash, purpose, nanos(now)).
		Scan(&out.Hash, &out.Purpose, &out.ApproverID, &out.Data, &expires)
	if err == sql.ErrNoRows {
		return nil, countersign.ErrNoCeremony()
	} else if err != nil {
		return nil, fmt.Errorf("read ceremony: %w", err)
	}
	out.ExpiresAt = fromNanos(expires)
	return &out, nil
}
