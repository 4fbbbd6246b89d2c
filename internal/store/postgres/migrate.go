package postgres

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/countersign/countersign/internal/store/migrate"

	"github.com/jackc/pgx/v5"
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

// migrations returns the embedded migrations in order.
func migrations() []migrate.Migration {
	return migrate.MustLoad(migrationFS, "postgres")
}

// Latest returns the newest schema version this binary knows.
func Latest() int {
	ms := migrations()
	return migrate.Latest(ms)
}

// applyMigrations brings the schema up to the newest migration this
// binary knows, each migration in its own transaction, and refuses a
// database that a newer binary has already migrated further.
func applyMigrations(ctx context.Context, pool *pgxpool.Pool) error {
	ms := migrations()
	known := migrate.Latest(ms)
	// Every start but the first after an upgrade finds the schema up to
	// date: a read says so, without the lock. A version is recorded in
	// the transaction of its migration, and migrations apply in order, so
	// a schema at the newest version has them all. A new database (no
	// schema_migrations yet) and one to migrate go the way of the lock.
	// The table is looked for in the schema the migrations write to, not
	// along the search_path, where another application's
	// schema_migrations may stand. A read-only server goes the way of the
	// lock too, and is refused there as it always was, rather than opened
	// for writes that would all fail.
	var exists, readOnly bool
	if err := pool.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'schema_migrations'),
		current_setting('transaction_read_only') = 'on'`).Scan(&exists, &readOnly); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if exists && !readOnly {
		current, err := schemaVersion(ctx, pool)
		if err != nil {
			return err
		}
		if err := migrate.CheckVersion(current, known); err != nil {
			return err
		}
		if current == known {
			return nil
		}
	}
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
func applyMigration(ctx context.Context, pool *pgxpool.Pool, m migrate.Migration, known int) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin migration %s: %w", m.Name, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		return fmt.Errorf("lock for migration %s: %w", m.Name, err)
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
	if err := migrate.CheckVersion(current, known); err != nil {
		return err
	}
	if current >= m.Version {
		return tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, m.SQL); err != nil {
		return fmt.Errorf("apply migration %s: %w", m.Name, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
		m.Version, time.Now().UnixNano()); err != nil {
		return fmt.Errorf("record migration %s: %w", m.Name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit migration %s: %w", m.Name, err)
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

// StoredVersion reads the schema version of the database at url without
// opening the store: no migration is applied, no lock taken, and the one
// connection it makes is read-only (default_transaction_read_only), so
// that nothing is written. A database without the store's
// schema_migrations, looked for where the migrations write it, is at
// version 0.
func StoredVersion(ctx context.Context, url string) (int, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx redacts the password from the message.
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	cc := cfg.ConnConfig
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "countersign"
	}
	cc.RuntimeParams["default_transaction_read_only"] = "on"
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return 0, fmt.Errorf("read schema version: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'schema_migrations')`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	return schemaVersion(ctx, conn)
}
