package postgres

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
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

// TestGenericPlansOfNewStore: the plans a prepared statement keeps, made
// while the requests table has no statistics (a new store, until
// autovacuum analyses it), reach the request a decision or a consumption
// changes by its primary key, and look for a new request's twin among
// the key's live requests only: never through an index of the account,
// which would read every request of the account on each call.
func TestGenericPlansOfNewStore(t *testing.T) {
	tr := &tracer{seen: map[string][]any{}}
	db, err := Open(t.Context(), pgtest.SchemaURL(t), nil, func(o *options) { o.tracer = tr })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tr.on.Store(true)
	acc, key := seed(t, db, 1)
	got, err := db.Requests(t.Context(), countersign.RequestFilter{AccountID: acc.ID, Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("Requests = %v, %v", got, err)
	}
	ev := countersign.AuditEvent{Event: "x", Actor: "a", Detail: "{}"}
	if _, err := db.Transition(t.Context(), countersign.Transition{ID: got[0].ID, AccountID: acc.ID, From: []countersign.Status{countersign.StatusPending},
		To: countersign.StatusApproved, Now: storetest.Base, DecidedBy: "a"}, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Transition(t.Context(), countersign.Transition{ID: got[0].ID, KeyID: key.ID, From: []countersign.Status{countersign.StatusApproved},
		To: countersign.StatusConsumed, Now: storetest.Base}, ev); err != nil {
		t.Fatal(err)
	}
	tr.on.Store(false)

	conn, err := db.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(t.Context(), `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.WithoutCancel(t.Context()), `RESET plan_cache_mode`)
	var updates, inserts int
	for q := range tr.seen {
		var want string
		switch trimmed := strings.TrimSpace(q); {
		case strings.HasPrefix(trimmed, "UPDATE requests SET status = $1"):
			want, updates = "requests_pkey", updates+1
		case strings.HasPrefix(trimmed, "INSERT INTO requests") && strings.Contains(q, "NOT EXISTS"):
			want, inserts = "requests_live_binding", inserts+1
		default:
			continue
		}
		sd, err := conn.Conn().Prepare(t.Context(), "generic_plan", q)
		if err != nil {
			t.Fatalf("prepare %s: %v", q, err)
		}
		nulls := strings.TrimSuffix(strings.Repeat("NULL, ", len(sd.ParamOIDs)), ", ")
		rows, err := conn.Query(t.Context(), `EXPLAIN EXECUTE generic_plan(`+nulls+`)`)
		if err != nil {
			t.Fatalf("explain %s: %v", q, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.Conn().Deallocate(t.Context(), "generic_plan"); err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		for _, m := range regexp.MustCompile(`using (requests_\w+)`).FindAllStringSubmatch(plan, -1) {
			if m[1] != want && !(want == "requests_live_binding" && m[1] == "requests_account_pending") {
				t.Errorf("the generic plan reads requests by %s, want %s:\n%s\nplan:\n%s", m[1], want, q, plan)
			}
		}
		if strings.Count(plan, "using requests_account_pending") > 1 {
			t.Errorf("the generic plan reads an account's pending requests more than once (for the limit):\n%s\nplan:\n%s", q, plan)
		}
		if !strings.Contains(plan, want) {
			t.Errorf("the generic plan does not use %s:\n%s\nplan:\n%s", want, q, plan)
		}
	}
	if updates != 2 || inserts != 1 {
		t.Errorf("%d changes of status and %d creates seen, want 2 and 1", updates, inserts)
	}
}
