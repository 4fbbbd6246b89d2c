package gateway

import (
	"bytes"
	"context"
	"errors"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resumable streams: the events of /mcp's sessions (2025-11-25 and older)
// carry ids, and a client that lost a stream asks for the rest with GET,
// its session's Mcp-Session-Id and the Last-Event-ID it saw. The events are
// kept in memory, bounded:
//
//   - per session, at most maxSessionEvents bytes (an event counts its
//     data and eventCost) and maxSessionStreams streams; past that its
//     oldest events go, then its oldest streams;
//   - in all, at most maxStoredEvents bytes (sessions and streams count
//     sessionCost and streamCost); past that the events of the key that
//     holds the most go first, from its biggest session, so that one busy
//     key, however many sessions it opens, never pushes out the events of
//     the others. Which key and session that is, heaps kept per key and
//     over keys say in O(log n) (eventbounds.go): an append never scans
//     the store under its lock;
//   - a session's events go when it ends (DELETE, or the 30 minutes idle
//     after which the SDK closes it).
//
// A stream whose events are gone cannot be resumed: the client is told so
// and sends its request again.
const (
	maxSessionEvents  = 1 << 20
	maxSessionStreams = 64
	maxStoredEvents   = 32 << 20
	eventCost         = 64
	streamCost        = 256
	sessionCost       = 512
)

// errNotKept is the answer to a Last-Event-ID whose events are not kept for
// this session and key: never kept, another session's or key's, or dropped.
// It says the same in each case, so that it tells a key nothing of others.
var errNotKept = errors.New("the events after this Last-Event-ID are not kept for this session " +
	"(an id of another session, one this server never sent, or events dropped to bound memory): send the request again")

// eventStore is the mcp.EventStore of /mcp's sessions, bounded as above.
// A session is bound to the key that opened it, and its events are read
// only by that key in that session.
type eventStore struct {
	mu       sync.Mutex
	sessions map[string]*sessionEvents
	keys     keyHeap // every key that keeps a session, the biggest first
	byKey    map[string]*keyEvents
	size     int // bytes accounted over all sessions
	seq      uint64
	// limits, the constants above but in tests
	maxSession, maxStreams, maxTotal int
	// closed, when set, hears of every session that ended.
	closed func(sessionID string)
}

type sessionEvents struct {
	id      string
	key     string     // the agent key that opened the session
	owner   *keyEvents // its key's accounting
	index   int        // in owner.sessions
	streams map[string]*streamEvents
	opened  []*streamEvents // oldest first
	size    int
}

type streamEvents struct {
	id    string
	first int // the index of events[0] in the stream
	next  int // the index of the next event appended
	data  [][]byte
	seqs  []uint64 // order of appending, over the session's streams
}

func newEventStore() *eventStore {
	return &eventStore{sessions: map[string]*sessionEvents{}, byKey: map[string]*keyEvents{},
		maxSession: maxSessionEvents, maxStreams: maxSessionStreams, maxTotal: maxStoredEvents}
}

// keyOf returns the agent key of a request's context, "" for none.
func keyOf(ctx context.Context) string {
	if ti := auth.TokenInfoFromContext(ctx); ti != nil {
		return ti.UserID
	}
	return ""
}

// Open implements mcp.EventStore: it starts a stream of a session, the
// session bound to the key of the request that opens it.
func (s *eventStore) Open(ctx context.Context, sessionID, streamID string) error {
	key := keyOf(ctx)
	if key == "" {
		return errors.New("a stream is opened only by an agent key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[sessionID]
	if se == nil {
		se = s.addSession(sessionID, key)
	}
	if se.key != key {
		return errors.New("a stream is opened only by the session's key")
	}
	if se.streams[streamID] != nil {
		return nil
	}
	st := &streamEvents{id: streamID}
	se.streams[streamID] = st
	se.opened = append(se.opened, st)
	s.grow(se, streamCost)
	for len(se.opened) > s.maxStreams {
		s.dropStream(se, se.opened[0])
	}
	s.trim(se)
	return nil
}

// Append implements mcp.EventStore. The SDK numbers a stream's events as
// they are appended, including the empty priming event, so an event that
// cannot be kept still takes its index: it and the events before it go.
func (s *eventStore) Append(_ context.Context, sessionID, streamID string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[sessionID]
	if se == nil || se.streams[streamID] == nil {
		return errors.New("the stream's events are no longer kept")
	}
	st := se.streams[streamID]
	cost := len(data) + eventCost
	if cost > s.maxSession-sessionCost-streamCost {
		s.dropEvents(se, st, len(st.data))
		st.next++
		st.first = st.next
		return errors.New("the event is too large to keep")
	}
	s.seq++
	st.data = append(st.data, data)
	st.seqs = append(st.seqs, s.seq)
	st.next++
	s.grow(se, cost)
	s.trim(se)
	return nil
}

// After implements mcp.EventStore: the events of the session's stream
// after index, for the session's own key only.
func (s *eventStore) After(ctx context.Context, sessionID, streamID string, index int) iter.Seq2[[]byte, error] {
	events, err := s.after(keyOf(ctx), sessionID, streamID, index)
	return func(yield func([]byte, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		for _, d := range events {
			if !yield(d, nil) {
				return
			}
		}
	}
}

// after returns copies of the events after index. An index below zero
// (a GET with no Last-Event-ID, for the standalone stream) asks for all
// that are kept, which may be none, and never fails for the session's key.
func (s *eventStore) after(key, sessionID, streamID string, index int) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.sessions[sessionID]
	if se != nil && (key == "" || se.key != key) {
		return nil, errNotKept
	}
	var st *streamEvents
	if se != nil {
		st = se.streams[streamID]
	}
	if st == nil {
		if index < 0 {
			return nil, nil
		}
		return nil, errNotKept
	}
	start := 0
	if index >= 0 {
		if index >= st.next || index+1 < st.first {
			return nil, errNotKept
		}
		start = index + 1 - st.first
	}
	out := make([][]byte, 0, len(st.data)-start)
	for _, d := range st.data[start:] {
		out = append(out, bytes.Clone(d))
	}
	return out, nil
}

// resumable reports whether a Last-Event-ID can be resumed in a session by
// key: nil, errNotKept, or nil too when the session is not key's (the SDK
// answers that as it answers an unknown session, 404).
func (s *eventStore) resumable(key, sessionID, lastEventID string) error {
	streamID, index, ok := parseEventID(lastEventID)
	if !ok {
		return errors.New("the Last-Event-ID is not an event id this server sent")
	}
	s.mu.Lock()
	se := s.sessions[sessionID]
	s.mu.Unlock()
	if se == nil || se.key != key {
		return nil
	}
	_, err := s.after(key, sessionID, streamID, index)
	return err
}

// parseEventID parses an event id as the SDK writes it: stream, "_", index.
func parseEventID(id string) (stream string, index int, ok bool) {
	stream, n, found := strings.Cut(id, "_")
	if !found || strings.Contains(n, "_") {
		return "", 0, false
	}
	index, err := strconv.Atoi(n)
	if err != nil || index < 0 || n != strconv.Itoa(index) {
		return "", 0, false
	}
	return stream, index, true
}

// SessionClosed implements mcp.EventStore: the session's events go.
func (s *eventStore) SessionClosed(_ context.Context, sessionID string) error {
	s.mu.Lock()
	if se := s.sessions[sessionID]; se != nil {
		s.removeSession(se)
	}
	s.mu.Unlock()
	if s.closed != nil {
		s.closed(sessionID)
	}
	return nil
}

// trim brings se within its bound, then the store within its own.
// s.mu is held.
func (s *eventStore) trim(se *sessionEvents) {
	for se.size > s.maxSession {
		if !s.dropOldest(se) {
			break
		}
	}
	for s.size > s.maxTotal && len(s.keys) > 0 {
		// The key that holds the most, then its biggest session: a key
		// that opens many sessions pushes out only its own.
		big := s.keys[0].sessions[0]
		if !s.dropOldest(big) {
			s.removeSession(big)
		}
	}
}

// dropOldest drops the oldest event of se, or its oldest stream when it
// keeps no events; false when it has neither. s.mu is held.
func (s *eventStore) dropOldest(se *sessionEvents) bool {
	var oldest *streamEvents
	for _, st := range se.opened {
		if len(st.seqs) > 0 && (oldest == nil || st.seqs[0] < oldest.seqs[0]) {
			oldest = st
		}
	}
	if oldest != nil {
		s.dropEvents(se, oldest, 1)
		return true
	}
	if len(se.opened) > 0 {
		s.dropStream(se, se.opened[0])
		return true
	}
	return false
}

// dropEvents drops the first n events of st. s.mu is held.
func (s *eventStore) dropEvents(se *sessionEvents, st *streamEvents, n int) {
	freed := 0
	for _, d := range st.data[:n] {
		freed += len(d) + eventCost
	}
	s.grow(se, -freed)
	clear(st.data[:n])
	st.data, st.seqs = st.data[n:], st.seqs[n:]
	st.first += n
}

// dropStream drops st and its events; later events of the stream are
// delivered if its client is connected, and not kept. s.mu is held.
func (s *eventStore) dropStream(se *sessionEvents, st *streamEvents) {
	s.dropEvents(se, st, len(st.data))
	delete(se.streams, st.id)
	for i, o := range se.opened {
		if o == st {
			se.opened = append(se.opened[:i], se.opened[i+1:]...)
			break
		}
	}
	s.grow(se, -streamCost)
}

// resumeCheck answers a GET whose Last-Event-ID cannot be resumed with 400
// and a message that says why; the SDK would say only "failed to replay
// events", or "stream replay unsupported".
func resumeCheck(store *eventStore, w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet || len(r.Header.Values("Last-Event-ID")) == 0 {
		return true
	}
	err := store.resumable(keyOf(r.Context()), r.Header.Get("Mcp-Session-Id"), r.Header.Get("Last-Event-ID"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// heldPrime holds back the priming event of a session's first stream, that
// of initialize, until the answer follows it. The SDK writes the priming
// event, and with it the response's headers, before the server has read
// the request: a proxy that then drops the rest of the request body (Go's
// httputil.ReverseProxy discards it as soon as the headers come back)
// breaks the stream. A client would resume it, but the SDK closes a
// session whose initialize did not finish with its request: the resumption
// finds no session and the client's initialize waits for its timeout.
// Later streams keep their immediate priming event, so that a call held
// for a human can be resumed from its start.
type heldPrime struct {
	http.ResponseWriter
	held []byte
	done bool // the held event, if any, went out
}

func (w *heldPrime) Write(b []byte) (int, error) {
	if !w.done && w.held == nil && bytes.HasPrefix(b, []byte("event: prime\n")) {
		w.held = bytes.Clone(b)
		return len(b), nil
	}
	if err := w.release(); err != nil {
		return 0, err
	}
	return w.ResponseWriter.Write(b)
}

// release writes the held priming event.
func (w *heldPrime) release() error {
	if w.done {
		return nil
	}
	w.done = true
	if w.held == nil {
		return nil
	}
	_, err := w.ResponseWriter.Write(w.held)
	return err
}

// Flush flushes nothing while the priming event is held.
func (w *heldPrime) Flush() {
	if w.done {
		http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *heldPrime) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var _ mcp.EventStore = (*eventStore)(nil)
