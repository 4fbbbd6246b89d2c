package postgres

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
	"github.com/jackc/pgx/v5"
)

// batchRecorder keeps the statements of every batch the store sends, in
// order.
type batchRecorder struct {
	mu      sync.Mutex
	current map[*pgx.Conn][]string
	batches [][]string
}

func (r *batchRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (r *batchRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *batchRecorder) TraceBatchStart(ctx context.Context, c *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	r.mu.Lock()
	r.current[c] = nil
	r.mu.Unlock()
	return ctx
}
func (r *batchRecorder) TraceBatchQuery(_ context.Context, c *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.mu.Lock()
	r.current[c] = append(r.current[c], d.SQL)
	r.mu.Unlock()
}
func (r *batchRecorder) TraceBatchEnd(_ context.Context, c *pgx.Conn, _ pgx.TraceBatchEndData) {
	r.mu.Lock()
	r.batches = append(r.batches, r.current[c])
	delete(r.current, c)
	r.mu.Unlock()
}

// TestChangeWaitsForTheDisk: a change of a request commits without
// waiting for the disk, so that the audit head it locked is let go at
// once, and is followed in the same round trip by a transaction that
// does wait (flushCommitted), which takes a transaction id: without one
// its commit would not wait for the log either. The caller hears of the
// change only after both.
func TestChangeWaitsForTheDisk(t *testing.T) {
	rec := &batchRecorder{current: map[*pgx.Conn][]string{}}
	db, err := Open(t.Context(), Migrated.SchemaURL(t), nil, func(o *options) { o.tracer = rec })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	acc, key := seed(t, db, 1)
	got, err := db.Requests(t.Context(), countersign.RequestFilter{AccountID: acc.ID, Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("Requests = %v, %v", got, err)
	}
	ev := countersign.AuditEvent{Event: "x", Actor: "a", Detail: "{}"}
	if _, err := db.Transition(t.Context(), countersign.Transition{ID: got[0].ID, From: []countersign.Status{countersign.StatusPending},
		To: countersign.StatusApproved, Now: storetest.Base, DecidedBy: "a", ExpiresAt: storetest.Base.Add(time.Hour)}, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Transition(t.Context(), countersign.Transition{ID: got[0].ID, KeyID: key.ID, From: []countersign.Status{countersign.StatusApproved},
		To: countersign.StatusConsumed, Now: storetest.Base}, ev); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	batches := slices.Clone(rec.batches)
	rec.mu.Unlock()
	changes := 0
	for _, b := range batches {
		i := slices.Index(b, "commit")
		if i < 0 || !slices.ContainsFunc(b, func(q string) bool { return q == lockHeadSQL || q == appendIfChangedSQL || q == appendSQL }) {
			continue
		}
		changes++
		if i == 0 || b[i-1] != "set local synchronous_commit = off" || i+1 >= len(b) || b[i+1] != flushCommitted {
			t.Errorf("a change's batch does not end with the commit that does not wait and the flush after it: %q", b[max(i-1, 0):])
		}
	}
	if changes != 3 {
		t.Errorf("%d batches of changes seen, want 3 (create, approve, consume)", changes)
	}

	tx, err := db.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(t.Context()))
	if _, err := tx.Exec(t.Context(), flushCommitted); err != nil {
		t.Fatal(err)
	}
	var assigned bool
	if err := tx.QueryRow(t.Context(), `SELECT pg_current_xact_id_if_assigned() IS NOT NULL`).Scan(&assigned); err != nil {
		t.Fatal(err)
	}
	if !assigned {
		t.Error("the flush takes no transaction id: its commit would not wait for the disk")
	}
}
