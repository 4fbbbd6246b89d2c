// Package gctune keeps the garbage collector's heap goal from falling below
// a floor.
//
// With GOGC=100 the collector runs each time the heap doubles. A server
// whose live heap is a few megabytes, like countersign's under a load of
// short requests, then collects dozens of times a second, and each cycle
// takes CPU from the work and stops it briefly. A floor under the goal lets
// such a heap grow to the floor between cycles; a heap whose live part is
// large already is left to GOGC=100 as before, so the floor adds at most
// its own size to the memory a server holds.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// minPercent and maxPercent bound the GOGC the tuner sets.
const (
	minPercent = 100
	maxPercent = 10000
)

// The floors of countersign's long-running roles.
const (
	// ServeFloor is countersign serve's: a live heap of a few megabytes
	// under a load of short requests.
	ServeFloor = 32 << 20
	// MCPFloor is countersign mcp's. It runs once per agent session, so
	// it is smaller; every call it forwards leaves about half a megabyte
	// of the MCP library's JSON buffers, and with no floor its heap of a
	// few megabytes was collected every few calls.
	MCPFloor = 16 << 20
)

// Default is Floor, unless GOGC is set in the environment, which wins.
func Default(floor uint64) (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	return Floor(floor)
}

// Floor sets GOGC after every collection so that the next one starts no
// sooner than when the heap reaches floor bytes (and never sooner than
// GOGC=100 would). It returns a function that stops the tuning and puts
// the GOGC back that was set before.
func Floor(floor uint64) (stop func()) {
	t := &tuner{floor: floor, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/globals:bytes"}, {Name: "/gc/scan/stack:bytes"},
	}}
	t.mu.Lock()
	t.prev = debug.SetGCPercent(percentFor(floor, t.live()))
	t.mu.Unlock()
	t.arm()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.stopped {
			t.stopped = true
			debug.SetGCPercent(t.prev)
		}
	}
}

type tuner struct {
	floor   uint64
	mu      sync.Mutex // orders a finalizer's setting and stop's
	prev    int
	stopped bool
	sample  []metrics.Sample
}

// sentinel is an object whose finalizer runs once after each collection
// that finds it unreachable: the tuner's hook into every cycle. It holds a
// pointer, so that the tiny allocator, whose objects may never be
// finalized, does not take it.
type sentinel struct {
	t *tuner
	_ [8]byte
}

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		t := s.t
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.stopped {
			return
		}
		debug.SetGCPercent(percentFor(t.floor, t.live()))
		t.arm()
	})
}

// live returns what the last collection found: the bytes live on the heap,
// and the other roots GOGC counts (globals and stacks). The caller holds
// t.mu.
func (t *tuner) live() heap {
	metrics.Read(t.sample)
	var v [3]uint64
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	return heap{live: v[0], roots: v[1] + v[2]}
}

// heap is what a collection found.
type heap struct{ live, roots uint64 }

// percentFor returns the GOGC whose heap goal is floor, within [minPercent,
// maxPercent]. The goal is live + (live + roots) × GOGC / 100.
func percentFor(floor uint64, h heap) int {
	if h.live == 0 || h.live >= floor/2 {
		// Nothing measured yet (before the first collection), or a
		// heap large enough for GOGC=100.
		return minPercent
	}
	p := (floor - h.live) * 100 / (h.live + h.roots)
	return int(min(max(p, minPercent), maxPercent))
}
