package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/testutil"
)

// sseEvent is one server-sent event as it is on the wire.
type sseEvent struct {
	ID, Name, Data string
}

// sseEvents reads the events of a stream until it ends or stop says so.
func sseEvents(t *testing.T, body io.Reader, stop func(sseEvent) bool) []sseEvent {
	t.Helper()
	lines := bufio.NewScanner(body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	var out []sseEvent
	var e sseEvent
	var data []string
	for lines.Scan() {
		line := strings.TrimSuffix(lines.Text(), "\r")
		switch {
		case strings.HasPrefix(line, "id:"):
			e.ID = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
		case strings.HasPrefix(line, "event:"):
			e.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		case line == "" && (e != sseEvent{} || len(data) > 0):
			e.Data = strings.Join(data, "\n")
			out = append(out, e)
			if stop != nil && stop(e) {
				return out
			}
			e, data = sseEvent{}, nil
		}
	}
	return out
}

// rawSession is an MCP session over /mcp driven by hand, with no SDK on
// the client side.
type rawSession struct {
	t      *testing.T
	base   string
	client *http.Client
	id     string
	// initialize are the events of the answer to initialize.
	initialize []sseEvent
}

func openRaw(t *testing.T, h *harness, key string) *rawSession {
	t.Helper()
	s := &rawSession{t: t, base: h.base, client: bearer(h.keys[key])}
	resp := s.post(t.Context(), `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wire","version":"1"}}}`)
	s.initialize = sseEvents(t, resp.Body, nil)
	resp.Body.Close()
	s.id = resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || s.id == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, s.id)
	}
	resp = s.post(t.Context(), `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %d", resp.StatusCode)
	}
	return s
}

func (s *rawSession) post(ctx context.Context, body string) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

// resume sends GET with the session's id and lastEventID.
func (s *rawSession) resume(session, lastEventID string) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(s.t.Context(), "GET", s.base+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Last-Event-ID", lastEventID)
	resp, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	return resp
}

// isResult reports whether an event is the answer to call id.
func isResult(e sseEvent, id int) bool {
	var m wireMsg
	return json.Unmarshal([]byte(e.Data), &m) == nil && string(m.ID) == fmt.Sprint(id) && m.Method == ""
}

// TestEventIDs: every event of a call's stream has an id, the stream's
// and its index, the priming event first; initialize's too.
func TestEventIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Rate = 0 })
	s := openRaw(t, h, "agent")
	if e := s.initialize; len(e) != 2 || e[0].Name != "prime" || e[0].ID == "" || e[1].ID == "" || !isResult(e[1], 0) {
		t.Errorf("initialize: events %+v, want the priming event and the answer, with ids", e)
	}
	resp := s.post(t.Context(), progressCall(1, "burst", nil))
	events := sseEvents(t, resp.Body, nil)
	resp.Body.Close()
	if len(events) != 7 || events[0].Name != "prime" || events[0].Data != "" || !isResult(events[6], 1) {
		t.Fatalf("events %+v, want the priming event, 5 progress notifications and the result", events)
	}
	stream, _, _ := strings.Cut(events[0].ID, "_")
	for i, e := range events {
		if want := fmt.Sprintf("%s_%d", stream, i); stream == "" || e.ID != want {
			t.Errorf("event %d has id %q, want %q", i, e.ID, want)
		}
	}
}

// TestResumeAfterDrop: a client that drops a call's stream after its first
// progress notification and comes back with GET, its session and the
// Last-Event-ID it saw gets the rest of the stream, each event once and in
// order, the result last.
func TestResumeAfterDrop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Rate = 0 })
	s := openRaw(t, h, "agent")
	ctx, drop := context.WithCancel(t.Context())
	resp := s.post(ctx, progressCall(1, "slow", map[string]any{"id": "r"}))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("call: %d", resp.StatusCode)
	}
	seen := sseEvents(t, resp.Body, func(e sseEvent) bool { return strings.Contains(e.Data, "notifications/progress") })
	drop()
	resp.Body.Close()
	if len(seen) != 2 || seen[0].Name != "prime" {
		t.Fatalf("before the drop: %+v, want the priming event and one progress notification", seen)
	}

	// The server learns of the drop a moment after the client made it:
	// until then the stream is still its, and a resume of it is refused
	// with 409, which a client answers by trying again.
	testutil.Eventually(t, func() bool {
		resp = s.resume(s.id, seen[1].ID)
		if resp.StatusCode == http.StatusConflict {
			resp.Body.Close()
			return false
		}
		return true
	}, "a resume taken once the server saw the drop")
	rest := sseEvents(t, resp.Body, func(e sseEvent) bool { return isResult(e, 1) })
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	all := append(seen, rest...)
	stream, _, _ := strings.Cut(seen[0].ID, "_")
	for i, e := range all {
		if want := fmt.Sprintf("%s_%d", stream, i); e.ID != want {
			t.Fatalf("event %d has id %q, want %q (events %+v)", i, e.ID, want, all)
		}
	}
	// The fixture's slow tool reports 3 steps, then answers.
	if len(all) != 5 || !isResult(all[4], 1) {
		t.Fatalf("events %+v, want the priming event, 3 progress notifications and the result", all)
	}
	for i, e := range all[1:4] {
		if !strings.Contains(e.Data, fmt.Sprintf(`"progress":%d`, i+1)) {
			t.Errorf("event %d is %s, want progress %d", i+1, e.Data, i+1)
		}
	}
}

// TestResumeOthersRefused: a Last-Event-ID of another session, or the
// session of another key, gets none of their events; the session's own
// client resumes it.
func TestResumeOthersRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Rate = 0 })
	mine := openRaw(t, h, "agent")
	sameKey := openRaw(t, h, "agent")
	otherKey := openRaw(t, h, "agent2")
	theirs := map[string]*rawSession{"same key": sameKey, "other key": otherKey}
	ids := map[string]string{}
	for name, s := range theirs {
		resp := s.post(t.Context(), progressCall(7, "burst", nil))
		events := sseEvents(t, resp.Body, nil)
		resp.Body.Close()
		if len(events) != 7 {
			t.Fatalf("%s: %d events", name, len(events))
		}
		ids[name] = events[0].ID
	}
	secret := func(body string) bool {
		return strings.Contains(body, "notifications/progress") || strings.Contains(body, "burst done")
	}

	for name, s := range theirs {
		// Their own client gets their events back.
		resp := s.resume(s.id, ids[name])
		events := sseEvents(t, resp.Body, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(events) != 6 || !isResult(events[5], 7) {
			t.Fatalf("%s resumes its own stream: %d, %+v", name, resp.StatusCode, events)
		}

		// Another session's event id in my session.
		resp = mine.resume(mine.id, ids[name])
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "not kept for this session") || secret(string(body)) {
			t.Errorf("%s's event id in my session: %d %q", name, resp.StatusCode, body)
		}
	}
	// My key with the other key's session: as if there were no such session.
	resp := mine.resume(otherKey.id, ids["other key"])
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.TrimSpace(string(body)) != "session not found" {
		t.Errorf("the other key's session: %d %q", resp.StatusCode, body)
	}
}

// TestResumeBadIDs: a Last-Event-ID this server never sent, or past the
// last event, is answered 400 with what is wrong.
func TestResumeBadIDs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Rate = 0 })
	s := openRaw(t, h, "agent")
	resp := s.post(t.Context(), progressCall(1, "burst", nil))
	events := sseEvents(t, resp.Body, nil)
	resp.Body.Close()
	if len(events) != 7 || events[0].ID == "" {
		t.Fatalf("events %+v, want 7 with ids", events)
	}
	stream, _, _ := strings.Cut(events[0].ID, "_")
	for _, tc := range []struct{ id, want string }{
		{"garbage", "the Last-Event-ID is not an event id this server sent"},
		{"", "the Last-Event-ID is not an event id this server sent"},
		{stream + "_-1", "the Last-Event-ID is not an event id this server sent"},
		{stream + "_1_2", "the Last-Event-ID is not an event id this server sent"},
		{stream + "_7", "not kept for this session"},
		{"AAAAAAAAAAAAAAAAAAAAAAAAAA_0", "not kept for this session"},
	} {
		resp := s.resume(s.id, tc.id)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), tc.want) {
			t.Errorf("Last-Event-ID %q: %d %q, want 400 %q", tc.id, resp.StatusCode, body, tc.want)
		}
	}
	// The last event's id is fine: nothing follows it.
	resp = s.resume(s.id, events[6].ID)
	rest := sseEvents(t, resp.Body, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(rest) != 0 {
		t.Errorf("after the last event: %d %+v", resp.StatusCode, rest)
	}
}
