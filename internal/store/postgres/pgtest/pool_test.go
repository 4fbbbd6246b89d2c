package pgtest

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
)

// setupSQL is what the pool's setup makes of a schema in these tests: rows
// the setup itself writes, a sequence it moved, a foreign key and a
// trigger.
const setupSQL = `
CREATE TABLE parents (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE children (id TEXT PRIMARY KEY, parent BIGINT NOT NULL REFERENCES parents (id), note TEXT);
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.name := NEW.name || '!'; RETURN NEW; END $$;
CREATE TRIGGER parents_touch BEFORE INSERT ON parents FOR EACH ROW EXECUTE FUNCTION touch();
INSERT INTO parents (name) VALUES ('seed');
INSERT INTO children VALUES ('c', 1);
`

func newTestPool() *Pool {
	return NewPool(func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, setupSQL)
		return err
	})
}

// fakeTB is a test whose end and failure the test decides.
type fakeTB struct {
	testing.TB
	failed   bool
	cleanups []func()
}

// newFake returns a fake test inside t; it ends with t if not before.
func newFake(t *testing.T, failed bool) *fakeTB {
	f := &fakeTB{TB: t, failed: failed}
	t.Cleanup(f.end)
	return f
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Failed() bool      { return f.failed }

func (f *fakeTB) end() {
	for len(f.cleanups) > 0 {
		fn := f.cleanups[len(f.cleanups)-1]
		f.cleanups = f.cleanups[:len(f.cleanups)-1]
		fn()
	}
}

func schemaOf(t *testing.T, u string) string {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return parsed.Query().Get("search_path")
}

func schemaExists(t *testing.T, schema string) bool {
	t.Helper()
	var ok bool
	Scan(t, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, []any{schema}, &ok)
	return ok
}

// state reads what a test could have changed in the rows.
func state(t *testing.T, u string) (parents, children string, next int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT
		(SELECT string_agg(id || ':' || name, ',' ORDER BY id) FROM parents),
		(SELECT string_agg(id || ':' || parent, ',' ORDER BY id) FROM children),
		nextval('parents_id_seq')`).Scan(&parents, &children, &next)
	if err != nil {
		t.Fatal(err)
	}
	return parents, children, next
}

// TestPoolReset: a schema is handed out as the setup left it, whatever the
// test before did to its rows and sequences.
func TestPoolReset(t *testing.T) {
	p := newTestPool()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	first := newFake(t, false)
	u := p.SchemaURL(first)
	schema := schemaOf(t, u)
	if parents, children, next := state(t, u); parents != "1:seed!" || children != "c:1" || next != 2 {
		t.Fatalf("after the setup: parents %q, children %q, next id %d", parents, children, next)
	}
	ExecURL(t, u, `DELETE FROM children; INSERT INTO parents (name) VALUES ('a'), ('b'); INSERT INTO children VALUES ('x', 3);
		UPDATE parents SET name = 'changed' WHERE id = 1`)
	// The pool's own connection is lost, as when a test restarts the
	// server: the reset takes a new one.
	var n int
	Scan(t, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND strpos(query, $1) > 0`,
		[]any{schema}, &n)
	if n != 1 {
		t.Fatalf("terminated %d connections of the pool, want 1", n)
	}
	first.end()

	second := newFake(t, false)
	u = p.SchemaURL(second)
	if got := schemaOf(t, u); got != schema {
		t.Fatalf("the second test got schema %s, want %s back", got, schema)
	}
	// The sequence too is back: the first test's nextval are undone.
	if parents, children, next := state(t, u); parents != "1:seed!" || children != "c:1" || next != 2 {
		t.Fatalf("after the reset: parents %q, children %q, next id %d; want them as after the setup", parents, children, next)
	}
	second.end()

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if schemaExists(t, schema) {
		t.Errorf("schema %s outlived the pool's Close", schema)
	}
}

// TestPoolDrops: a schema whose test failed, or whose shape the test
// changed, is dropped, not handed out again.
func TestPoolDrops(t *testing.T) {
	tests := []struct {
		name   string
		sql    string
		failed bool
	}{
		{"failed", ``, true},
		{"column added", `ALTER TABLE parents ADD COLUMN x INT`, false},
		{"column dropped and added back", `ALTER TABLE children DROP COLUMN note; ALTER TABLE children ADD COLUMN note TEXT`, false},
		{"column default", `ALTER TABLE parents ALTER COLUMN name SET DEFAULT 'x'`, false},
		{"column type", `ALTER TABLE children ALTER COLUMN id TYPE VARCHAR(10)`, false},
		{"not null dropped", `ALTER TABLE parents ALTER COLUMN name DROP NOT NULL`, false},
		{"table added", `CREATE TABLE more (x INT)`, false},
		{"table dropped", `DROP TABLE children`, false},
		{"index added", `CREATE INDEX parents_name ON parents (name)`, false},
		{"constraint dropped", `ALTER TABLE children DROP CONSTRAINT children_parent_fkey`, false},
		{"check added", `ALTER TABLE parents ADD CHECK (name <> '')`, false},
		{"trigger disabled", `ALTER TABLE parents DISABLE TRIGGER parents_touch`, false},
		{"foreign key disabled", `ALTER TABLE children DISABLE TRIGGER ALL`, false},
		{"function replaced", `CREATE OR REPLACE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$`, false},
		{"function added", `CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'`, false},
		{"type added", `CREATE TYPE mood AS ENUM ('ok')`, false},
		{"view added", `CREATE VIEW v AS SELECT id FROM parents`, false},
		{"privilege revoked", `REVOKE ALL ON parents FROM PUBLIC; GRANT SELECT ON parents TO PUBLIC`, false},
		{"row security", `ALTER TABLE parents ENABLE ROW LEVEL SECURITY`, false},
		{"sequence altered", `ALTER SEQUENCE parents_id_seq INCREMENT BY 5`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newTestPool()
			t.Cleanup(func() { p.Close() })
			tb := newFake(t, tt.failed)
			u := p.SchemaURL(tb)
			schema := schemaOf(t, u)
			if tt.sql != "" {
				ExecURL(t, u, tt.sql)
			}
			tb.end()
			if schemaExists(t, schema) {
				t.Errorf("schema %s was kept", schema)
			}
			next := newFake(t, false)
			if got := schemaOf(t, p.SchemaURL(next)); got == schema {
				t.Errorf("schema %s was handed out again", schema)
			}
			next.end()
		})
	}
}
