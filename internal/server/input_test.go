package server_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/server"
)

func TestCreateBadInput(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.create(s.KeyA)
	tooBig := `{"action":"x","preview":"` + strings.Repeat("y", 64<<10) + `"}`
	tests := []struct {
		name        string
		body        string
		contentType string
		status      int
		code        string
		message     string // a part of the message, when it matters
	}{
		{"malformed JSON", `{"action":`, "", 400, countersign.EINVALID, "not valid JSON"},
		{"not JSON", `action=x`, "", 400, countersign.EINVALID, "not valid JSON"},
		{"wrong type", `{"action":5}`, "", 400, countersign.EINVALID, `"action" must be a string`},
		{"wrong nested type", `{"action":"x","context":{"session_id":1}}`, "", 400, countersign.EINVALID, "must be a string"},
		{"unknown field", `{"action":"x","colour":"red"}`, "", 400, countersign.EINVALID, `unknown field "colour"`},
		{"unknown nested field", `{"action":"x","context":{"pid":1}}`, "", 400, countersign.EINVALID, `unknown field "pid"`},
		{"array", `[{"action":"x"}]`, "", 400, countersign.EINVALID, "JSON object"},
		{"two objects", `{"action":"x"} {"action":"y"}`, "", 400, countersign.EINVALID, "exactly one"},
		{"empty body", ``, "", 400, countersign.EINVALID, "JSON object"},
		{"unknown kind", `{"kind":"shell","action":"x"}`, "", 400, countersign.EINVALID, "kind"},
		{"no action", `{"kind":"tool"}`, "", 400, countersign.EINVALID, "action"},
		{"short ttl", `{"action":"x","ttl_seconds":5}`, "", 400, countersign.EINVALID, "ttl"},
		{"negative ttl", `{"action":"x","ttl_seconds":-60}`, "", 400, countersign.EINVALID, "ttl"},
		// 18446744174 s is 100 s more than 2^64 ns: it must not wrap
		// around into a short, valid TTL.
		{"huge ttl", `{"action":"x","ttl_seconds":18446744174}`, "", 400, countersign.EINVALID, "ttl"},
		{"body over 64 KiB", tooBig, "", 413, countersign.ETOOLARGE, "at most"},
		{"text/plain", `{"action":"x"}`, "text/plain", 415, countersign.EUNSUPPORTED, "application/json"},
		{"form", `{"action":"x"}`, "application/x-www-form-urlencoded", 415, countersign.EUNSUPPORTED, "application/json"},
		{"no Content-Type", `{"action":"x"}`, "none", 415, countersign.EUNSUPPORTED, "application/json"},
	}
	before := s.snapshot()
	for _, tt := range tests {
		req := s.newRequest("POST", "/api/v1/requests", s.KeyA, tt.body)
		switch tt.contentType {
		case "none":
			req.Header.Del("Content-Type")
		case "":
		default:
			req.Header.Set("Content-Type", tt.contentType)
		}
		msg := s.do(req).wantError(t, tt.name, tt.status, tt.code)
		if !strings.Contains(msg, tt.message) {
			t.Errorf("%s: message %q lacks %q", tt.name, msg, tt.message)
		}
	}
	s.unchanged("refused creates", before)

	// A charset parameter is fine.
	req := s.newRequest("POST", "/api/v1/requests", s.KeyA, s.toolBody("s1"))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	s.do(req).request(t, http.StatusCreated)
}

func TestDecisionBadInput(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	noSession := s.call("POST", "/api/v1/requests", s.KeyA, `{"action":"deploy"}`).request(t, http.StatusCreated)
	tests := []struct {
		name, id, body string
		status         int
		code           string
	}{
		{"unknown decision", r.ID, `{"decision":"maybe"}`, 400, countersign.EINVALID},
		{"no decision", r.ID, `{}`, 400, countersign.EINVALID},
		{"respond without text", r.ID, `{"decision":"respond"}`, 400, countersign.EINVALID},
		{"minutes as a string", r.ID, `{"decision":"approve","auto_approve_minutes":"5"}`, 400, countersign.EINVALID},
		{"61 minutes", r.ID, `{"decision":"approve","auto_approve_minutes":61}`, 400, countersign.EINVALID},
		{"window with deny", r.ID, `{"decision":"deny","auto_approve_minutes":5}`, 400, countersign.EINVALID},
		{"window without a session", noSession.ID, `{"decision":"approve","auto_approve_minutes":5}`, 400, countersign.EINVALID},
		{"unknown field", r.ID, `{"decision":"approve","force":true}`, 400, countersign.EINVALID},
		{"malformed", r.ID, `{"decision":`, 400, countersign.EINVALID},
		{"empty body", r.ID, ``, 400, countersign.EINVALID},
		{"unknown id", "req_doesnotexist", `{"decision":"approve"}`, 404, countersign.ENOTFOUND},
	}
	before := s.snapshot()
	for _, tt := range tests {
		s.call("POST", "/api/v1/requests/"+tt.id+"/decision", s.alice, tt.body).wantError(t, tt.name, tt.status, tt.code)
	}
	req := s.newRequest("POST", "/api/v1/requests/"+r.ID+"/decision", s.alice, `{"decision":"approve"}`)
	req.Header.Set("Content-Type", "text/plain")
	s.do(req).wantError(t, "decision as text/plain", 415, countersign.EUNSUPPORTED)
	s.unchanged("refused decisions", before)
}

