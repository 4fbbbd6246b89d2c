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

// keyHeap is a max-heap of keys by the bytes they keep.
type keyHeap []*keyEvents

func (h keyHeap) Len() int           { return len(h) }
func (h keyHeap) Less(i, j int) bool { return h[i].size > h[j].size }
func (h keyHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *keyHeap) Push(x any) {
	k := x.(*keyEvents)
	k.index = len(*h)
	*h = append(*h, k)
}
func (h *keyHeap) Pop() any {
	old := *h
	k := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return k
}

// sessionHeap is a max-heap of one key's sessions by the bytes they keep.
type sessionHeap []*sessionEvents

func (h sessionHeap) Len() int           { return len(h) }
func (h sessionHeap) Less(i, j int) bool { return h[i].size > h[j].size }
func (h sessionHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *sessionHeap) Push(x any) {
	se := x.(*sessionEvents)
	se.index = len(*h)
	*h = append(*h, se)
}
func (h *sessionHeap) Pop() any {
	old := *h
	se := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return se
}
