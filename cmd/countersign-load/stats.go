package main

import (
	"math"
	"slices"
	"sync"
	"time"
)

// samples collects latencies from many goroutines.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

func (s *samples) sorted() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.d)
	slices.Sort(out)
	return out
}

// percentile returns the nearest-rank q-quantile (0 < q <= 1) of sorted
// durations: the smallest value with at least q of the samples at or below
// it.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// report prints count, p50, p90, p99 and max of the samples under prefix.
func (p *printer) latencies(prefix string, s *samples) {
	d := s.sorted()
	p.count(prefix+"_samples", int64(len(d)))
	if len(d) == 0 {
		return
	}
	p.ms(prefix+"_p50", percentile(d, 0.50))
	p.ms(prefix+"_p90", percentile(d, 0.90))
	p.ms(prefix+"_p99", percentile(d, 0.99))
	p.ms(prefix+"_max", d[len(d)-1])
}
