package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/countersign/countersign/internal/store/migrate"
	"github.com/countersign/countersign/internal/store/storetest"
)

// factsMigration is the migration that adds the typed facts of a request.
const factsMigration = 14

// migration returns the migration of a version.
func migration(t *testing.T, ms []migrate.Migration, version int) migrate.Migration {
	t.Helper()
	for _, m := range ms {
		if m.Version == version {
			return m
		}
	}
	t.Fatalf("no migration %d", version)
	return migrate.Migration{}
}

// TestOldRequestsFacts: requests stored before the typed facts get them
// from what their reasons said, failing closed: the gateway's commit and
// external calls their tier (and their reasons in words), a delete that
// named a protected path its protection, and any other MCP request an
// unknown tier.
func TestOldRequestsFacts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "countersign.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	check := storetest.OldRequests(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw := rawDB(t, path)
	exec(t, raw, `ALTER TABLE requests DROP COLUMN tier`)
	exec(t, raw, `ALTER TABLE requests DROP COLUMN protected`)
	exec(t, raw, migration(t, migrations(), factsMigration).SQL)
	check(t, openTest(t, path))
}
