package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/migrate"
	"github.com/countersign/countersign/internal/store/sqlite/engine/enginetest"
	"github.com/countersign/countersign/internal/store/storetest"
)

func openTest(t *testing.T, path string, opts ...Option) *DB {
	t.Helper()
	db, err := Open(t.Context(), path, opts...)
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

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) countersign.Store {
		return openTest(t, filepath.Join(t.TempDir(), "countersign.db"))
	})
}

// rawDB opens the file beside the store, as an attacker with the file
// would.
func rawDB(t *testing.T, path string) *sql.DB { return enginetest.RawDB(t, path) }

func exec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// seed stores an account, a key and n requests, each with its audit entry.
func seed(t *testing.T, db *DB, n int) {
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
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "countersign.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, db, 3)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, path)
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
	path := filepath.Join(t.TempDir(), "countersign.db")
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	known := migrate.Latest(migrations())
	exec(t, rawDB(t, path), `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, known+1)

	_, err = Open(t.Context(), path)
	want := fmt.Sprintf("database schema version %d is newer than this binary (%d); upgrade countersign", known+1, known)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open of a newer database: %v, want an error containing %q", err, want)
	}
}

// TestStoredVersion: the version is read without opening the store, from
// the write-ahead log of a store open in another connection, and from the
// file alone once it is closed, making no file beside it.
func TestStoredVersion(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "countersign.db")
	if _, err := StoredVersion(t.Context(), path); err == nil {
		t.Fatal("StoredVersion of a missing file: no error")
	}
	db, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	known := Latest()
	if _, err := db.configExec(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, known+1); err != nil {
		t.Fatal(err)
	}
	if v, err := StoredVersion(t.Context(), path); err != nil || v != known+1 {
		t.Fatalf("StoredVersion of an open store = %d, %v; want %d", v, err, known+1)
	}
	db.Close()
	names := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	before := names()
	if v, err := StoredVersion(t.Context(), path); err != nil || v != known+1 {
		t.Fatalf("StoredVersion of a closed store = %d, %v; want %d", v, err, known+1)
	}
	if after := names(); !slices.Equal(before, after) {
		t.Fatalf("StoredVersion changed the directory from %v to %v", before, after)
	}

	other := filepath.Join(dir, "other.db")
	exec(t, rawDB(t, other), `CREATE TABLE t (x INTEGER)`)
	if v, err := StoredVersion(t.Context(), other); err != nil || v != 0 {
		t.Fatalf("StoredVersion of a file without schema_migrations = %d, %v; want 0", v, err)
	}
}

func TestMigrationsRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "countersign.db")
	openTest(t, path)
	db := openTest(t, path) // a second open applies nothing twice
	var n, max int
	if err := db.read.QueryRowContext(t.Context(), `SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if ms := migrations(); n != len(ms) || max != migrate.Latest(ms) {
		t.Errorf("schema_migrations: %d rows up to %d, want %d up to %d", n, max, len(ms), migrate.Latest(ms))
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
			path := filepath.Join(t.TempDir(), "countersign.db")
			db := openTest(t, path)
			seed(t, db, 4)
			if problems, _ := storetest.Verify(t, db); len(problems) != 0 {
				t.Fatalf("before tampering: %v", problems)
			}
			exec(t, rawDB(t, path), tt.query)
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

// What CreateRequest and Transition return without reading the row back
// is exactly what reading it back gives.
func TestReturnedRequestIsTheStoredOne(t *testing.T) {
	db := openTest(t, filepath.Join(t.TempDir(), "countersign.db"))
	ctx := t.Context()
	seed(t, db, 0)
	key, err := db.AgentKeyByHash(ctx, "h")
	if err != nil {
		t.Fatal(err)
	}
	// A local time with a monotonic reading, JSON with spaces, an empty
	// list and a link, none of which the stored row keeps as given.
	now := time.Now().In(time.FixedZone("X", 3600))
	for i, r := range []*countersign.Request{
		{
			AccountID: key.AccountID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindRm, Action: "rm", Arguments: json.RawMessage(`{"argv":["-rf","x"]}`), ArgsHash: "a1",
			Preview: "rm -rf x", PreviewHash: "p", RiskReasons: []string{}, Status: countersign.StatusPending,
			Context: countersign.RequestContext{User: "ada", SessionID: "s"}, ExpiresAt: now.Add(time.Hour),
			Seed: json.RawMessage(`{"a": 1}`), SeedID: "delete:x",
			Links: []countersign.Link{{Hash: "lh", Action: "approve"}},
		},
		{
			AccountID: key.AccountID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: "a2", PreviewHash: "p",
			Status: countersign.StatusPending, ExpiresAt: now.Add(time.Hour),
		},
	} {
		got, created, err := db.CreateRequest(ctx, r, 0, now, countersign.AuditEvent{Event: "created", Actor: "key", Detail: "{}"})
		if err != nil || !created {
			t.Fatalf("create %d: %v, %v", i, created, err)
		}
		stored, err := getRequest(ctx, db.read, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, stored) {
			t.Errorf("create %d returned\n  %#v\nthe row reads\n  %#v", i, got, stored)
		}
		if kept, err := db.Request(ctx, got.ID); err != nil || !reflect.DeepEqual(kept, stored) {
			t.Errorf("create %d: the request kept in memory\n  %#v (%v)\nthe row reads\n  %#v", i, kept, err, stored)
		}
		decided, err := db.Transition(ctx, countersign.Transition{
			ID: got.ID, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusApproved,
			Now: now, DecidedBy: "admin", Window: &countersign.AutoApproveWindow{Until: now.Add(time.Minute)},
		}, countersign.AuditEvent{Event: "approved", Actor: "approver:admin", Detail: "{}"})
		if err != nil {
			t.Fatal(err)
		}
		stored, err = getRequest(ctx, db.read, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(decided, stored) || decided.Status != countersign.StatusApproved || decided.AutoApproveUntil.IsZero() {
			t.Errorf("transition %d returned\n  %#v\nthe row reads\n  %#v", i, decided, stored)
		}
		if kept, err := db.Request(ctx, got.ID); err != nil || !reflect.DeepEqual(kept, stored) {
			t.Errorf("transition %d: the request kept in memory\n  %#v (%v)\nthe row reads\n  %#v", i, kept, err, stored)
		}
	}
}
