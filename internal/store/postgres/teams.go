package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// teamsMark ends the payload ("  - +teams") that the database sends, from
// the trigger of migrations/0026, for every statement that changes the
// recorded teams configuration, whoever runs it.
const teamsMark = "+teams"

// teamsTTL bounds how long the recorded fingerprint is kept, even when no
// change is heard of.
const teamsTTL = 5 * time.Second

// teamsCache keeps the recorded fingerprint of the teams configuration,
// which every decision reads, while the change feed listens: only then
// does this process hear of a change made elsewhere (teamsMark). Without
// the feed nothing is kept, and every read asks the database.
type teamsCache struct {
	mu   sync.Mutex
	on   bool
	gen  uint64
	fp   string
	kept bool
	at   time.Time
}

func (c *teamsCache) get() (fp string, gen uint64, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on || !c.kept || time.Since(c.at) >= teamsTTL {
		return "", c.gen, false
	}
	return c.fp, c.gen, true
}

func (c *teamsCache) put(fp string, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.on || gen != c.gen {
		return
	}
	c.fp, c.kept, c.at = fp, true, time.Now()
}

// clear forgets the kept fingerprint.
func (c *teamsCache) clear() {
	c.mu.Lock()
	c.gen++
	c.kept = false
	c.mu.Unlock()
}

// listening turns keeping on while the feed listens, and off (emptied)
// when it stops.
func (c *teamsCache) listening(on bool) {
	c.mu.Lock()
	c.gen++
	c.kept = false
	c.on = on
	c.mu.Unlock()
}

// SetTeamsFingerprint implements countersign.TeamsFingerprints: it records
// the fingerprint of the teams configuration this replica runs, which
// from its commit on is the one the replicas decide under, and returns
// the one recorded before ("" when none was).
func (db *DB) SetTeamsFingerprint(ctx context.Context, fp string, at time.Time) (string, error) {
	var previous string
	err := db.update(ctx, func(tx pgx.Tx) error {
		// The lock orders replicas that start at once: each reads the
		// fingerprint the one before it wrote.
		err := tx.QueryRow(ctx, `SELECT fingerprint FROM teams_config WHERE id = 1 FOR UPDATE`).Scan(&previous)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read the teams configuration's fingerprint: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO teams_config (id, fingerprint, set_at) VALUES (1, $1, $2)
			ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint, set_at = excluded.set_at`, fp, at.UnixNano()); err != nil {
			return fmt.Errorf("record the teams configuration's fingerprint: %w", err)
		}
		return nil
	})
	db.teams.clear()
	return previous, err
}

// TeamsFingerprint implements countersign.TeamsFingerprints: the recorded
// fingerprint, kept while the change feed listens (at most teamsTTL), read
// from the database otherwise.
func (db *DB) TeamsFingerprint(ctx context.Context) (string, error) {
	fp, gen, ok := db.teams.get()
	if ok {
		return fp, nil
	}
	err := db.read(ctx, func(q querier) error {
		err := q.QueryRow(ctx, `SELECT fingerprint FROM teams_config WHERE id = 1`).Scan(&fp)
		if errors.Is(err, pgx.ErrNoRows) {
			fp, err = "", nil
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read the teams configuration's fingerprint: %w", err)
	}
	db.teams.put(fp, gen)
	return fp, nil
}
