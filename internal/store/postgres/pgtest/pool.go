package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A Pool hands out schemas that its setup (a store's migrations) brought to
// a known state, and takes each back when its test ends, reset to that
// state, for the next test: a test gets what a fresh schema and the setup
// would give it, without paying for the setup each time. A schema whose
// test failed, or whose shape the test changed (a table, column,
// constraint, index, trigger, function… added, dropped or altered), is
// dropped instead of taken back.
//
// Tests that need an empty schema (of migrations themselves, say) use
// SchemaURL. Call Close from TestMain once the tests have run.
type Pool struct {
	setup func(ctx context.Context, url string) error

	mu     sync.Mutex
	free   []*pooled
	closed bool
}

// pooled is a schema of a pool and its state right after the setup.
type pooled struct {
	schema string
	url    string
	// conn is the pool's own connection to the server, which resets the
	// schema; nil when it broke.
	conn *pgx.Conn
	// shape fingerprints the schema's catalog.
	shape string
	// reset is the statement that empties every table; rows are the rows
	// the setup left, as COPY text by table, and sequences the values it
	// left the sequences at.
	reset     string
	rows      map[string][]byte
	sequences map[string]sequenceState
}

type sequenceState struct {
	value  int64
	called bool
}

// NewPool returns a pool whose schemas setup prepares: it is given the
// URL of a new, empty schema, as SchemaURL returns it.
func NewPool(setup func(ctx context.Context, url string) error) *Pool {
	return &Pool{setup: setup}
}

// SchemaURL returns the URL of a schema as the pool's setup leaves it, with
// that schema as its search_path, and takes the schema back or drops it
// when t ends. Stores opened on the URL must be closed before the test ends
// (register their cleanup after this call). It skips or fails t when the
// server is unreachable.
func (p *Pool) SchemaURL(t testing.TB) string {
	t.Helper()
	require(t)
	s := p.take()
	if s == nil {
		var err error
		if s, err = p.create(); err != nil {
			t.Fatalf("prepare a schema: %v", err)
		}
	}
	t.Cleanup(func() {
		if !t.Failed() && s.restore() == nil && p.put(s) {
			return
		}
		s.close()
		Exec(t, "DROP SCHEMA "+pgx.Identifier{s.schema}.Sanitize()+" CASCADE")
	})
	return s.url
}

// Close drops the schemas the pool holds; a schema handed out later is
// dropped when its test ends.
func (p *Pool) Close() error {
	p.mu.Lock()
	free := p.free
	p.free, p.closed = nil, true
	p.mu.Unlock()
	if len(free) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var errs []error
	for _, s := range free {
		s.close()
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{s.schema}.Sanitize()+" CASCADE"); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Pool) take() *pooled {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		return s
	}
	return nil
}

// put takes s back, unless the pool is closed.
func (p *Pool) put(s *pooled) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.free = append(p.free, s)
	return true
}

// adminURL is the URL of the pool's own connections. Their commits need
// not wait for the disk: a test schema need not survive a crash.
func adminURL() string { return withParam(BaseURL(), "synchronous_commit", "off") }

// create makes a new schema, runs the setup on it and records its state.
func (p *Pool) create() (*pooled, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &pooled{schema: name("cs_test_")}
	s.url = schemaURL(s.schema)
	conn, err := pgx.Connect(ctx, adminURL())
	if err != nil {
		return nil, err
	}
	ident := pgx.Identifier{s.schema}.Sanitize()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		conn.Close(ctx)
		return nil, err
	}
	err = p.setup(ctx, s.url)
	if err != nil {
		err = fmt.Errorf("setup: %w", err)
	} else {
		err = s.record(ctx, conn)
	}
	if err != nil {
		conn.Exec(ctx, "DROP SCHEMA "+ident+" CASCADE")
		conn.Close(ctx)
		return nil, err
	}
	s.conn = conn
	return s, nil
}

