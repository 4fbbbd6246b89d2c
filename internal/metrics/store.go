package metrics

import (
	"context"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/prometheus/client_golang/prometheus"
)

// storeCollector reports what a store says of itself, read when the
// metrics are written, at most once every statsFresh.
type storeCollector struct {
	stats    countersign.StatsReporter
	health   countersign.WriteHealth // nil when the store cannot tell
	now      func() time.Time
	mu       sync.Mutex // held while the store is asked: one asks, the others wait for its answer
	last     countersign.StoreStats
	lastErr  error
	lastAt   time.Time // zero: never asked
	failures *prometheus.Desc
	canWrite *prometheus.Desc
	logBytes *prometheus.Desc
	logMax   *prometheus.Desc
	ckpts    *prometheus.Desc
	ckptTime *prometheus.Desc
	oldest   *prometheus.Desc
}

// NewStoreCollector returns a collector of the store's metrics: failed
// writes by cause, whether it can write, its write-ahead log's size and
// bound, its checkpoints and their time (SQLite), and the age of the
// oldest notification not delivered yet. The store is asked at most once
// every few seconds (statsFresh); whether it can write is read each time.
func NewStoreCollector(s countersign.StatsReporter) prometheus.Collector {
	return newStoreCollector(s, time.Now)
}

func newStoreCollector(s countersign.StatsReporter, now func() time.Time) *storeCollector {
	h, _ := s.(countersign.WriteHealth)
	return &storeCollector{
		stats: s, health: h, now: now,
		failures: prometheus.NewDesc("countersign_store_write_failures_total",
			"Writes to the store that failed, by cause (disk_full, io, read_only, corrupt, busy, connection, other).", []string{"cause"}, nil),
		canWrite: prometheus.NewDesc("countersign_store_writable",
			"1 while the store can write, 0 while it cannot (a full disk, say).", nil, nil),
		logBytes: prometheus.NewDesc("countersign_store_log_bytes", "Size of the SQLite write-ahead log.", nil, nil),
		logMax: prometheus.NewDesc("countersign_store_log_max_bytes",
			"Bound of the SQLite write-ahead log, past which it is copied into the database and truncated.", nil, nil),
		ckpts: prometheus.NewDesc("countersign_store_checkpoints_total",
			"Copies of the SQLite write-ahead log into the database.", nil, nil),
		ckptTime: prometheus.NewDesc("countersign_store_checkpoint_seconds_total",
			"Time the copies of the SQLite write-ahead log into the database took, all together.", nil, nil),
		oldest: prometheus.NewDesc("countersign_outbox_oldest_undelivered_seconds",
			"Age of the oldest notification still waiting to be delivered; 0 when none waits.", nil, nil),
	}
}

// Describe sends the descriptions of every metric the collector reports.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.failures, c.canWrite, c.logBytes, c.logMax, c.ckpts, c.ckptTime, c.oldest} {
		ch <- d
	}
}

// statsTimeout bounds the store's answer: a scrape must not hang on a
// store that hangs, which is when the metrics matter most.
const statsTimeout = 2 * time.Second

// statsFresh is how long the store's answer is reported again before the
// store is asked anew: /metrics needs no sign-in, so a flood of scrapes
// costs the store one query every statsFresh, however many there are.
// Prometheus scrapes every 15 seconds or more.
const statsFresh = 5 * time.Second

// storeStats returns the store's stats, asked at most once every
// statsFresh.
func (c *storeCollector) storeStats() (countersign.StoreStats, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if !c.lastAt.IsZero() && now.Sub(c.lastAt) < statsFresh && now.Sub(c.lastAt) >= 0 {
		return c.last, c.lastErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	c.last, c.lastErr = c.stats.StoreStats(ctx)
	c.lastAt = now
	return c.last, c.lastErr
}

// Collect reads the store's stats and reports them. The failures always
// carry disk_full, at 0 before any, so that an alert on it has a series.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	if c.health != nil {
		writable := 1.0
		if c.health.WriteError() != "" {
			writable = 0
		}
		ch <- prometheus.MustNewConstMetric(c.canWrite, prometheus.GaugeValue, writable)
	}
	st, err := c.storeStats()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.oldest, err)
		return
	}
	if _, ok := st.WriteFailures["disk_full"]; !ok {
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, 0, "disk_full")
	}
	for cause, n := range st.WriteFailures {
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(n), cause)
	}
	if st.MaxLogBytes > 0 {
		ch <- prometheus.MustNewConstMetric(c.logBytes, prometheus.GaugeValue, float64(st.LogBytes))
		ch <- prometheus.MustNewConstMetric(c.logMax, prometheus.GaugeValue, float64(st.MaxLogBytes))
		ch <- prometheus.MustNewConstMetric(c.ckpts, prometheus.CounterValue, float64(st.Checkpoints))
		ch <- prometheus.MustNewConstMetric(c.ckptTime, prometheus.CounterValue, st.CheckpointTime.Seconds())
	}
	age := 0.0
	if !st.OldestUndelivered.IsZero() {
		age = max(0, c.now().Sub(st.OldestUndelivered).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
