package approval_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// TestRetention: finished requests older than the age go, in as many
// batches as they take; younger ones and pending ones stay.
func TestRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{MaxPending: 2000})
	const old = 1100 // more than two batches
	for range old {
		e.decide(e.pending().ID, countersign.DecisionDeny)
	}
	e.clock.Advance(10 * 24 * time.Hour)
	young := e.decide(e.pending().ID, countersign.DecisionDeny)
	e.clock.Advance(81 * 24 * time.Hour)
	waiting := e.pending()

	r := &approval.Retention{Store: e.store, Clock: e.clock, Age: approval.DefaultRetention, Log: slog.New(slog.DiscardHandler)}
	if n, err := r.Prune(e.ctx); err != nil || n != old {
		t.Fatalf("Prune = %d, %v; want the %d requests older than 90 days", n, err, old)
	}
	e.stored(young.ID)
	e.stored(waiting.ID)
	if n, err := r.Prune(e.ctx); err != nil || n != 0 {
		t.Errorf("Prune again = %d, %v; want nothing", n, err)
	}
	keep := &approval.Retention{Store: e.store, Clock: e.clock, Log: slog.New(slog.DiscardHandler)}
	if n, err := keep.Prune(e.ctx); err != nil || n != 0 {
		t.Errorf("Prune with no age = %d, %v; want every request kept", n, err)
	}
	e.stored(young.ID)
}
