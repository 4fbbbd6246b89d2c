package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/store/migrate"
)

// migrationFS holds the schema changes, one numbered file each. They are
// append-only: a released file is never edited, a change is a new file.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in order.
func migrations() []migrate.Migration {
	return migrate.MustLoad(migrationFS, "sqlite")
}

// applyMigrations brings the schema up to the newest migration this
// binary knows, each migration in its own transaction, and refuses a
// database that a newer binary has already migrated further.
func applyMigrations(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	ms := migrations()
	known := migrate.Latest(ms)
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
func applyMigration(ctx context.Context, db *sql.DB, m migrate.Migration, known int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration %s: %w", m.Name, err)
	}
	defer tx.Rollback()

	current, err := schemaVersion(ctx, tx)
	if err != nil {
		return err
	}
	if err := migrate.CheckVersion(current, known); err != nil {
		return err
	}
	if current >= m.Version {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("apply migration %s: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
		m.Version, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("record migration %s: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration %s: %w", m.Name, err)
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

// Latest returns the newest schema version this binary knows.
func Latest() int {
	return migrate.Latest(migrations())
}

// StoredVersion reads the schema version of the database file at path
// without opening the store: no migration is applied, and nothing is
// written. The file is opened read-only. When no write-ahead log is beside
// it (no process has it open, and the last one closed it cleanly), every
// commit is in the file itself, and it is read as immutable, so that
// SQLite makes no -wal or -shm file either; otherwise the log, which a
// running server may still hold commits in, is read too. A file without
// schema_migrations is at version 0.
func StoredVersion(ctx context.Context, path string) (int, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, err
	}
	q := url.Values{}
	q.Set("mode", "ro")
	if _, err := os.Lstat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
		q.Set("immutable", "1")
	}
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "query_only(1)")
	// A file: URI with the path escaped, as the engine's: a '?' or '#'
	// in a directory name is not the start of the parameters.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+esc+"?"+q.Encode())
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var exists bool
	if err := db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	return schemaVersion(ctx, db)
}
