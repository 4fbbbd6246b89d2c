package metrics

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
)

// newCollectors returns the registry of the metrics collected when they
// are written: the Go runtime's and the process's, as Prometheus' own
// collectors name and measure them (goroutines, heap, GC pauses, open file
// descriptors, resident memory and the rest), so that dashboards and alerts
// written for any Go service work here too.
func newCollectors() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Register adds a collector, whose metrics are gathered each time the
// registry is written. A collector of metrics already registered is
// refused with an error.
func (r *Registry) Register(c prometheus.Collector) error {
	return r.collectors.Register(c)
}

// writeCollected writes what the collectors gather now. A collector that
// fails leaves out its own metrics only.
func (r *Registry) writeCollected(w io.Writer) {
	families, _ := r.collectors.Gather()
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		enc.Encode(f)
	}
}
