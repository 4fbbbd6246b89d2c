package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/server"
)

// nestedJSON is an object holding arrays nested to depth levels in all.
func nestedJSON(depth int) string {
	return `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
}

// worstArguments are the arguments whose indented rendering is the largest
// the limits leave: 32 KiB of elements all at the deepest level the body's
// depth limit allows, each on a line of its own indented 2×63 spaces.
func worstArguments() string {
	d := limit.MaxJSONDepth - 1 // the arguments sit inside the body's object
	return `{"a":` + strings.Repeat("[", d-1) + strings.Repeat("1,", 16000) + "1" + strings.Repeat("]", d-1) + `}`
}

// tooDeepMessage is the message of a body nested too deep: it names the
// limit.
const tooDeepMessage = "the body nests objects and arrays deeper than the limit of 64 levels"

// TestAPIDepthLimit: a body nested deeper than the limit is refused with a
// 400 that names it and changes nothing; a body exactly at the limit is
// taken.
func TestAPIDepthLimit(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := func(argsDepth int) string {
		return `{"kind":"tool","action":"x","arguments":` + nestedJSON(argsDepth) + `,"preview":"p"}`
	}
	before := s.snapshot()
	for _, depth := range []int{limit.MaxJSONDepth, 9000} {
		msg := s.call("POST", "/api/v1/requests", s.KeyA, body(depth)).wantError(t, fmt.Sprintf("body of depth %d", depth+1), http.StatusBadRequest, "invalid")
		if msg != tooDeepMessage {
			t.Errorf("depth %d: message %q, want %q", depth+1, msg, tooDeepMessage)
		}
	}
	s.unchanged("bodies nested too deep", before)
	// Even a route that reads no fields refuses it.
	r := s.create(s.KeyA)
	if msg := s.call("POST", "/api/v1/requests/"+r.ID+"/cancel", s.KeyA, nestedJSON(limit.MaxJSONDepth+1)).wantError(t, "deep cancel", http.StatusBadRequest, "invalid"); msg != tooDeepMessage {
		t.Errorf("deep cancel: message %q, want %q", msg, tooDeepMessage)
	}
	before = s.snapshot()
	s.call("POST", "/api/v1/requests", s.KeyA, body(limit.MaxJSONDepth+1)).wantError(t, "deeper", http.StatusBadRequest, "invalid")
	s.unchanged("a body nested too deep", before)

	got := s.call("POST", "/api/v1/requests", s.KeyA, body(limit.MaxJSONDepth-1)).request(t, http.StatusCreated)
	if got.Arguments == nil || !strings.Contains(string(got.Arguments), strings.Repeat("[", limit.MaxJSONDepth-2)) {
		t.Errorf("arguments at the limit stored as %s", got.Arguments)
	}
}

// TestSeedDepthLimit: both seed routes refuse a signed body nested deeper
// than the limit with a 400 that names it; at the limit the Claude route
// takes an object tool_input, and the delete route gets past the depth to
// the check of its fields.
func TestSeedDepthLimit(t *testing.T) {
	t.Parallel()
	e := sdNew(t)
	post := func(path, header, body string) response {
		return e.post(path, header, []byte(body), sdSign(e.seed, []byte(body)))
	}
	deleteBody := func(depth int) string {
		return `{"request_id":"del_deep","command":"rm -rf x","affected_paths":` + nestedJSON(depth) + `}`
	}
	eventBody := func(id string, depth int) string {
		return `{"event_id":"` + id + `","event_type":"tool_approval","session_id":"s","tool_name":"mcp__x__y","tool_input":` +
			nestedJSON(depth) + `,"timestamp":"2024-01-01T00:00:00Z"}`
	}
	before := e.snapshot()
	for name, r := range map[string]response{
		"delete":      post("/api/delete-requests", "X-SafeRM-Signature", deleteBody(limit.MaxJSONDepth)),
		"claude":      post("/api/claude-events", "X-Claude-Signature", eventBody("ev_deep", limit.MaxJSONDepth)),
		"claude 9000": post("/api/claude-events", "X-Claude-Signature", eventBody("ev_deeper", 9000)),
	} {
		sdWantError(t, name, r, http.StatusBadRequest, "invalid")
		if msg := errorMessage(r.body); msg != tooDeepMessage {
			t.Errorf("%s: message %q, want %q", name, msg, tooDeepMessage)
		}
	}
	e.unchanged("seed bodies nested too deep", before)

	r := post("/api/delete-requests", "X-SafeRM-Signature", deleteBody(limit.MaxJSONDepth-1))
	sdWantError(t, "delete at the limit", r, http.StatusBadRequest, "invalid")
	if msg := errorMessage(r.body); strings.Contains(msg, "levels") || !strings.Contains(msg, "affected_paths") {
		t.Errorf("delete at the limit: message %q, want the field's type, not the depth", msg)
	}
	sdDecode(t, "claude at the limit", post("/api/claude-events", "X-Claude-Signature", eventBody("ev_ok", limit.MaxJSONDepth-1)), http.StatusCreated)

	// The widest tool_input at the deepest level gets a bounded preview.
	wide := strings.Repeat("[", limit.MaxJSONDepth-3) + strings.Repeat("1,", 15000) + "1" + strings.Repeat("]", limit.MaxJSONDepth-3)
	body := `{"event_id":"ev_wide","event_type":"tool_approval","session_id":"s","tool_name":"mcp__x__y","tool_input":{"a":` + wide + `},"timestamp":"t"}`
	sdDecode(t, "claude wide", post("/api/claude-events", "X-Claude-Signature", body), http.StatusCreated)
	if p := e.stored("claude:ev_wide").Preview; len(p) > approval.MaxPreview || !strings.Contains(p, "\n… (truncated, ") {
		t.Errorf("preview of the widest tool_input: %d bytes, marked %v", len(p), strings.Contains(p, "(truncated"))
	}
}

func errorMessage(body string) string {
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	json.Unmarshal([]byte(body), &e)
	return e.Error.Message
}

// TestMCPDepthLimit: an MCP message nested deeper than the limit is refused
// before the MCP handler sees it, with a JSON-RPC error that names the
// limit; one at the limit reaches the handler whole.
func TestMCPDepthLimit(t *testing.T) {
	t.Parallel()
	var got []string
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, string(b))
		w.WriteHeader(http.StatusAccepted)
	})
	s := newServer(t, func(c *server.Config) { c.MCP, c.MCPMaxBody = mcp, 1<<20 })
	message := func(argsDepth int) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":` + nestedJSON(argsDepth) + `}}`
	}
	for _, depth := range []int{limit.MaxJSONDepth - 1, 9000} {
		r := s.call("POST", "/mcp", s.KeyA, message(depth))
		var e struct {
			ID    *int `json:"id"`
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal([]byte(r.body), &e); r.status != http.StatusBadRequest || err != nil || e.ID != nil || e.Error.Code != -32602 ||
			e.Error.Message != "the message nests objects and arrays deeper than the limit of 64 levels" {
			t.Errorf("message of depth %d: %d %s", depth+2, r.status, r.body)
		}
	}
	if len(got) != 0 {
		t.Fatalf("the MCP handler saw a message nested too deep")
	}
	if r := s.call("POST", "/mcp", s.KeyA, message(limit.MaxJSONDepth-2)); r.status != http.StatusAccepted || len(got) != 1 || got[0] != message(limit.MaxJSONDepth-2) {
		t.Errorf("message at the limit: %d, the handler got %d messages", r.status, len(got))
	}
}

// TestDepthAfterTheBody: a closing bracket after the body's object ends
// neither the depth check nor the body: what follows it is checked too,
// and a body with anything after its object is refused.
func TestDepthAfterTheBody(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := `{"kind":"tool","action":"x","arguments":{},"preview":"p"}`
	before := s.snapshot()
	deep := strings.Repeat("[", 9000) + strings.Repeat("]", 9000)
	if msg := s.call("POST", "/api/v1/requests", s.KeyA, body+"]"+deep).wantError(t, "deep after a bracket", http.StatusBadRequest, "invalid"); msg != tooDeepMessage {
		t.Errorf("deep after a bracket: message %q, want %q", msg, tooDeepMessage)
	}
	for _, tail := range []string{"]", "}", "]x"} {
		if msg := s.call("POST", "/api/v1/requests", s.KeyA, body+tail).wantError(t, "tail "+tail, http.StatusBadRequest, "invalid"); msg != "the body must hold exactly one JSON object" {
			t.Errorf("a body with %q after its object: message %q", tail, msg)
		}
	}
	s.unchanged("a body with a tail", before)
}
