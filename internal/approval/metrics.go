package approval

import (
	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/metrics"
)

// Metrics are the lifecycle's counters.
type Metrics struct {
	requests *metrics.CounterVec
	latency  *metrics.Histogram
}

// NewMetrics registers the lifecycle's metrics, the waiter gauge among them.
func NewMetrics(reg *metrics.Registry, hub *Hub) *Metrics {
	m := &Metrics{
		requests: reg.NewCounterVec("countersign_requests_total", "Requests that entered a status, by kind and status.", "kind", "status"),
		latency: reg.NewHistogram("countersign_decision_seconds", "Time from a request's creation to a human's decision.",
			[]float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600}),
	}
	if hub != nil {
		reg.NewGaugeFunc("countersign_waiters", "Long polls and other waits in progress.", func() float64 { return float64(hub.Waiters()) })
	}
	return m
}

func (m *Metrics) entered(r *countersign.Request) {
	m.requests.Inc(string(r.Kind), string(r.Status))
}

func (m *Metrics) decided(r *countersign.Request) {
	m.latency.Observe(r.DecidedAt.Sub(r.CreatedAt).Seconds())
}
