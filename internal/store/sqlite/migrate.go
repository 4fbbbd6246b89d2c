package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// migrationFS holds the schema changes, one numbered file each. They are
// append-only: a released file is never edited, a change is a new file.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

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
			panic("sqlite: migration file " + base + " is not named NNNN_name.sql")
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
			panic("sqlite: two migrations have version " + strconv.Itoa(out[i].version))
		}
	}
	return out
}

// migrate brings the schema up to the newest migration this binary knows,
// each migration in its own transaction, and refuses a database that a newer
// binary has already migrated further.
func migrate(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	ms := migrations()
	known := ms[len(ms)-1].version
	for _, m := range ms {
		if err := applyMigration(ctx, db, m, known); err != nil {
			return err
		}
	}
	return nil
}

// applyMigration applies m unless it was applied already. The version is
// read inside the write transaction, so two processes starting at once apply
// each migration once.
func applyMigration(ctx context.Context, db *sql.DB, m migration, known int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration %s: %w", m.name, err)
	}
	defer tx.Rollback()

	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if current > known {
		return fmt.Errorf("database schema version %d is newer than this binary (%d); upgrade countersign", current, known)
	}
	if current >= m.version {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("apply migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.version, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("record migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration %s: %w", m.name, err)
	}
	return nil
}

// schemaVersion returns the highest applied migration, 0 for none.
func schemaVersion(ctx context.Context, q querier) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
