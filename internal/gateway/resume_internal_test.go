package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/auth"
)

// keyCtx is the context of a request authenticated as key, as the SDK's
// bearer token middleware makes it.
func keyCtx(key string) context.Context {
	var ctx context.Context
	verify := func(context.Context, string, *http.Request) (*auth.TokenInfo, error) {
		return &auth.TokenInfo{UserID: key}, nil
	}
	h := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(
		http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { ctx = r.Context() }))
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer x")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if ctx == nil {
		panic("the middleware refused the request")
	}
	return ctx
}

// replay returns the events of a stream after index, or the error.
func replay(s *eventStore, key, session, stream string, index int) ([]string, error) {
	var out []string
	for d, err := range s.After(keyCtx(key), session, stream, index) {
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
	return out, nil
}

func TestEventStoreKeyAndSession(t *testing.T) {
	t.Parallel()
	s := newEventStore()
	ctx := keyCtx("k1")
	if err := s.Open(ctx, "s1", "a"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Append(ctx, "s1", "a", fmt.Appendf(nil, "e%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := replay(s, "k1", "s1", "a", 0); err != nil || strings.Join(got, ",") != "e1,e2" {
		t.Fatalf("own key: %v %v", got, err)
	}
	for _, tc := range []struct{ key, session, stream string }{
		{"k2", "s1", "a"}, {"", "s1", "a"}, {"k1", "s2", "a"}, {"k1", "s1", "b"},
	} {
		if got, err := replay(s, tc.key, tc.session, tc.stream, 0); !errors.Is(err, errNotKept) || len(got) > 0 {
			t.Errorf("%+v: %v %v, want none and errNotKept", tc, got, err)
		}
	}
	if err := s.Open(keyCtx("k2"), "s1", "c"); err == nil {
		t.Error("another key opened a stream in the session")
	}
	if err := s.Open(context.Background(), "s3", "a"); err == nil {
		t.Error("a stream was opened with no key")
	}
	if err := s.SessionClosed(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := replay(s, "k1", "s1", "a", 0); !errors.Is(err, errNotKept) {
		t.Errorf("after the session closed: %v", err)
	}
	if s.size != 0 || len(s.sessions) != 0 {
		t.Errorf("after the session closed: %d bytes, %d sessions kept", s.size, len(s.sessions))
	}
}

func TestEventStoreBounds(t *testing.T) {
	t.Parallel()
	s := newEventStore()
	s.maxSession, s.maxStreams, s.maxTotal = 2000, 3, 6000
	ctx := keyCtx("k")
	event := strings.Repeat("x", 100) // 164 bytes kept
	if err := s.Open(ctx, "big", "a"); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		s.Append(ctx, "big", "a", []byte(event))
	}
	se := s.sessions["big"]
	if se.size > s.maxSession {
		t.Errorf("session keeps %d bytes, bound %d", se.size, s.maxSession)
	}
	// The oldest events went; the last ones are there, at their indexes.
	if got, err := replay(s, "k", "big", "a", 48); err != nil || len(got) != 1 {
		t.Errorf("after 48: %v %v", got, err)
	}
	if _, err := replay(s, "k", "big", "a", 0); !errors.Is(err, errNotKept) {
		t.Errorf("after 0, dropped: %v", err)
	}
	// Streams: a fourth drops the oldest.
	for _, id := range []string{"b", "c", "d"} {
		s.Open(ctx, "big", id)
	}
	if len(se.streams) != 3 || se.streams["a"] != nil {
		t.Errorf("streams %v", len(se.streams))
	}
	// An event too large to keep takes its index and drops those before.
	s.Append(ctx, "big", "d", []byte("d0"))
	if err := s.Append(ctx, "big", "d", []byte(strings.Repeat("y", 3000))); err == nil {
		t.Error("an event over the session's bound was kept")
	}
	s.Append(ctx, "big", "d", []byte("d2"))
	if got, err := replay(s, "k", "big", "d", 1); err != nil || strings.Join(got, ",") != "d2" {
		t.Errorf("after the large event: %v %v", got, err)
	}
	if _, err := replay(s, "k", "big", "d", 0); !errors.Is(err, errNotKept) {
		t.Errorf("across the large event: %v", err)
	}
	// In all: other sessions push out the biggest session's events first.
	for range 4 {
		s.Append(ctx, "big", "d", []byte(event))
	}
	for i := range 4 {
		id := fmt.Sprint("small", i)
		s.Open(ctx, id, "a")
		for range 2 {
			s.Append(ctx, id, "a", []byte(event))
		}
	}
	if got, err := replay(s, "k", "big", "d", -1); err != nil || len(got) >= 4 {
		t.Errorf("the biggest session kept %d events (%v), want fewer than 4", len(got), err)
	}
	if s.size > s.maxTotal {
		t.Errorf("the store keeps %d bytes, bound %d", s.size, s.maxTotal)
	}
	for i := range 4 {
		if got, err := replay(s, "k", fmt.Sprint("small", i), "a", -1); err != nil || len(got) != 2 {
			t.Errorf("small%d: %d events, %v", i, len(got), err)
		}
	}
	total := 0
	for _, se := range s.sessions {
		total += se.size
	}
	if total != s.size {
		t.Errorf("sessions account %d bytes, the store %d", total, s.size)
	}
}

// TestEventStoreBoundPerKey: a key that opens many sessions, even empty
// ones, pushes out its own events and sessions, never another key's.
func TestEventStoreBoundPerKey(t *testing.T) {
	t.Parallel()
	s := newEventStore()
	s.maxSession, s.maxStreams, s.maxTotal = 2000, 3, 6000
	theirs, mine := keyCtx("theirs"), keyCtx("mine")
	s.Open(theirs, "theirs", "")
	for range 5 {
		s.Append(theirs, "theirs", "", []byte(strings.Repeat("x", 100)))
	}
	for i := range 20 {
		s.Open(mine, fmt.Sprint("mine", i), "")
	}
	if got, err := replay(s, "theirs", "theirs", "", -1); err != nil || len(got) != 5 {
		t.Errorf("the other key's session kept %d of its 5 events (%v)", len(got), err)
	}
	if s.size > s.maxTotal {
		t.Errorf("the store keeps %d bytes, bound %d", s.size, s.maxTotal)
	}
}
