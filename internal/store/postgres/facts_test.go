package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/storetest"
)

// factsMigration is the migration that adds the typed facts of a request.
const factsMigration = 14

// TestOldRequestsFacts: requests stored before the typed facts get them
// from what their reasons said, failing closed (see the SQLite store's
// test of the same name).
func TestOldRequestsFacts(t *testing.T) {
	url := pgtest.SchemaURL(t)
	db := openTest(t, url)
	check := storetest.OldRequests(t, db)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for _, m := range migrations() {
		if m.Version != factsMigration {
			continue
		}
		if _, err := pool.Exec(t.Context(), `ALTER TABLE requests DROP COLUMN tier, DROP COLUMN protected`); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(t.Context(), m.SQL); err != nil {
			t.Fatal(err)
		}
	}
	check(t, openTest(t, url))
}
