package postgres

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/storetest"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// openTest opens a store on url and closes it when t ends.
func openTest(t *testing.T, url string) *DB {
	t.Helper()
	db, err := Open(t.Context(), url, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return db
}

// Migrated hands out schemas at the newest version, taken back reset
// after each test (see pgtest.Pool): the tests that are not about
// migrating, those of package postgres_test too, use them and skip the
// cost of the migrations. TestMain closes it.
var Migrated = pgtest.NewPool(func(ctx context.Context, url string) error {
	db, err := Open(ctx, url, nil)
	if err != nil {
		return err
	}
	return db.Close()
})

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) countersign.Store {
		return openTest(t, Migrated.SchemaURL(t))
	})
}

// exec runs a statement on the store's own schema, as someone with access
// to the database would.
func exec(t *testing.T, db *DB, query string, args ...any) {
	t.Helper()
	if _, err := db.pool.Exec(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// seed stores an account, a key and n requests, each with its audit entry.
func seed(t *testing.T, db *DB, n int) (*countersign.Account, *countersign.AgentKey) {
	t.Helper()
	ctx := t.Context()
	acc := &countersign.Account{Name: "acme", CreatedAt: storetest.Base}
	if err := db.CreateAccount(ctx, acc); err != nil {
		t.Fatal(err)
	}
	key := &countersign.AgentKey{AccountID: acc.ID, Name: "laptop", Hash: "h", CreatedAt: storetest.Base}
	if err := db.CreateAgentKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := &countersign.Request{
			AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: string(rune('a' + i)), PreviewHash: "p",
			Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Hour),
		}
		_, _, err := db.CreateRequest(ctx, r, 0, storetest.Base.Add(time.Duration(i)), countersign.AuditEvent{Event: "created", Actor: "key:" + key.ID, Detail: "{}"})
		if err != nil {
			t.Fatal(err)
		}
	}
	return acc, key
}

func TestReopenKeepsData(t *testing.T) {
	url := Migrated.SchemaURL(t)
	db, err := Open(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, db, 3)
	db.Close()

	db = openTest(t, url)
	acc, err := db.AccountByName(t.Context(), "acme")
	if err != nil {
		t.Fatalf("AccountByName after reopening: %v", err)
	}
	reqs, err := db.Requests(t.Context(), countersign.RequestFilter{AccountID: acc.ID})
	if err != nil || len(reqs) != 3 {
		t.Fatalf("Requests after reopening: %d, %v; want 3", len(reqs), err)
	}
	if problems, n := storetest.Verify(t, db); len(problems) != 0 || n != 3 {
		t.Errorf("audit after reopening: %d entries, problems %v", n, problems)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	url := Migrated.SchemaURL(t)
	db := openTest(t, url)
	known := Latest()
	exec(t, db, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, 0)`, known+1)

	_, err := Open(t.Context(), url, nil)
	want := fmt.Sprintf("database schema version %d is newer than this binary (%d); upgrade countersign", known+1, known)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open of a newer database: %v, want an error containing %q", err, want)
	}
	// A newer binary may migrate between Open's first read and the lock:
	// the check under the lock refuses too.
	if err := applyMigration(t.Context(), db.pool, migrations()[0], known); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("migration under the lock of a newer database: %v, want an error containing %q", err, want)
	}
}

// TestMigrationsResumed: a schema an older binary migrated part of the way
// gets the rest of the migrations when it is opened.
func TestMigrationsResumed(t *testing.T) {
	url := pgtest.SchemaURL(t)
	pool, err := pgxpool.New(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	ms := migrations()
	older := ms[len(ms)-3]
	for _, m := range ms[:len(ms)-2] {
		if err := applyMigration(t.Context(), pool, m, older.Version); err != nil {
			t.Fatal(err)
		}
	}
	pool.Close()

	db := openTest(t, url)
	var count, max int
	if err := db.pool.QueryRow(t.Context(), `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&count, &max); err != nil {
		t.Fatal(err)
	}
	if count != len(ms) || max != Latest() {
		t.Errorf("schema_migrations: %d rows up to %d, want %d up to %d", count, max, len(ms), Latest())
	}
}

