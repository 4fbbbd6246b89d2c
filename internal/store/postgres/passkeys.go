package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
	"github.com/jackc/pgx/v5"
)

const passkeyColumns = `id, approver_id, credential_id, public_key, sign_count, aaguid, transports, flags, name, created_at, last_used_at`

// CreatePasskey implements countersign.PasskeyStore.
func (db *DB) CreatePasskey(ctx context.Context, p *countersign.Passkey) error {
	if hasNUL(p.ID, p.ApproverID, p.Name, fmt.Sprint(p.Transports)) {
		return countersign.Errorf(countersign.EINVALID, "a passkey's name holds a NUL character")
	}
	p.ID = orID(p.ID, "pk_")
	query, args, err := passkeyInsert(p)
	if err != nil {
		return err
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, query, args...)
		switch {
		case isForeignKey(err):
			return countersign.NotFound("approver")
		case isUnique(err):
			return countersign.ErrPasskeyTaken()
		case err != nil:
			return fmt.Errorf("create passkey: %w", badText(err))
		}
		return nil
	})
}

// passkeyInsert is the statement that writes a passkey row as it is.
func passkeyInsert(p *countersign.Passkey) (string, []any, error) {
	transports := p.Transports
	if transports == nil {
		transports = []string{}
	}
	tj, err := json.Marshal(transports)
	if err != nil {
		return "", nil, fmt.Errorf("encode transports: %w", err)
	}
	return `INSERT INTO webauthn_credentials (` + passkeyColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		[]any{p.ID, p.ApproverID, orEmpty(p.CredentialID), orEmpty(p.PublicKey), int64(p.SignCount), orEmpty(p.AAGUID),
			string(tj), int64(p.Flags), p.Name, nanos(p.CreatedAt), nanos(p.LastUsedAt)}, nil
}

func scanPasskey(r pgx.Row) (*countersign.Passkey, error) {
	var p countersign.Passkey
	var count, flags, created, used int64
	var transports string
	if err := r.Scan(&p.ID, &p.ApproverID, &p.CredentialID, &p.PublicKey, &count, &p.AAGUID, &transports, &flags,
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
	out := []*countersign.Passkey{}
	if hasNUL(approverID) {
		return out, nil
	}
	err := db.read(ctx, func(q querier) error {
		out = out[:0]
		rows, err := q.Query(ctx, `SELECT `+passkeyColumns+` FROM webauthn_credentials
			WHERE approver_id = $1 ORDER BY created_at, id`, approverID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			p, err := scanPasskey(rows)
			if err != nil {
				return err
			}
			out = append(out, p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list passkeys: %w", err)
	}
	return out, nil
}

// PasskeyByCredentialID implements countersign.PasskeyStore.
func (db *DB) PasskeyByCredentialID(ctx context.Context, credentialID []byte) (*countersign.Passkey, error) {
	var p *countersign.Passkey
	err := db.read(ctx, func(q querier) (err error) {
		p, err = scanPasskey(q.QueryRow(ctx, `SELECT `+passkeyColumns+` FROM webauthn_credentials
			WHERE credential_id = $1`, orEmpty(credentialID)))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.NotFound("passkey")
	} else if err != nil {
		return nil, fmt.Errorf("read passkey: %w", err)
	}
	return p, nil
}

// UsePasskey implements countersign.PasskeyStore: the counter check and the
// update are one statement, so two uses of one assertion cannot both pass.
func (db *DB) UsePasskey(ctx context.Context, id string, signCount uint32, now time.Time) error {
	if hasNUL(id) {
		return countersign.NotFound("passkey")
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE webauthn_credentials SET sign_count = $1, last_used_at = $2
			WHERE id = $3 AND (sign_count < $1 OR (sign_count = 0 AND $1 = 0))`, int64(signCount), nanos(now), id)
		if err != nil {
			return fmt.Errorf("use passkey: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		var one int
		err = tx.QueryRow(ctx, `SELECT 1 FROM webauthn_credentials WHERE id = $1`, id).Scan(&one)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("use passkey: %w", err)
		}
		return countersign.RefusePasskeyUse(err == nil)
	})
}

// RemovePasskey implements countersign.PasskeyStore. With keepLast, the
// DELETE itself checks that the approver keeps a password or a passkey it
// does not remove. Under READ COMMITTED two such DELETEs of different
// passkeys would each see the other's passkey still there; locking the
// approver first orders them, and the second DELETE, a statement begun
// after the first committed, sees what it removed.
func (db *DB) RemovePasskey(ctx context.Context, approverID, idOrName string, keepLast bool) error {
	if hasNUL(approverID, idOrName) {
		return countersign.ErrNoPasskey(idOrName)
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM approvers WHERE id = $1 FOR UPDATE`, approverID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return countersign.ErrNoPasskey(idOrName)
		} else if err != nil {
			return fmt.Errorf("remove passkey: %w", err)
		}
		tag, err := tx.Exec(ctx, `DELETE FROM webauthn_credentials WHERE approver_id = $1 AND (id = $2 OR name = $2)
			AND (NOT $3 OR EXISTS (SELECT 1 FROM approvers a WHERE a.id = $1 AND a.password_hash <> '')
				OR EXISTS (SELECT 1 FROM webauthn_credentials o WHERE o.approver_id = $1 AND o.id <> $2 AND o.name <> $2))`,
			approverID, idOrName, keepLast)
		if err != nil {
			return fmt.Errorf("remove passkey: %w", err)
		}
		if tag.RowsAffected() > 0 {
			return nil
		}
		err = tx.QueryRow(ctx, `SELECT 1 FROM webauthn_credentials WHERE approver_id = $1 AND (id = $2 OR name = $2)`,
			approverID, idOrName).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return countersign.ErrNoPasskey(idOrName)
		} else if err != nil {
			return fmt.Errorf("remove passkey: %w", err)
		}
		return countersign.ErrLastPasskey()
	})
}

// CreateCeremony implements countersign.PasskeyStore.
func (db *DB) CreateCeremony(ctx context.Context, c *countersign.Ceremony, now time.Time) error {
	if hasNUL(c.Hash, c.Purpose, c.ApproverID, c.Data) {
		return countersign.Errorf(countersign.EINVALID, "a ceremony holds a NUL character")
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM webauthn_ceremonies WHERE expires_at <= $1`, nanos(now)); err != nil {
			return fmt.Errorf("create ceremony: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO webauthn_ceremonies (hash, purpose, approver_id, data, expires_at)
			VALUES ($1, $2, $3, $4, $5)`, c.Hash, c.Purpose, c.ApproverID, c.Data, nanos(c.ExpiresAt)); err != nil {
			return fmt.Errorf("create ceremony: %w", badText(err))
		}
		return nil
	})
}

