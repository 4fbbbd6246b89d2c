package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkAccounting fails unless every byte the store counts is what its
// sessions, streams and events hold, per session, per key and in all, and
// the heaps are in order with the right indexes.
func checkAccounting(t *testing.T, s *eventStore, step int) {
	t.Helper()
	perKey, count, total := map[string]int{}, map[string]int{}, 0
	for id, se := range s.sessions {
		want := sessionCost + len(se.opened)*streamCost
		for _, st := range se.opened {
			for _, d := range st.data {
				want += len(d) + eventCost
			}
		}
		if se.size != want || se.id != id || se.owner != s.byKey[se.key] || len(se.streams) != len(se.opened) {
			t.Fatalf("step %d: session %s counts %d bytes, holds %d", step, id, se.size, want)
		}
		perKey[se.key] += want
		count[se.key]++
		total += want
	}
	if s.size != total || len(s.byKey) != len(perKey) || len(s.keys) != len(perKey) {
		t.Fatalf("step %d: the store counts %d bytes and %d keys, holds %d and %d", step, s.size, len(s.byKey), total, len(perKey))
	}
	if s.size > s.maxTotal {
		t.Fatalf("step %d: %d bytes kept, bound %d", step, s.size, s.maxTotal)
	}
	for i, k := range s.keys {
		if k.index != i || k.size != perKey[k.key] || len(k.sessions) != count[k.key] {
			t.Fatalf("step %d: key %s at %d (index %d) counts %d bytes in %d sessions, holds %d in %d",
				step, k.key, i, k.index, k.size, len(k.sessions), perKey[k.key], count[k.key])
		}
		if i > 0 && s.keys[(i-1)/2].size < k.size {
			t.Fatalf("step %d: key %s (%d bytes) is below a key that keeps less (%d)", step, k.key, k.size, s.keys[(i-1)/2].size)
		}
		for j, se := range k.sessions {
			if se.index != j || j > 0 && k.sessions[(j-1)/2].size < se.size {
				t.Fatalf("step %d: session %s of %s out of order at %d (index %d)", step, se.id, k.key, j, se.index)
			}
		}
	}
}

// TestEventStoreAccounting: after every open, append and close of a long
// random run over several keys, trims included, the store's counts are
// exactly what it holds.
func TestEventStoreAccounting(t *testing.T) {
	t.Parallel()
	s := newEventStore()
	s.maxSession, s.maxStreams, s.maxTotal = 3000, 4, 20000
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"a", "b", "c", "d"}
	ctxs := map[string]context.Context{}
	for _, k := range keys {
		ctxs[k] = keyCtx(k)
	}
	type open struct{ key, session, stream string }
	var streams []open
	trimmed := false
	for step := range 5000 {
		switch n := rng.IntN(10); {
		case n < 2 || len(streams) == 0:
			key := keys[rng.IntN(len(keys))]
			o := open{key, fmt.Sprintf("%s-s%d", key, rng.IntN(12)), fmt.Sprint("st", rng.IntN(6))}
			if se := s.sessions[o.session]; se == nil || se.key == key {
				if err := s.Open(ctxs[key], o.session, o.stream); err != nil {
					t.Fatal(err)
				}
				streams = append(streams, o)
			}
		case n < 9:
			o := streams[rng.IntN(len(streams))]
			size := rng.IntN(400)
			if rng.IntN(50) == 0 {
				size = 4000 // over a session's bound
			}
			over := s.size+size+eventCost > s.maxTotal
			s.Append(ctxs[o.key], o.session, o.stream, make([]byte, size))
			trimmed = trimmed || over
		default:
			o := streams[rng.IntN(len(streams))]
			s.SessionClosed(ctxs[o.key], o.session)
		}
		checkAccounting(t, s, step)
	}
	if !trimmed {
		t.Error("the run never went over the store's bound")
	}
}

// BenchmarkEventStoreAppend is the cost of one event appended by a key
// while another key's sessions keep the store at its bound (each loop
// also opens one session of the other key, as a flood of initialize
// does), by how many sessions the store holds.
//
//	go test -run '^$' -bench BenchmarkEventStoreAppend ./internal/gateway
func BenchmarkEventStoreAppend(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			s := newEventStore()
			s.maxTotal = n * (sessionCost + streamCost)
			flood, mine := keyCtx("flood"), keyCtx("mine")
			s.Open(mine, "mine", "st")
			for i := range n {
				s.Open(flood, fmt.Sprint("flood", i), "st")
			}
			event := make([]byte, 200)
			i := n
			b.ResetTimer()
			for b.Loop() {
				s.Append(mine, "mine", "st", event)
				s.Open(flood, fmt.Sprint("flood", i), "st")
				i++
			}
		})
	}
}
