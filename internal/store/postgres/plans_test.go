package postgres

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
	"github.com/jackc/pgx/v5"
)

// tracer keeps every statement the store runs, with its arguments, while
// on is set.
type tracer struct {
	on   atomic.Bool
	mu   sync.Mutex
	seen map[string][]any
}

func (tr *tracer) keep(sql string, args []any) {
	if tr.on.Load() {
		tr.mu.Lock()
		tr.seen[sql] = args
		tr.mu.Unlock()
	}
}

func (tr *tracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.keep(d.SQL, d.Args)
	return ctx
}
func (tr *tracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (tr *tracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (tr *tracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	tr.keep(d.SQL, d.Args)
}
func (tr *tracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// seqScan matches a sequential scan of a table that grows with history,
// and sortNode a sort, which an index in the right order spares.
var (
	seqScan  = regexp.MustCompile(`Seq Scan on (requests|links|outbox|auto_approve_windows|coverages|audit_log)\b`)
	sortNode = regexp.MustCompile(`(?m)^\s*(->\s*)?(Incremental )?Sort\b`)
)

// TestHotQueryPlans: every statement the hot paths run (storetest.HotPaths)
// reaches the tables that grow with history through an index, with
// sequential scans and sorts priced out as PostgreSQL's planner settings
// allow (a small table would otherwise be scanned, rightly); the pending
// list and the lookup by reference code walk their own index in order.
func TestHotQueryPlans(t *testing.T) {
	tr := &tracer{seen: map[string][]any{}}
	var db *DB
	storetest.HotPaths(t, func(t *testing.T) countersign.Store {
		var err error
		db, err = Open(t.Context(), Migrated.SchemaURL(t), nil, func(o *options) { o.tracer = tr })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}, func() { tr.on.Store(true) })
	tr.on.Store(false)

	lists, oldest := 0, 0
	for q, args := range tr.seen {
		if !strings.Contains(q, "requests") && !strings.Contains(q, "outbox") && !strings.Contains(q, "auto_approve_windows") {
			continue
		}
		// Inserts of values and bare announcements read nothing; an
		// INSERT … SELECT (a create's twin check and limit, in one
		// statement) and an UPDATE that announces from its RETURNING do.
		trimmed := strings.TrimSpace(q)
		if (strings.HasPrefix(trimmed, "INSERT") && !strings.Contains(q, "SELECT")) ||
			strings.Contains(q, "pg_advisory") || strings.HasPrefix(trimmed, "SELECT pg_notify") {
			continue
		}
		plan := explainPG(t, db, q, args)
		if m := seqScan.FindString(plan); m != "" {
			t.Errorf("a hot statement scans a table whole (%s):\n%s\nplan:\n%s", m, q, plan)
		}
		switch {
		case strings.Contains(q, "status = $2") && strings.Contains(q, "ORDER BY created_at DESC, id DESC") && !strings.Contains(q, "seed_id <>"):
			lists++
			if !strings.Contains(plan, "requests_account_status_created") || sortNode.MatchString(plan) {
				t.Errorf("the pending list does not walk the account's pending requests in order:\n%s\nplan:\n%s", q, plan)
			}
		case strings.Contains(q, "FROM outbox WHERE state = 'pending' ORDER BY created_at LIMIT 1"):
			oldest++
			if !strings.Contains(plan, "outbox_pending_created") || !strings.Contains(plan, "Limit") {
				t.Errorf("the oldest undelivered notification is not the first entry of its index:\n%s\nplan:\n%s", q, plan)
			}
		case strings.Contains(q, "reference = $2"):
			if !strings.Contains(plan, "requests_account_reference") {
				t.Errorf("the lookup by reference code does not search the code's entries:\n%s\nplan:\n%s", q, plan)
			}
		}
	}
	if lists == 0 || oldest == 0 {
		t.Errorf("the pending list (%d) or the store's stats (%d) were not among the %d statements run", lists, oldest, len(tr.seen))
	}
}

// explainPG returns the plan of q with args, in a transaction that prices
// out sequential scans and sorts and is rolled back (EXPLAIN of a change
// does not run it, but the transaction keeps the settings to itself).
func explainPG(t *testing.T, db *DB, q string, args []any) string {
	t.Helper()
	ctx := t.Context()
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_sort = off`); err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(ctx, "EXPLAIN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		b.WriteString(line + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
