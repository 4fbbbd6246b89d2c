package gateway_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/gateway"
)

const initializeBody = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`

// refused sends initialize for key and fails unless it is refused with
// status, a Retry-After of at most retryAfter seconds (and at least one)
// and a JSON-RPC error of code whose message holds want; no session may
// be opened.
func refused(t *testing.T, h *harness, key string, status, retryAfter, code int, want string) {
	t.Helper()
	s := &rawSession{t: t, base: h.base, client: bearer(h.keys[key])}
	resp := s.post(t.Context(), initializeBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var msg struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	err := json.Unmarshal(body, &msg)
	retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != status || retry < 1 || retry > retryAfter || resp.Header.Get("Mcp-Session-Id") != "" ||
		err != nil || msg.JSONRPC != "2.0" || string(msg.ID) != "null" || msg.Error.Code != code || !strings.Contains(msg.Error.Message, want) {
		t.Fatalf("initialize of %s: %d, Retry-After %q, session %q, body %s; want %d, Retry-After up to %d, error %d %q",
			key, resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Mcp-Session-Id"), body, status, retryAfter, code, want)
	}
}

// ping sends ping in the session and returns the HTTP status: 200 while
// the session lives, 404 once it is closed. A ping is a call: it marks the
// session used.
func (s *rawSession) ping() int {
	s.t.Helper()
	resp := s.post(s.t.Context(), `{"jsonrpc":"2.0","id":99,"method":"ping"}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// use makes a call in the session: it no longer counts as unused.
func (s *rawSession) use() {
	s.t.Helper()
	if code := s.ping(); code != http.StatusOK {
		s.t.Fatalf("ping: %d", code)
	}
}

// closedSoon waits until the session is answered 404: the gateway closes a
// session out of its limits at once, and the SDK forgets it just after.
func closedSoon(t *testing.T, s *rawSession, what string) {
	t.Helper()
	eventually(t, what+" closed", func() bool { return s.ping() == http.StatusNotFound })
}

// TestSessionsPerKey: a key at its limit that opens another session
// closes its own idle one, never used first, then the one idle longest;
// with each of its sessions busy it is refused 429; other keys are not
// touched.
func TestSessionsPerKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Rate, c.Sessions.PerKey = 0, 2 })
	used := openRaw(t, h, "agent")
	used.use()
	other := openRaw(t, h, "agent2")
	fresh := openRaw(t, h, "agent")
	third := openRaw(t, h, "agent") // closes fresh, though used is older
	closedSoon(t, fresh, "the never-used session")
	third.use()
	if used.ping() != http.StatusOK || third.ping() != http.StatusOK || other.ping() != http.StatusOK {
		t.Fatal("a session in use, or another key's, was closed")
	}
	used.use() // third is now the one idle longest
	fourth := openRaw(t, h, "agent")
	closedSoon(t, third, "the session idle longest")
	if used.ping() != http.StatusOK || fourth.ping() != http.StatusOK || other.ping() != http.StatusOK {
		t.Fatal("a session in use, or another key's, was closed")
	}
	if n := gateway.LiveSessions(h.gw); n != 3 {
		t.Errorf("%d live sessions, want 3", n)
	}

	// Both sessions of agent with a call in flight: no room.
	for i, s := range []*rawSession{used, fourth} {
		resp := s.post(t.Context(), progressCall(10+i, "slow", map[string]any{"id": "busy", "steps": "many"}))
		defer resp.Body.Close()
		sseEvents(t, resp.Body, func(e sseEvent) bool { return strings.Contains(e.Data, "notifications/progress") })
		defer func() {
			s.post(t.Context(), fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, 10+i)).Body.Close()
		}()
	}
	refused(t, h, "agent", http.StatusTooManyRequests, 5, -32030, "this agent key has 2 MCP sessions open, its limit")
	openRaw(t, h, "agent2") // another key still opens one
	if n := gateway.LiveSessions(h.gw); n != 4 {
		t.Errorf("%d live sessions after the refusal, want 4", n)
	}
}

// TestSessionsTotal: a full server refuses a key with no session of its
// own 503; a key with an idle session trades it for the new one, and no
// key's opening closes another key's session.
func TestSessionsTotal(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Rate, c.Sessions.Max = 0, 3 })
	a1 := openRaw(t, h, "agent")
	a1.use()
	a2 := openRaw(t, h, "agent")
	a2.use()
	b := openRaw(t, h, "agent2")
	b.use()
	// No session is unused: retry when one may have ended, in a minute.
	refused(t, h, "outsider", http.StatusServiceUnavailable, 60, -32030, "the server has 3 MCP sessions open, its limit")
	b2 := openRaw(t, h, "agent2")
	closedSoon(t, b, "agent2's idle session")
	for name, s := range map[string]*rawSession{"a1": a1, "a2": a2, "b2": b2} {
		if code := s.ping(); code != http.StatusOK {
			t.Errorf("%s: %d", name, code)
		}
	}
	if n := gateway.LiveSessions(h.gw); n != 3 {
		t.Errorf("%d live sessions, want 3", n)
	}
}

// TestSessionsInitializeRate: opening a session takes a token of the key's
// rate; a key over it gets 429 and no session, other keys open theirs.
func TestSessionsInitializeRate(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Rate = 6 }) // one in 10 s, bursts of one
	openRaw(t, h, "agent")
	refused(t, h, "agent", http.StatusTooManyRequests, 10, -32029, "more than 6 calls or new sessions in a minute; no session was opened")
	openRaw(t, h, "agent2")
	h.clock.Advance(10 * time.Second)
	openRaw(t, h, "agent")
}

// TestSessionsUnusedExpire: a session that made no call is closed once it
// is unused for 3 minutes; one that made a call lives on.
func TestSessionsUnusedExpire(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Rate = 0 })
	unused := openRaw(t, h, "agent")
	used := openRaw(t, h, "agent")
	resp := used.post(t.Context(), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The clock runs on with the wall clock's: 2.5 minutes, then 3 at
	// least, whatever this test's own time.
	h.clock.Advance(2*time.Minute + 30*time.Second)
	openRaw(t, h, "agent2") // an opening sweeps; the timer would in 3 minutes
	if n := gateway.LiveSessions(h.gw); n != 3 {
		t.Fatalf("%d live sessions before 3 minutes, want 3", n)
	}
	h.clock.Advance(30 * time.Second)
	openRaw(t, h, "agent2")
	if n := gateway.LiveSessions(h.gw); n != 3 {
		t.Errorf("%d live sessions after 3 minutes, want 3: the used one and agent2's", n)
	}
	closedSoon(t, unused, "the unused session")
	if code := used.ping(); code != http.StatusOK {
		t.Errorf("the used session: %d", code)
	}
}
