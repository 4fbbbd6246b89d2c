package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFS holds the schema changes, one numbered file each, numbered
// like the SQLite store's. They are append-only: a released file is never
// edited, a change is a new file.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLock is the key of the advisory lock every migration runs
// under ("cs" and "mg" in ASCII), so that replicas starting together apply
// each migration once.
const migrationLock = 0x6373_6d67

// migration is one numbered schema change.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order. The files are part
// of the binary, so a malformed name is a build mistake and panics in every
// test.
func migrations() []migration {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	var out []migration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			panic("postgres: migration file " + base + " is not named NNNN_name.sql")
		}
		b, err := migrationFS.ReadFile(name)
		if err != nil {
			panic(err)
		}
		out = append(out, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			panic("postgres: two migrations have version " + strconv.Itoa(out[i].version))
		}
	}
	return out
}

// Latest returns the newest schema version this binary knows.
func Latest() int {
	ms := migrations()
	return ms[len(ms)-1].version
}

// migrate brings the schema up to the newest migration this binary knows,
// each migration in its own transaction, and refuses a database that a newer
// binary has already migrated further.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	ms := migrations()
	known := ms[len(ms)-1].version
	for _, m := range ms {
		if err := applyMigration(ctx, pool, m, known); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration applies m unless it was applied already. The transaction
// first takes the migration lock, and only then reads the version, so that
// of two processes starting at once the second sees what the first did.
func applyMigration(ctx context.Context, pool *pgxpool.Pool, m migration, known int) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin migration %s: %w", m.name, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("lock for migration %s: %w", m.name, err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at BIGINT NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if current > known {
		return fmt.Errorf("database schema version %d is newer than this binary (%d); upgrade countersign", current, known)
	}
	if current >= m.version {
		return tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, m.sql); err != nil {
		return fmt.Errorf("apply migration %s: %w", m.name, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
		m.version, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("record migration %s: %w", m.name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit migration %s: %w", m.name, err)
	}
	return nil
}

// schemaVersion returns the highest applied migration, 0 for none.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var v int
	if err := q.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// SchemaVersion returns the schema version of the database: the newest
// migration applied to it.
func (db *DB) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := db.read(ctx, func(q querier) (err error) {
		v, err = schemaVersion(ctx, q)
		return err
	})
	return v, err
}