func TestConsumeCancelBadInput(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	s.decide(r.ID, "approve")
	p := s.create(s.KeyA)
	before := s.snapshot()
	for _, path := range []string{"/api/v1/requests/" + r.ID + "/consume", "/api/v1/requests/" + p.ID + "/cancel"} {
		s.call("POST", path, s.KeyA, `{"force":true}`).wantError(t, path+" unknown field", 400, countersign.EINVALID)
		s.call("POST", path, s.KeyA, `nope`).wantError(t, path+" malformed", 400, countersign.EINVALID)
		req := s.newRequest("POST", path, s.KeyA, `{}`)
		req.Header.Set("Content-Type", "text/plain")
		s.do(req).wantError(t, path+" text/plain", 415, countersign.EUNSUPPORTED)
	}
	s.unchanged("refused consumes and cancels", before)
}

// TestCredentials: every route refuses a missing, malformed, unknown or
// revoked credential with 401 and a WWW-Authenticate challenge, and the wrong
// kind of credential with 403; none of them changes anything.
func TestCredentials(t *testing.T) {
	t.Parallel()
	var mcpCalls atomic.Int32
	s := newServer(t, func(c *server.Config) {
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mcpCalls.Add(1) })
	})
	// A revoked approver token, beside alice's live one.
	alice, err := s.Store.ApproverByUsername(s.Ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	_, revokedToken, err := s.Admin.CreateApproverToken(s.Ctx, "alice", "acme", "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Store.RevokeApproverToken(s.Ctx, alice.ID, "old", start); err != nil {
		t.Fatal(err)
	}
	r := s.create(s.KeyA)
	approved := s.create(s.KeyA)
	s.decide(approved.ID, "approve")
	before := s.snapshot()

	agentRoutes := []struct{ method, path, body string }{
		{"POST", "/api/v1/requests", s.toolBody("s9")},
		{"GET", "/api/v1/requests/" + r.ID, ""},
		{"GET", "/api/v1/requests/" + r.ID + "?wait=5s", ""},
		{"POST", "/api/v1/requests/" + approved.ID + "/consume", ""},
		{"POST", "/api/v1/requests/" + r.ID + "/cancel", ""},
		{"POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
	}
	approverRoutes := []struct{ method, path, body string }{
		{"GET", "/api/v1/requests?status=pending", ""},
		{"POST", "/api/v1/requests/" + r.ID + "/decision", `{"decision":"approve"}`},
	}
	unauthorized := []struct{ name, header string }{
		{"no credential", ""},
		{"basic auth", "Basic YWxpY2U6c2VjcmV0"},
		{"bearer without token", "Bearer"},
		{"bearer with blank token", "Bearer    "},
		{"garbage token", "Bearer hunter2"},
		{"unknown agent key", "Bearer " + countersign.NewSecret(countersign.AgentKeyPrefix)},
		{"unknown approver token", "Bearer " + countersign.NewSecret(countersign.ApproverTokenPrefix)},
		{"revoked agent key", "Bearer " + s.revoked},
		{"revoked approver token", "Bearer " + revokedToken},
	}
	check := func(method, path, body, header string, status int, code string) {
		t.Helper()
		req := s.newRequest(method, path, "", body)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		resp := s.do(req)
		resp.wantError(t, header+" on "+method+" "+path, status, code)
		// /mcp names its protected resource metadata, which starts an
		// OAuth client's flow (RFC 9728 §5.1).
		want := `Bearer realm="countersign"`
		if path == "/mcp" {
			want = `Bearer resource_metadata="https://approve.example.com/.well-known/oauth-protected-resource/mcp"`
			if tok, ok := strings.CutPrefix(header, "Bearer "); ok && strings.TrimSpace(tok) != "" {
				want = `Bearer error="invalid_token", ` + strings.TrimPrefix(want, "Bearer ")
			}
		}
		if got := resp.header.Get("WWW-Authenticate"); status == 401 && got != want {
			t.Errorf("%s %s: WWW-Authenticate %q, want %q", method, path, got, want)
		}
	}
	for _, rt := range append(agentRoutes, approverRoutes...) {
		for _, u := range unauthorized {
			// The revoked key and the unknown one of the other kind
			// are refused as the wrong kind on some routes.
			status, code := 401, countersign.EUNAUTHORIZED
			if wrongKind(rt.path, u.name) {
				status, code = 403, countersign.EFORBIDDEN
			}
			check(rt.method, rt.path, rt.body, u.header, status, code)
		}
	}
	for _, rt := range agentRoutes {
		check(rt.method, rt.path, rt.body, "Bearer "+s.alice, 403, countersign.EFORBIDDEN)
	}
	for _, rt := range approverRoutes {
		check(rt.method, rt.path, rt.body, "Bearer "+s.KeyA, 403, countersign.EFORBIDDEN)
	}
	s.unchanged("calls without a fitting credential", before)
	if n := mcpCalls.Load(); n != 0 {
		t.Errorf("the MCP gateway was reached %d times without an agent key", n)
	}
}

// wrongKind reports whether a credential of the test is of the other kind
// than the route takes, which is 403 even when the credential is unknown.
func wrongKind(path, credential string) bool {
	approverRoute := strings.HasSuffix(path, "/decision") || strings.HasSuffix(path, "?status=pending")
	switch credential {
	case "unknown approver token", "revoked approver token":
		return !approverRoute
	case "unknown agent key", "revoked agent key":
		return approverRoute
	}
	return false
}

// TestBodyLimitEveryRoute: a body declared larger than the route takes is
// refused with 413 on every route, also on those that read no body, as a
// JSON error on the API and an HTML page on pages, counted under its route,
// and changes nothing; /mcp takes bodies up to its own limit.
func TestBodyLimitEveryRoute(t *testing.T) {
	t.Parallel()
	var mcpCalls atomic.Int32
	const mcpLimit = 100 << 10
	s := newServer(t, func(c *server.Config) {
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mcpCalls.Add(1) })
		c.MCPMaxBody = mcpLimit
	})
	r := s.create(s.KeyA)
	before := s.snapshot()
	big := strings.Repeat("x", 64<<10+1)
	api := []struct{ method, path, cred string }{
		{"GET", "/api/v1/requests/" + r.ID, s.KeyA},
		{"GET", "/api/v1/requests/" + r.ID + "?wait=5s", s.KeyA},
		{"POST", "/api/v1/requests/" + r.ID + "/cancel", s.KeyA},
		{"GET", "/api/v1/requests?status=pending", s.alice},
		{"POST", "/api/v1/requests/" + r.ID + "/decision", s.alice},
		{"GET", "/api/delete-requests/del_1/status", ""},
		{"GET", "/healthz", ""},
		{"GET", "/health", ""},
		{"GET", "/static/inbox.css", ""},
	}
	for _, rt := range api {
		s.call(rt.method, rt.path, rt.cred, big).wantError(t, rt.method+" "+rt.path+" with 64 KiB + 1", http.StatusRequestEntityTooLarge, countersign.ETOOLARGE)
	}
	for _, rt := range []struct{ method, path string }{{"GET", "/approvals"}, {"POST", "/signin"}, {"POST", "/links/some-token"}} {
		req := s.newRequest(rt.method, rt.path, "", big)
		req.Host = "approve.example.com"
		req.Header.Set("Origin", "https://approve.example.com")
		if got := s.do(req); got.status != http.StatusRequestEntityTooLarge || !strings.HasPrefix(got.header.Get("Content-Type"), "text/html") {
			t.Errorf("%s %s with 64 KiB + 1: %d %s, want an HTML page with 413", rt.method, rt.path, got.status, got.header.Get("Content-Type"))
		}
	}
	s.call("GET", "/metrics", "", big).wantError(t, "GET /metrics with 64 KiB + 1", http.StatusRequestEntityTooLarge, countersign.ETOOLARGE)
	s.unchanged("bodies over the limit", before)

	// /mcp: a body over the API's limit but within the gateway's reaches
	// the gateway; one over the gateway's does not.
	if got := s.call("POST", "/mcp", s.KeyA, big); got.status != http.StatusOK || mcpCalls.Load() != 1 {
		t.Errorf("POST /mcp with 64 KiB + 1: %d %s, gateway reached %d times; want 200, once", got.status, got.body, mcpCalls.Load())
	}
	s.call("POST", "/mcp", s.KeyA, strings.Repeat("x", mcpLimit+1)).wantError(t, "POST /mcp over its limit", http.StatusRequestEntityTooLarge, countersign.ETOOLARGE)
	if n := mcpCalls.Load(); n != 1 {
		t.Errorf("the gateway was reached by a body over its limit")
	}

	// Each refusal is counted under its route.
	metrics := string(s.call("GET", "/metrics", "", "").body)
	for _, line := range []string{
		`countersign_http_requests_total{route="GET /healthz",code="413"} 1`,
		`countersign_http_requests_total{route="POST /signin",code="413"} 1`,
		`countersign_http_requests_total{route="GET /api/v1/requests/{id}",code="413"} 2`,
		`countersign_http_requests_total{route="/mcp",code="413"} 1`,
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	if strings.Contains(metrics, `route="unmatched"`) {
		t.Errorf("a refused body was counted under no route:\n%s", metrics)
	}
}
