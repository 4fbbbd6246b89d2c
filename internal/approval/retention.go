package approval

import (
	"context"
	"log/slog"
	"time"

	"github.com/countersign/countersign"
)

// DefaultRetention is how long finished requests are kept by default.
const DefaultRetention = 90 * 24 * time.Hour

// retentionEvery is how often old history is pruned, and pruneBatch how
// many requests one transaction removes, so that the writer is never held
// for long however much history has piled up.
const (
	retentionEvery = time.Hour
	pruneBatch     = 500
)

// Retention prunes the finished requests (denied, consumed, expired and
// the rest; never pending or approved ones) older than Age, with their
// links, windows and notifications, and the Idempotency-Keys older than a
// day. The audit log keeps every entry. An Age of 0 keeps every request.
type Retention struct {
	Store countersign.HistoryPruner
	Clock countersign.Clock
	Age   time.Duration
	Log   *slog.Logger
}

// Prune removes every finished request created before now less Age, a
// batch at a time, and returns how many it removed.
func (r *Retention) Prune(ctx context.Context) (int, error) {
	now := r.Clock.Now()
	if is, ok := r.Store.(countersign.IdempotencyStore); ok {
		if _, err := is.PruneIdempotency(ctx, now.Add(-countersign.IdempotencyWindow)); err != nil {
			return 0, err
		}
	}
	if r.Age <= 0 {
		return 0, nil
	}
	before := now.Add(-r.Age)
	total := 0
	for {
		n, err := r.Store.PruneRequests(ctx, before, pruneBatch)
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

// Run prunes at once and then every hour until ctx is done.
func (r *Retention) Run(ctx context.Context) {
	t := time.NewTicker(retentionEvery)
	defer t.Stop()
	for {
		if n, err := r.Prune(ctx); err != nil && ctx.Err() == nil {
			r.Log.Error("prune old requests", "err", err)
		} else if n > 0 {
			r.Log.Info("old requests pruned", "count", n, "older_than_days", int(r.Age.Hours()/24))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
