package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SetTeamsFingerprint implements countersign.TeamsFingerprints: it records
// the fingerprint of the teams configuration the server runs and returns
// the one recorded before ("" when none was).
func (db *DB) SetTeamsFingerprint(ctx context.Context, fp string, at time.Time) (string, error) {
	var previous string
	err := db.updateUncached(ctx, func(ctx context.Context, tx querier) error {
		err := tx.QueryRowContext(ctx, `SELECT fingerprint FROM teams_config WHERE id = 1`).Scan(&previous)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read the teams configuration's fingerprint: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO teams_config (id, fingerprint, set_at) VALUES (1, ?, ?)
			ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint, set_at = excluded.set_at`, fp, at.UnixNano()); err != nil {
			return fmt.Errorf("record the teams configuration's fingerprint: %w", err)
		}
		return nil
	})
	return previous, err
}

// TeamsFingerprint implements countersign.TeamsFingerprints. One server
// runs on a data directory, so the server does not ask it before each
// decision; doctor and the tests read it.
func (db *DB) TeamsFingerprint(ctx context.Context) (string, error) {
	var fp string
	err := db.read.QueryRowContext(ctx, `SELECT fingerprint FROM teams_config WHERE id = 1`).Scan(&fp)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the teams configuration's fingerprint: %w", err)
	}
	return fp, nil
}
