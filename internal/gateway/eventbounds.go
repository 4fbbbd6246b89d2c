package gateway

import "container/heap"

// The event store's accounting (resume.go): every session's bytes count
// for its key and for the store, and two heaps keep the key that holds
// the most, and each key's biggest session, at their tops. A change of a
// session's size moves it in its key's heap and its key in the heap of
// keys, in O(log n); trimming takes the tops. Nothing is scanned.

// keyEvents are the sessions of one agent key in the event store.
type keyEvents struct {
	key      string
	size     int
	sessions sessionHeap // the biggest first
	index    int         // in eventStore.keys
}

// addSession starts the accounting of a session of key. s.mu is held.
func (s *eventStore) addSession(id, key string) *sessionEvents {
	k := s.byKey[key]
	if k == nil {
		k = &keyEvents{key: key}
		s.byKey[key] = k
		heap.Push(&s.keys, k)
	}
	se := &sessionEvents{id: id, key: key, owner: k, streams: map[string]*streamEvents{}}
	heap.Push(&k.sessions, se)
	s.sessions[id] = se
	s.grow(se, sessionCost)
	return se
}

// grow adds n bytes (fewer, when negative) to se, its key and the store.
// s.mu is held.
func (s *eventStore) grow(se *sessionEvents, n int) {
	k := se.owner
	se.size += n
	k.size += n
	s.size += n
	heap.Fix(&k.sessions, se.index)
	heap.Fix(&s.keys, k.index)
}

// removeSession drops se and its accounting; its key's goes with its last
// session. s.mu is held.
func (s *eventStore) removeSession(se *sessionEvents) {
	k := se.owner
	k.size -= se.size
	s.size -= se.size
	heap.Remove(&k.sessions, se.index)
	delete(s.sessions, se.id)
	if len(k.sessions) == 0 {
		heap.Remove(&s.keys, k.index)
		delete(s.byKey, k.key)
		return
	}
	heap.Fix(&s.keys, k.index)
}

// bySize is a max-heap of what keeps bytes in the event store: the keys,
// and each key's sessions.
type bySize[T sized] []T

// sized is an entry of a bySize heap: its bytes, and where it stands.
type sized interface {
	bytes() int
	at(index int)
}

// keyHeap is the heap of keys, the biggest first.
type keyHeap = bySize[*keyEvents]

// sessionHeap is the heap of one key's sessions, the biggest first.
type sessionHeap = bySize[*sessionEvents]

func (k *keyEvents) bytes() int        { return k.size }
func (k *keyEvents) at(index int)      { k.index = index }
func (se *sessionEvents) bytes() int   { return se.size }
func (se *sessionEvents) at(index int) { se.index = index }

func (h bySize[T]) Len() int           { return len(h) }
func (h bySize[T]) Less(i, j int) bool { return h[i].bytes() > h[j].bytes() }
func (h bySize[T]) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at(i)
	h[j].at(j)
}
func (h *bySize[T]) Push(x any) {
	v := x.(T)
	v.at(len(*h))
	*h = append(*h, v)
}
func (h *bySize[T]) Pop() any {
	old := *h
	v := old[len(old)-1]
	var none T
	old[len(old)-1] = none
	*h = old[:len(old)-1]
	return v
}