// TestMigrationsBesideAnotherSchema: the store's schema shares its
// search_path with another application's schema, which has a
// schema_migrations table of its own, at this binary's version or far
// beyond it. The store migrates its own schema all the same.
func TestMigrationsBesideAnotherSchema(t *testing.T) {
	for _, version := range []int{Latest(), 20240517120000} {
		t.Run(fmt.Sprint(version), func(t *testing.T) {
			own, other := pgtest.SchemaURL(t), pgtest.SchemaURL(t)
			pgtest.ExecURL(t, other, `CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY); INSERT INTO schema_migrations VALUES (`+fmt.Sprint(version)+`)`)
			u, err := url.Parse(own)
			if err != nil {
				t.Skipf("COUNTERSIGN_TEST_POSTGRES is not a URL: %v", err)
			}
			q := u.Query()
			q.Set("search_path", searchPath(t, own)+","+searchPath(t, other))
			u.RawQuery = q.Encode()

			db := openTest(t, u.String())
			var count, max int
			if err := db.pool.QueryRow(t.Context(), `SELECT COUNT(*), MAX(version) FROM `+searchPath(t, own)+`.schema_migrations`).Scan(&count, &max); err != nil {
				t.Fatal(err)
			}
			if count != len(migrations()) || max != Latest() {
				t.Fatalf("own schema_migrations: %d rows up to %d, want %d up to %d", count, max, len(migrations()), Latest())
			}
			if err := db.CreateAccount(t.Context(), &countersign.Account{Name: "acme", CreatedAt: storetest.Base}); err != nil {
				t.Fatalf("CreateAccount: %v", err)
			}
		})
	}
}

// TestReadOnlyServerRefused: Open of an up-to-date schema on a server that
// takes no writes (a standby, default_transaction_read_only) fails at
// once, rather than opening a store whose every write fails.
func TestReadOnlyServerRefused(t *testing.T) {
	base := Migrated.SchemaURL(t)
	u := base + "&default_transaction_read_only=on"
	if !strings.Contains(base, "?") {
		u = base + " default_transaction_read_only=on"
	}
	db, err := Open(t.Context(), u, nil)
	if err == nil {
		db.Close()
		t.Fatal("Open on a read-only server succeeded")
	}
	if !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("Open on a read-only server: %v, want a read-only error", err)
	}
}

