package metrics

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/prometheus/client_golang/prometheus"
)

// countingStats counts the times a real store is asked for its stats.
type countingStats struct {
	countersign.StatsReporter
	asked atomic.Int64
}

func (c *countingStats) StoreStats(ctx context.Context) (countersign.StoreStats, error) {
	c.asked.Add(1)
	return c.StatsReporter.StoreStats(ctx)
}

// TestStoreStatsCached: a flood of scrapes asks the store for its stats
// once every statsFresh, not once a scrape.
func TestStoreStatsCached(t *testing.T) {
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	st := &countingStats{StatsReporter: db}
	var mu sync.Mutex
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	reg := prometheus.NewRegistry()
	reg.MustRegister(newStoreCollector(st, clock))

	scrape := func() {
		t.Helper()
		if _, err := reg.Gather(); err != nil {
			t.Error(err)
		}
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(scrape)
	}
	wg.Wait()
	if n := st.asked.Load(); n != 1 {
		t.Fatalf("50 scrapes at once asked the store %d times, want 1", n)
	}
	mu.Lock()
	now = now.Add(statsFresh - time.Millisecond)
	mu.Unlock()
	scrape()
	if n := st.asked.Load(); n != 1 {
		t.Fatalf("a scrape within %v asked the store again (%d times)", statsFresh, n)
	}
	mu.Lock()
	now = now.Add(time.Millisecond)
	mu.Unlock()
	scrape()
	scrape()
	if n := st.asked.Load(); n != 2 {
		t.Fatalf("scrapes after %v asked the store %d times in all, want 2", statsFresh, n)
	}
}