// TakeCeremony implements countersign.PasskeyStore: one DELETE … RETURNING,
// so that of two callers with one handle exactly one gets it.
func (db *DB) TakeCeremony(ctx context.Context, hash, purpose string, now time.Time) (*countersign.Ceremony, error) {
	if hasNUL(hash, purpose) {
		return nil, countersign.ErrNoCeremony()
	}
	var out countersign.Ceremony
	var expires int64
	err := db.update(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `DELETE FROM webauthn_ceremonies WHERE hash = $1 AND purpose = $2
			RETURNING hash, purpose, approver_id, data, expires_at`, hash, purpose).
			Scan(&out.Hash, &out.Purpose, &out.ApproverID, &out.Data, &expires)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.ErrNoCeremony()
	} else if err != nil {
		return nil, fmt.Errorf("take ceremony: %w", err)
	}
	out.ExpiresAt = fromNanos(expires)
	if !out.ExpiresAt.After(now) {
		return nil, countersign.ErrCeremonyExpired()
	}
	return &out, nil
}

// ApproverByID implements countersign.PasskeyStore.
func (db *DB) ApproverByID(ctx context.Context, id string) (*countersign.Approver, error) {
	if hasNUL(id) {
		return nil, countersign.NotFound("approver")
	}
	var a *countersign.Approver
	err := db.read(ctx, func(q querier) (err error) {
		a, err = scanApprover(q.QueryRow(ctx, `
			SELECT id, username, password_hash, created_at FROM approvers WHERE id = $1`, id))
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.NotFound("approver")
	} else if err != nil {
		return nil, fmt.Errorf("read approver: %w", err)
	}
	return a, nil
}

// Ceremony implements countersign.PasskeyStore.
func (db *DB) Ceremony(ctx context.Context, hash, purpose string, now time.Time) (*countersign.Ceremony, error) {
	if hasNUL(hash, purpose) {
		return nil, countersign.ErrNoCeremony()
	}
	var out countersign.Ceremony
	var expires int64
	err := db.read(ctx, func(q querier) error {
		return q.QueryRow(ctx, `SELECT hash, purpose, approver_id, data, expires_at FROM webauthn_ceremonies
			WHERE hash = $1 AND purpose = $2 AND expires_at > $3`, hash, purpose, nanos(now)).
			Scan(&out.Hash, &out.Purpose, &out.ApproverID, &out.Data, &expires)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, countersign.ErrNoCeremony()
	} else if err != nil {
		return nil, fmt.Errorf("read ceremony: %w", err)
	}
	out.ExpiresAt = fromNanos(expires)
	return &out, nil
}