// searchPath returns the schema of a URL that pgtest made.
func searchPath(t *testing.T, url string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var s string
	if err := conn.QueryRow(t.Context(), `SELECT current_schema()`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMigrationsTogether opens the same empty schema from several
// processes' worth of stores at once, as replicas starting together do:
// the advisory lock lets each migration apply once.
func TestMigrationsTogether(t *testing.T) {
	url := pgtest.SchemaURL(t)
	const n = 6
	errs := make(chan error, n)
	dbs := make(chan *DB, n)
	for range n {
		go func() {
			db, err := Open(t.Context(), url, nil)
			errs <- err
			dbs <- db
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("Open at the same time: %v", err)
		}
		if db := <-dbs; db != nil {
			t.Cleanup(func() { db.Close() })
		}
	}
	db := openTest(t, url)
	var count, max int
	if err := db.pool.QueryRow(t.Context(), `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&count, &max); err != nil {
		t.Fatal(err)
	}
	if ms := migrations(); count != len(ms) || max != Latest() {
		t.Errorf("schema_migrations: %d rows up to %d, want %d up to %d", count, max, len(ms), Latest())
	}
	if v, err := db.SchemaVersion(t.Context()); err != nil || v != Latest() {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, Latest())
	}
}

func TestAuditTamper(t *testing.T) {
	tests := []struct {
		name  string
		query string
		want  string
	}{
		{"changed detail", `UPDATE audit_log SET detail = '{"x":1}' WHERE seq = 2`, "was changed after it was written"},
		{"deleted middle row", `DELETE FROM audit_log WHERE seq = 2`, "are missing"},
		{"deleted last row", `DELETE FROM audit_log WHERE seq = 4`, "recorded head is entry 4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openTest(t, Migrated.SchemaURL(t))
			seed(t, db, 4)
			if problems, _ := storetest.Verify(t, db); len(problems) != 0 {
				t.Fatalf("before tampering: %v", problems)
			}
			exec(t, db, tt.query)
			problems, _ := storetest.Verify(t, db)
			found := false
			for _, p := range problems {
				found = found || strings.Contains(p.Problem, tt.want)
			}
			if !found {
				t.Errorf("problems %v, want one saying %q", problems, tt.want)
			}
		})
	}
}

// TestNULText: PostgreSQL text cannot hold a NUL character, which SQLite
// stores. A lookup by such a value finds nothing, as it would there; a
// write of one is refused as invalid input, not as an internal error.
func TestNULText(t *testing.T) {
	db := openTest(t, Migrated.SchemaURL(t))
	acc, key := seed(t, db, 0)
	ctx := t.Context()
	_, err := db.Request(ctx, "req_\x00")
	if countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("Request with a NUL: %v, want ENOTFOUND", err)
	}
	_, _, err = db.SessionByHash(ctx, "\x00", storetest.Base)
	if countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("SessionByHash with a NUL: %v, want ENOTFOUND", err)
	}
	r := &countersign.Request{
		AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
		Kind: countersign.KindGeneric, Action: "deploy", Preview: "a\x00b", ArgsHash: "x", PreviewHash: "p",
		Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Hour),
	}
	_, _, err = db.CreateRequest(ctx, r, 0, storetest.Base, countersign.AuditEvent{Event: "created", Actor: "key:" + key.ID, Detail: "{}"})
	if countersign.ErrorCode(err) != countersign.EINVALID {
		t.Errorf("CreateRequest with a NUL in the preview: %v, want EINVALID", err)
	}
}

// TestLostConnectionRetried: a read or a transaction on a connection the
// server dropped (as after a restart) runs again on a fresh one instead of
// failing.
func TestLostConnectionRetried(t *testing.T) {
	db := openTest(t, Migrated.SchemaURL(t))
	acc, key := seed(t, db, 1)
	ctx := t.Context()
	var created *countersign.Request
	for _, what := range []string{"read", "write", "request", "decision"} {
		// Kill every connection of the pool while it holds them idle.
		exec(t, db, `SELECT 1`)
		terminatePool(t, db)
		var err error
		switch what {
		case "read":
			_, err = db.Account(ctx, acc.ID)
		case "write":
			err = db.CreateAccount(ctx, &countersign.Account{Name: "after-" + what, CreatedAt: storetest.Base})
		case "decision":
			_, err = db.Transition(ctx, countersign.Transition{ID: created.ID, From: []countersign.Status{countersign.StatusPending},
				To: countersign.StatusDenied, Now: storetest.Base}, countersign.AuditEvent{Event: "denied", Actor: "a", Detail: "{}"})
		case "request":
			created, _, err = db.CreateRequest(ctx, &countersign.Request{
				AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
				Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: "after", PreviewHash: "p",
				Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Hour),
			}, 0, storetest.Base, countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"})
		}
		if err != nil {
			t.Errorf("%s after the connections were terminated: %v", what, err)
		}
	}
}

// terminatePool ends the server side of every idle connection of db's pool.
func terminatePool(t *testing.T, db *DB) {
	t.Helper()
	var pids []uint32
	for _, c := range db.pool.AcquireAllIdle(t.Context()) {
		pids = append(pids, c.Conn().PgConn().PID())
		c.Release()
	}
	for _, pid := range pids {
		pgtest.Exec(t, `SELECT pg_terminate_backend($1)`, int(pid))
	}
	// pg_terminate_backend returns before the backend has gone.
	if !testutil.Wait(func() bool {
		var n int
		pgtest.Scan(t, `SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ANY($1)`, []any{pids}, &n)
		return n == 0
	}, testutil.EventuallyWithin) {
		t.Fatalf("backends %v still alive", pids)
	}
}

// TestAuditHashInDatabase: the database computes each entry's hash (so that
// a transaction appends and commits in one round trip); it must be the
// hash countersign.AuditEntry.ComputeHash makes, for any text.
func TestAuditHashInDatabase(t *testing.T) {
	db := openTest(t, Migrated.SchemaURL(t))
	acc, key := seed(t, db, 0)
	ctx := t.Context()
	for i, detail := range []string{"", "{}", `{"text":"ünïcode ✓ 日本語 🙂"}`, "a:b:c", strings.Repeat("x", 5000), "\n\\ 'quoted' \"double\""} {
		r := &countersign.Request{
			AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: fmt.Sprint(i), PreviewHash: "p",
			Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Hour),
		}
		at := storetest.Base.Add(time.Duration(i)*time.Second + 123)
		if _, _, err := db.CreateRequest(ctx, r, 0, at, countersign.AuditEvent{Event: "created", Actor: "approver:zoë", Detail: detail}); err != nil {
			t.Fatal(err)
		}
	}
	if problems, n := storetest.Verify(t, db); len(problems) != 0 || n != 6 {
		t.Fatalf("the chain the database wrote: %d entries, problems %v", n, problems)
	}
	entries, err := db.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Hash != e.ComputeHash() || len(e.Hash) != 64 {
			t.Errorf("entry %d: hash %s, want %s", e.Seq, e.Hash, e.ComputeHash())
		}
	}
}
