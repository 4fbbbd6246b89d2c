package metrics

import (
	"strings"
	"testing"
)

func TestExposition(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec("x_total", "Things.", "kind", "status")
	c.Inc("rm", "pending")
	c.Inc("rm", "pending")
	c.Inc("tool", `we"ird`)
	r.NewGaugeFunc("w", "Waiters.", func() float64 { return 3 })
	h := r.NewHistogram("d_seconds", "Latency.", []float64{0.1, 1})
	h.Observe(0.05)
	h.Observe(0.5)
	h.Observe(5)

	var b strings.Builder
	r.Write(&b)
	want := `# HELP x_total Things.
# TYPE x_total counter
x_total{kind="rm",status="pending"} 2
x_total{kind="tool",status="we\"ird"} 1
# HELP w Waiters.
# TYPE w gauge
w 3
# HELP d_seconds Latency.
# TYPE d_seconds histogram
d_seconds_bucket{le="0.1"} 1
d_seconds_bucket{le="1"} 2
d_seconds_bucket{le="+Inf"} 3
d_seconds_sum 5.55
d_seconds_count 3
`
	// The registry's own metrics come first, as registered; the Go
	// runtime's and the process's follow.
	if got := b.String(); !strings.HasPrefix(got, want) {
		t.Fatalf("got\n%s\nwant first\n%s", got, want)
	}
	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "go_memstats_heap_alloc_bytes", "process_open_fds", "process_resident_memory_bytes"} {
		if !strings.Contains(b.String(), "\n# TYPE "+name+" ") {
			t.Errorf("no %s after the registry's own metrics", name)
		}
	}
}
