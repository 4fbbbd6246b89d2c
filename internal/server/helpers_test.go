package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// start is where every test's clock begins.
var start = testutil.Start

// testServer is testserver's server with the API's helpers: the accounts
// acme (agent keys A and B, a revoked key, the approver alice) and other
// (the key X, the approver bob), at https://approve.example.com.
type testServer struct {
	*testserver.Server
	t *testing.T

	keyB, revoked string // more agent keys of acme (KeyA, KeyX: the World's)
	publicHost    string
	alice, bob    string // approver tokens

	nextID int
}

// newServer starts the server at https://approve.example.com; opts change
// its configuration.
func newServer(t *testing.T, opts ...func(*server.Config)) *testServer {
	t.Helper()
	return newServerWith(t, func(*approval.Config) {}, opts...)
}

// newServerWith is newServer with the approval service's configuration
// changed by svc.
func newServerWith(t *testing.T, svc func(*approval.Config), opts ...func(*server.Config)) *testServer {
	t.Helper()
	ts := testserver.New(t, testserver.Approval(func(_ *testserver.Server, c *approval.Config) { svc(c) }),
		testserver.Config(func(_ *testserver.Server, c *server.Config) {
			c.PublicURL = &url.URL{Scheme: "https", Host: "approve.example.com"}
			for _, o := range opts {
				o(c)
			}
		}))
	s := &testServer{Server: ts, t: t, publicHost: ts.Public.Host, alice: ts.ApproverToken}
	s.keyB, s.revoked = ts.Key("acme", "b"), ts.Key("acme", "old")
	if err := ts.Store.RevokeAgentKey(ts.Ctx, ts.Acme.ID, "old", start); err != nil {
		t.Fatalf("revoke key: %v", err)
	}
	s.bob = ts.Token("bob", "other")
	return s
}

// response is what the server answered, to any of the tests' helpers.
type response struct {
	status int
	header http.Header
	body   string
	cookie []*http.Cookie
}

// readResponse reads an answer whole.
func readResponse(t testing.TB, resp *http.Response) response {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(body), cookie: resp.Cookies()}
}

// newRequest builds an API call with a credential (none when empty) and a
// JSON body (none when empty).
func (s *testServer) newRequest(method, path, cred, body string) *http.Request {
	s.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(s.Ctx, method, s.URL+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	if path == "/mcp" {
		req.Host = s.publicHost // as an MCP client of the public URL sends it
	}
	return req
}

func (s *testServer) do(req *http.Request) response {
	s.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	return readResponse(s.t, resp)
}

func (s *testServer) call(method, path, cred, body string) response {
	s.t.Helper()
	return s.do(s.newRequest(method, path, cred, body))
}

// apiRequest is a request as the API shows it.
type apiRequest struct {
	ID           string          `json:"id"`
	Reference    string          `json:"reference"`
	Kind         string          `json:"kind"`
	Action       string          `json:"action"`
	Arguments    json.RawMessage `json:"arguments"`
	ArgsHash     string          `json:"args_hash"`
	Preview      string          `json:"preview"`
	PreviewHash  string          `json:"preview_hash"`
	Key          string          `json:"key"`
	Status       string          `json:"status"`
	CreatedAt    time.Time       `json:"created_at"`
	ExpiresAt    time.Time       `json:"expires_at"`
	DecidedAt    *time.Time      `json:"decided_at"`
	DecidedBy    string          `json:"decided_by"`
	Text         string          `json:"text"`
	AutoApproved bool            `json:"auto_approved"`
	ConsumedAt   *time.Time      `json:"consumed_at"`
	InboxURL     string          `json:"inbox_url"`
}

// request checks a successful answer with the status and decodes it.
func (r response) request(t *testing.T, status int) apiRequest {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	var out apiRequest
	if err := json.Unmarshal([]byte(r.body), &out); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return out
}

// wantError checks an error answer: the status, the JSON error body with the
// code, and returns its message.
func (r response) wantError(t *testing.T, what string, status int, code string) string {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	err := json.Unmarshal([]byte(r.body), &e)
	if r.status != status || err != nil || e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("%s: %d %s, want %d with code %q", what, r.status, strings.TrimSpace(r.body), status, code)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	return e.Error.Message
}

// toolBody is the body of a tool request with distinct arguments on each
// call, so that no two are identical.
func (s *testServer) toolBody(session string) string {
	s.nextID++
	return fmt.Sprintf(`{"kind":"tool","action":"Bash","arguments":{"n":%d,"command":"run %d"},"preview":"run %d","context":{"session_id":%q},"scope":{"commands":["run"]}}`, s.nextID, s.nextID, s.nextID, session)
}

// create makes a new pending request of the agent key over the API.
func (s *testServer) create(cred string) apiRequest {
	s.t.Helper()
	return s.call("POST", "/api/v1/requests", cred, s.toolBody("s1")).request(s.t, http.StatusCreated)
}

// decide posts a decision of alice's and expects it to win.
func (s *testServer) decide(id, decision string) apiRequest {
	s.t.Helper()
	return s.call("POST", "/api/v1/requests/"+id+"/decision", s.alice, `{"decision":"`+decision+`"}`).request(s.t, http.StatusOK)
}

// snapshot is everything a refused call must leave alone: every request of
// both accounts and the length of the audit log.
func (s *testServer) snapshot() string {
	s.t.Helper()
	var b strings.Builder
	entries, err := s.Store.AuditLog(s.Ctx, 0, 100000)
	if err != nil {
		s.t.Fatalf("AuditLog: %v", err)
	}
	fmt.Fprintf(&b, "audit entries: %d\n", len(entries))
	for _, acc := range []*countersign.Account{s.Acme, s.Other} {
		list, err := s.Store.Requests(s.Ctx, countersign.RequestFilter{AccountID: acc.ID, Limit: 500})
		if err != nil {
			s.t.Fatalf("Requests: %v", err)
		}
		for _, r := range list {
			fmt.Fprintf(&b, "%s %s %s %q %v %v %v\n", r.ID, r.Status, r.DecidedBy, r.Reason, r.ExpiresAt, r.DecidedAt, r.ConsumedAt)
		}
	}
	return b.String()
}

// unchanged fails the test when the store differs from the snapshot.
func (s *testServer) unchanged(what, before string) {
	s.t.Helper()
	if after := s.snapshot(); after != before {
		s.t.Errorf("%s changed the store:\nbefore:\n%safter:\n%s", what, before, after)
	}
}

// waitForWaiters blocks until the hub has n waiters, so that a test acts
// only once a long poll is really holding.
func (s *testServer) waitForWaiters(n int64) {
	s.t.Helper()
	if !testutil.Wait(func() bool { return s.Hub.Waiters() >= n }, testutil.EventuallyWithin) {
		s.t.Fatalf("hub has %d waiters, want %d", s.Hub.Waiters(), n)
	}
}

// async runs an HTTP call in a goroutine; the answer (or the transport's
// error) arrives on the channel.
func async(client *http.Client, req *http.Request) <-chan asyncResult {
	out := make(chan asyncResult, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			out <- asyncResult{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		out <- asyncResult{response{status: resp.StatusCode, header: resp.Header, body: string(body), cookie: resp.Cookies()}, err}
	}()
	return out
}

type asyncResult struct {
	response
	err error
}

// await returns an async answer, failing the test if none came within
// testutil.Receive's bound, which only guards against a hang.
func await(t *testing.T, ch <-chan asyncResult) response {
	t.Helper()
	res := testutil.Receive(t, ch, "the answer")
	if res.err != nil {
		t.Fatalf("call failed: %v", res.err)
	}
	return res.response
}
