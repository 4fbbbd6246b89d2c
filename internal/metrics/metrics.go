// Package metrics keeps the few counters, gauges and histograms the server
// exposes, and writes them in the Prometheus text format. The server's own
// are counted here, on every request's path, with fixed label arrays and no
// allocation; the Go runtime's and the process's are Prometheus' own
// collectors (runtime.go), since measuring GC pauses, file descriptors and
// memory as every Go service reports them is that library's field.
package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Registry holds metrics in the order they were registered, then the
// collectors' (see Register).
type Registry struct {
	mu         sync.Mutex
	metrics    []writer
	collectors *prometheus.Registry
}

type writer interface {
	write(w io.Writer)
}

// NewRegistry returns a registry that holds the Go runtime's and the
// process's metrics.
func NewRegistry() *Registry { return &Registry{collectors: newCollectors()} }

func (r *Registry) add(m writer) {
	r.mu.Lock()
	r.metrics = append(r.metrics, m)
	r.mu.Unlock()
}

// Write writes every metric in the Prometheus text exposition format.
func (r *Registry) Write(w io.Writer) {
	r.mu.Lock()
	ms := append([]writer(nil), r.metrics...)
	r.mu.Unlock()
	for _, m := range ms {
		m.write(w)
	}
	r.writeCollected(w)
}

// maxLabels is how many labels a CounterVec may have.
const maxLabels = 4

// labelValues are the values of a counter's labels, as a map key: counting
// is on every request's path, and a fixed array is hashed without building
// a string.
type labelValues [maxLabels]string

// CounterVec is a counter with labels.
type CounterVec struct {
	name, help string
	labels     []string
	mu         sync.Mutex
	values     map[labelValues]float64
}

// NewCounterVec registers a counter with the label names, at most four.
func (r *Registry) NewCounterVec(name, help string, labels ...string) *CounterVec {
	if len(labels) > maxLabels {
		panic(fmt.Sprintf("metrics: counter %s has %d labels, more than %d", name, len(labels), maxLabels))
	}
	c := &CounterVec{name: name, help: help, labels: labels, values: make(map[labelValues]float64)}
	r.add(c)
	return c
}

func (c *CounterVec) key(values []string) labelValues {
	var k labelValues
	copy(k[:len(c.labels)], values)
	return k
}

// Inc adds one to the counter of the label values, given in the order of
// the label names.
func (c *CounterVec) Inc(values ...string) {
	key := c.key(values)
	c.mu.Lock()
	c.values[key]++
	c.mu.Unlock()
}

// Value returns the counter of the label values.
func (c *CounterVec) Value(values ...string) float64 {
	key := c.key(values)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.values[key]
}

func (c *CounterVec) write(w io.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", c.name, c.help, c.name)
	c.mu.Lock()
	lines := make(map[string]float64, len(c.values))
	keys := make([]string, 0, len(c.values))
	for k, v := range c.values {
		s := labelString(c.labels, k[:len(c.labels)])
		lines[s] = v
		keys = append(keys, s)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s%s %s\n", c.name, k, formatFloat(lines[k]))
	}
	c.mu.Unlock()
}

// GaugeFunc is a gauge whose value is read when metrics are written.
type GaugeFunc struct {
	name, help string
	fn         func() float64
}

// NewGaugeFunc registers a gauge read from fn.
func (r *Registry) NewGaugeFunc(name, help string, fn func() float64) *GaugeFunc {
	g := &GaugeFunc{name: name, help: help, fn: fn}
	r.add(g)
	return g
}

func (g *GaugeFunc) write(w io.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", g.name, g.help, g.name, g.name, formatFloat(g.fn()))
}

// Histogram counts observations into fixed buckets.
type Histogram struct {
	name, help string
	bounds     []float64
	mu         sync.Mutex
	counts     []uint64 // per bucket, not cumulative; the last is +Inf
	sum        float64
	total      uint64
}

// NewHistogram registers a histogram with the upper bounds of its buckets.
func (r *Registry) NewHistogram(name, help string, bounds []float64) *Histogram {
	h := &Histogram{name: name, help: help, bounds: bounds, counts: make([]uint64, len(bounds)+1)}
	r.add(h)
	return h
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v)
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.total++
	h.mu.Unlock()
}

// Count returns how many values were observed.
func (h *Histogram) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

func (h *Histogram) write(w io.Writer) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", h.name, h.help, h.name)
	h.mu.Lock()
	defer h.mu.Unlock()
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", h.name, formatFloat(b), cum)
	}
	cum += h.counts[len(h.bounds)]
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", h.name, cum, h.name, formatFloat(h.sum), h.name, h.total)
}

func labelString(names, values []string) string {
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		v := ""
		if i < len(values) {
			v = values[i]
		}
		b.WriteString(n)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(v))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }

func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