// record notes the schema's shape, rows and sequences.
func (s *pooled) record(ctx context.Context, conn *pgx.Conn) error {
	var err error
	if s.shape, err = shape(ctx, conn, s.schema); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT relname, relkind = 'S' FROM pg_class
		WHERE relnamespace = $1::regnamespace AND relkind IN ('r', 'p', 'S') ORDER BY relname`, s.schema)
	if err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	var tables, sequences []string
	for rows.Next() {
		var name string
		var sequence bool
		if err := rows.Scan(&name, &sequence); err != nil {
			return err
		}
		if sequence {
			sequences = append(sequences, name)
		} else {
			tables = append(tables, name)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list tables: %w", err)
	}
	// The rows go back as they were, whatever their order: no trigger
	// (foreign keys' included) fires. This takes a superuser; for anyone
	// else the reset fails and the schema is dropped. DELETE, unlike
	// TRUNCATE, leaves the catalogs alone and takes a fraction of the
	// time.
	reset := []string{"SET LOCAL session_replication_role = replica"}
	s.rows = map[string][]byte{}
	for _, name := range tables {
		table := s.table(name)
		reset = append(reset, "DELETE FROM "+table)
		var buf bytes.Buffer
		if _, err := conn.PgConn().CopyTo(ctx, &buf, "COPY "+table+" TO STDOUT"); err != nil {
			return fmt.Errorf("copy %s: %w", table, err)
		}
		if buf.Len() > 0 {
			s.rows[table] = buf.Bytes()
		}
	}
	s.sequences = map[string]sequenceState{}
	for _, name := range sequences {
		seq := s.table(name)
		var st sequenceState
		if err := conn.QueryRow(ctx, "SELECT last_value, is_called FROM "+seq).Scan(&st.value, &st.called); err != nil {
			return fmt.Errorf("read %s: %w", seq, err)
		}
		s.sequences[seq] = st
	}
	s.reset = strings.Join(reset, "; ")
	return nil
}

func (s *pooled) table(name string) string { return pgx.Identifier{s.schema, name}.Sanitize() }

func (s *pooled) close() {
	if s.conn != nil {
		s.conn.Close(context.Background())
		s.conn = nil
	}
}

// errShapeChanged says a test altered a schema's catalog.
var errShapeChanged = errors.New("the schema's shape changed")

// restore brings the schema back to its state right after the setup. It
// refuses a schema whose shape changed. When the pool's connection broke
// (a test restarted the server, say), it tries once more on a new one.
func (s *pooled) restore() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s.conn != nil {
		err := s.restoreOn(ctx, s.conn)
		if err == nil || errors.Is(err, errShapeChanged) || !s.conn.IsClosed() {
			return err
		}
		s.close()
	}
	conn, err := pgx.Connect(ctx, adminURL())
	if err != nil {
		return err
	}
	s.conn = conn
	return s.restoreOn(ctx, conn)
}

func (s *pooled) restoreOn(ctx context.Context, conn *pgx.Conn) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	now, err := shape(ctx, conn, s.schema)
	if err != nil {
		return err
	}
	if now != s.shape {
		return errShapeChanged
	}
	if _, err := tx.Exec(ctx, s.reset); err != nil {
		return err
	}
	for table, rows := range s.rows {
		if _, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(rows), "COPY "+table+" FROM STDIN"); err != nil {
			return fmt.Errorf("restore %s: %w", table, err)
		}
	}
	for seq, st := range s.sequences {
		if _, err := tx.Exec(ctx, "SELECT setval($1::regclass, $2, $3)", seq, st.value, st.called); err != nil {
			return fmt.Errorf("restore %s: %w", seq, err)
		}
	}
	return tx.Commit(ctx)
}

// shapeSQL fingerprints what a test could change in a schema's catalog
// besides its rows: the objects in it, its relations and their columns,
// defaults, constraints, indexes, triggers, rules and policies, options
// and privileges, its functions and types. It finds them through the
// schema's dependents and the catalogs' indexes, not by scanning the
// catalogs, which tests creating and dropping schemas swell.
const shapeSQL = `WITH nsp AS (
	SELECT oid, nspacl, nspowner FROM pg_namespace WHERE nspname = $1
), objs AS (
	SELECT d.classid, d.objid FROM pg_depend d JOIN nsp ON d.refobjid = nsp.oid
	WHERE d.refclassid = 'pg_namespace'::regclass
), tabs AS (
	SELECT objid AS oid FROM objs WHERE classid = 'pg_class'::regclass
), rels AS (
	SELECT oid FROM tabs UNION ALL SELECT i.indexrelid FROM pg_index i JOIN tabs ON i.indrelid = tabs.oid
)
SELECT md5(COALESCE(string_agg(x, E'\n' ORDER BY x), '')) FROM (
	SELECT 'schema ' || COALESCE(nspacl::text, '') || ' ' || nspowner::regrole::text FROM nsp
	UNION ALL
	SELECT 'obj ' || pg_describe_object(classid, objid, 0) FROM objs
	UNION ALL
	SELECT 'rel ' || c.relname || ' ' || c.relkind::text || c.relpersistence::text || c.relrowsecurity || c.relforcerowsecurity
		|| c.relreplident::text || ' ' || c.relowner::regrole::text || ' ' || COALESCE(c.relacl::text, '')
		|| ' ' || COALESCE(array_to_string(c.reloptions, ','), '')
		|| ' ' || CASE WHEN c.relkind IN ('v', 'm') THEN pg_get_viewdef(c.oid) ELSE '' END
		FROM pg_class c JOIN rels ON c.oid = rels.oid
	UNION ALL
	SELECT 'col ' || c.relname || ' ' || a.attnum || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
		|| ' ' || a.attnotnull || a.attidentity::text || a.attgenerated::text || a.attcollation::regcollation::text
		|| ' ' || COALESCE(pg_get_expr(d.adbin, d.adrelid), '') || ' ' || COALESCE(a.attacl::text, '')
		FROM rels JOIN pg_class c ON c.oid = rels.oid JOIN pg_attribute a ON a.attrelid = rels.oid
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE a.attnum > 0 AND NOT a.attisdropped
	UNION ALL
	SELECT 'con ' || c.relname || ' ' || k.conname || ' ' || k.condeferrable || k.condeferred || k.convalidated
		|| ' ' || pg_get_constraintdef(k.oid)
		FROM tabs JOIN pg_class c ON c.oid = tabs.oid JOIN pg_constraint k ON k.conrelid = tabs.oid
	UNION ALL
	SELECT 'idx ' || pg_get_indexdef(i.indexrelid) || ' ' || i.indisvalid || i.indisready || i.indisreplident
		FROM tabs JOIN pg_index i ON i.indrelid = tabs.oid
	UNION ALL
	SELECT 'trg ' || c.relname || ' ' || t.tgname || ' ' || t.tgenabled::text || ' ' || pg_get_triggerdef(t.oid)
		FROM tabs JOIN pg_class c ON c.oid = tabs.oid JOIN pg_trigger t ON t.tgrelid = tabs.oid
	UNION ALL
	SELECT 'rule ' || c.relname || ' ' || r.rulename || ' ' || r.ev_enabled::text || ' ' || pg_get_ruledef(r.oid)
		FROM tabs JOIN pg_class c ON c.oid = tabs.oid JOIN pg_rewrite r ON r.ev_class = tabs.oid
	UNION ALL
	SELECT 'pol ' || c.relname || ' ' || p.polname || ' ' || p.polcmd::text || p.polpermissive || ' ' || p.polroles::text
		|| ' ' || COALESCE(pg_get_expr(p.polqual, p.polrelid), '') || ' ' || COALESCE(pg_get_expr(p.polwithcheck, p.polrelid), '')
		FROM tabs JOIN pg_class c ON c.oid = tabs.oid JOIN pg_policy p ON p.polrelid = tabs.oid
	UNION ALL
	SELECT 'seq ' || c.relname || ' ' || s.seqtypid::regtype::text || ' ' || s.seqstart || ' ' || s.seqincrement
		|| ' ' || s.seqmin || ' ' || s.seqmax || ' ' || s.seqcache || s.seqcycle
		FROM tabs JOIN pg_class c ON c.oid = tabs.oid JOIN pg_sequence s ON s.seqrelid = tabs.oid
	UNION ALL
	SELECT 'fn ' || p.oid::regprocedure::text || ' ' || p.prokind::text || p.provolatile::text || p.prosecdef
		|| ' ' || p.prorettype::regtype::text || ' ' || COALESCE(p.prosrc, '') || ' ' || COALESCE(array_to_string(p.proconfig, ','), '')
		|| ' ' || COALESCE(p.proacl::text, '')
		FROM objs JOIN pg_proc p ON objs.classid = 'pg_proc'::regclass AND p.oid = objs.objid
	UNION ALL
	SELECT 'type ' || t.typname || ' ' || t.typtype::text || ' ' || COALESCE((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
		FROM pg_enum e WHERE e.enumtypid = t.oid), '')
		FROM objs JOIN pg_type t ON objs.classid = 'pg_type'::regclass AND t.oid = objs.objid
) shape (x)`

// shape returns the fingerprint of the schema's catalog.
func shape(ctx context.Context, conn *pgx.Conn, schema string) (string, error) {
	var fp string
	if err := conn.QueryRow(ctx, shapeSQL, schema).Scan(&fp); err != nil {
		return "", fmt.Errorf("read the shape of schema %s: %w", schema, err)
	}
	return fp, nil
}
