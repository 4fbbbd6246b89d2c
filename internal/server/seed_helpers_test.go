package server_test

// Tests of the seed-compatible routes (/api/delete-requests…,
// /api/claude-events…): a client that signs the way the seed's Python
// clients do works unchanged, every refused call leaves the store alone, and
// a link in an e-mail never decides on GET.
//
// This file holds the environment the seed tests share: the real server
// over the real service on SQLite, and the helpers that call and check it.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// sdMaxBody is the server's bound on a body (64 KiB).
const sdMaxBody = 64 << 10

// sdHex64 is a link token: 32 random bytes in lowercase hex.
var sdHex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// sdEnv is testserver's server with the helpers of the seed's routes:
// the account ops with a designated key, and elsewhere.
type sdEnv struct {
	*testserver.Server // its URL is the public URL
	t                  *testing.T
	acct               *countersign.Account
	client             *http.Client

	seed      string // secret of the designated key of "ops"
	seedKeyID string
	plain     string // secret of an ordinary agent key of "ops"
	oldSeed   string // secret of a revoked designated key of "ops"
	approver  string // approver token of carol in "ops"
	stranger  string // approver token of dave in "elsewhere"
	channel   *sdChannel
}

// sdChannel stands for the account's notification channel: it receives
// the one-time links of every new request, as an e-mail to a human would,
// and the tests press them. It carries a link for every action a seed link
// route takes.
type sdChannel struct {
	mu    sync.Mutex
	links map[string]map[string]string // request id → action → token
}

func (c *sdChannel) Announce(_ context.Context, r *countersign.Request) ([]countersign.OutboxItem, []countersign.Link, error) {
	tokens, links := approval.NewLinks(approval.LinkApprove, approval.LinkDeny, approval.LinkRespond, approval.LinkAutoApprove, approval.LinkStop)
	c.mu.Lock()
	c.links[r.ID] = tokens
	c.mu.Unlock()
	return nil, links, nil
}

func (c *sdChannel) FollowUp(context.Context, *countersign.Request) ([]countersign.OutboxItem, error) {
	return nil, nil
}

func sdNew(t *testing.T) *sdEnv {
	t.Helper()
	return sdNewWith(t, approval.StepUpPolicy{})
}

// sdNewWith is sdNew under a step-up policy. Its clock starts at the wall
// clock's time, which the server's sessions run on.
func sdNewWith(t *testing.T, stepUp approval.StepUpPolicy) *sdEnv {
	t.Helper()
	channel := &sdChannel{links: map[string]map[string]string{}}
	s := testserver.New(t, testserver.At(time.Now().UTC().Truncate(time.Second)),
		testserver.Approval(func(_ *testserver.Server, c *approval.Config) {
			c.MaxPending, c.Notifier, c.StepUp = 1000, channel, stepUp
		}))
	ctx, clock := s.Ctx, s.Clock
	e := &sdEnv{Server: s, t: t, channel: channel}
	e.client = &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	e.acct = s.Account("ops")
	s.Account("elsewhere")
	k, secret, err := e.Admin.CreateSeedKey(ctx, "ops", "saferm")
	if err != nil {
		t.Fatalf("CreateSeedKey: %v", err)
	}
	e.seed, e.seedKeyID = secret, k.ID
	e.plain = s.Key("ops", "plain")
	if _, e.oldSeed, err = e.Admin.CreateSeedKey(ctx, "ops", "old"); err != nil {
		t.Fatalf("CreateSeedKey: %v", err)
	}
	if err := e.Store.RevokeAgentKey(ctx, e.acct.ID, "old", clock.Now()); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	s.Approver("carol", "ops")
	s.Approver("dave", "elsewhere")
	e.approver, e.stranger = s.Token("carol", "ops"), s.Token("dave", "elsewhere")
	return e
}

// with returns the environment reporting to t, for a subtest, so that a
// helper's Fatal ends the subtest and not its parent.
func (e *sdEnv) with(t *testing.T) *sdEnv {
	c := *e
	c.t = t
	return &c
}

func (e *sdEnv) do(req *http.Request) response {
	e.t.Helper()
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	return readResponse(e.t, resp)
}

// get fetches a path or a full URL, with a bearer credential when one is
// given.
func (e *sdEnv) get(target, bearer string) response {
	e.t.Helper()
	if strings.HasPrefix(target, "/") {
		target = e.URL + target
	}
	req, err := http.NewRequestWithContext(e.Ctx, http.MethodGet, target, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return e.do(req)
}

// post sends a body as the seed's clients do, with the signature in header
// (no header when sig is empty).
func (e *sdEnv) post(path, header string, body []byte, sig string) response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.Ctx, http.MethodPost, e.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set(header, sig)
	}
	return e.do(req)
}

// signed posts the payload serialised and signed with the designated key.
func (e *sdEnv) signed(path string, payload map[string]any) response {
	e.t.Helper()
	header := "X-SafeRM-Signature"
	if strings.HasPrefix(path, "/api/claude-events") {
		header = "X-Claude-Signature"
	}
	body := sdPyJSON(payload)
	return e.post(path, header, body, sdSign(e.seed, body))
}

// form posts a form to a link URL with the headers, as a browser would.
func (e *sdEnv) form(target string, headers map[string]string, values url.Values) response {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.Ctx, http.MethodPost, target, strings.NewReader(values.Encode()))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	return e.do(req)
}

// press posts a link's form from the public origin.
func (e *sdEnv) press(target string, values url.Values) response {
	e.t.Helper()
	return e.form(target, map[string]string{"Origin": e.URL}, values)
}

func (e *sdEnv) deletePayload(id, command string) map[string]any {
	return map[string]any{
		"request_id":     id,
		"command":        command,
		"risk_reasons":   []string{"recursive deletion (-r/-R)", "protected path: /var/www"},
		"affected_paths": []string{"/var/www/data"},
		"file_count":     47,
		"user":           "deploy",
		"hostname":       "prod-01",
		"cwd":            "/home/deploy",
		"timestamp":      int64(1700000000),
	}
}

func (e *sdEnv) eventPayload(id, session, tool string, input any) map[string]any {
	return map[string]any{
		"event_id":   id,
		"event_type": "tool_approval",
		"session_id": session,
		"tool_name":  tool,
		"tool_input": input,
		"timestamp":  "2024-01-01T00:00:00Z",
	}
}

// createDelete creates a delete request and returns its 201 answer.
func (e *sdEnv) createDelete(id, command string) map[string]any {
	e.t.Helper()
	return sdDecode(e.t, "create "+id, e.signed("/api/delete-requests", e.deletePayload(id, command)), http.StatusCreated)
}

// createEvent creates a Claude event and returns its 201 answer.
func (e *sdEnv) createEvent(id, session, tool string) map[string]any {
	e.t.Helper()
	return sdDecode(e.t, "create "+id, e.signed("/api/claude-events", e.eventPayload(id, session, tool, "run "+id)), http.StatusCreated)
}

// status polls a seed status route and returns its answer.
func (e *sdEnv) status(route, id string) map[string]any {
	e.t.Helper()
	return sdDecode(e.t, "status of "+id, e.get("/api/"+route+"/"+id+"/status", ""), http.StatusOK)
}

// wantStatus checks a status answer field for field, with no extra field.
func (e *sdEnv) wantStatus(route, id string, want map[string]any) {
	e.t.Helper()
	if got := e.status(route, id); !reflect.DeepEqual(got, want) {
		e.t.Errorf("status of %s: %v, want %v", id, got, want)
	}
}

// stored returns the request behind a seed id from the store.
func (e *sdEnv) stored(seedID string) *countersign.Request {
	e.t.Helper()
	r, err := e.Store.RequestBySeedID(e.Ctx, seedID)
	if err != nil {
		e.t.Fatalf("RequestBySeedID(%s): %v", seedID, err)
	}
	r, err = e.Store.Request(e.Ctx, r.ID)
	if err != nil {
		e.t.Fatalf("Request: %v", err)
	}
	return r
}

// snapshot is everything a refused call must leave alone: every request of
// every account with its state, every link decision, and the audit log's
// length.
func (e *sdEnv) snapshot() string {
	e.t.Helper()
	var b strings.Builder
	entries, err := e.Store.AuditLog(e.Ctx, 0, 100000)
	if err != nil {
		e.t.Fatalf("AuditLog: %v", err)
	}
	fmt.Fprintf(&b, "audit entries: %d\n", len(entries))
	accounts, err := e.Store.Accounts(e.Ctx)
	if err != nil {
		e.t.Fatalf("Accounts: %v", err)
	}
	for _, acc := range accounts {
		list, err := e.Store.Requests(e.Ctx, countersign.RequestFilter{AccountID: acc.ID, Limit: 1000})
		if err != nil {
			e.t.Fatalf("Requests: %v", err)
		}
		for _, r := range list {
			fmt.Fprintf(&b, "%s %s %s %s %q %v %v %v\n", r.ID, r.SeedID, r.Status, r.DecidedBy, r.Reason, r.ExpiresAt, r.DecidedAt, r.AutoApproveUntil)
		}
	}
	return b.String()
}

func (e *sdEnv) unchanged(what, before string) {
	e.t.Helper()
	if after := e.snapshot(); after != before {
		e.t.Errorf("%s changed the store:\nbefore:\n%safter:\n%s", what, before, after)
	}
}

// sdDecode checks a JSON answer's status and content type and decodes it,
// numbers as json.Number.
func sdDecode(t *testing.T, what string, r response, status int) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	dec := json.NewDecoder(strings.NewReader(r.body))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("%s: decode %s: %v", what, r.body, err)
	}
	return out
}

// sdWantError checks a JSON error answer: status and code.
func sdWantError(t *testing.T, what string, r response, status int, code string) {
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
}

// sdPage checks an HTML answer's status and headers and returns its body.
func sdPage(t *testing.T, what string, r response, status int) string {
	t.Helper()
	if r.status != status {
		t.Errorf("%s: status %d, want %d; body %s", what, r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	for k, v := range map[string]string{"Cache-Control": "no-store", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff"} {
		if got := r.header.Get(k); got != v {
			t.Errorf("%s: %s %q, want %q", what, k, got, v)
		}
	}
	// The link's token is in the page's URL: no policy may send it to
	// another origin.
	switch rp := r.header.Get("Referrer-Policy"); rp {
	case "no-referrer", "same-origin", "strict-origin":
	default:
		t.Errorf("%s: Referrer-Policy %q could hand the link's token to another site", what, rp)
	}
	if !strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("%s: Content-Security-Policy %q", what, r.header.Get("Content-Security-Policy"))
	}
	return r.body
}

// sdUnix checks that v is a whole number of seconds and returns it.
func sdUnix(t *testing.T, what string, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%s: %v (%T) is not a number", what, v, v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatalf("%s: %s is not whole seconds", what, n)
	}
	return i
}

// link is the URL of a seed link route for the request of the seed id,
// with the token its notification carried; minutes, when not empty, is the
// auto-approve route's last segment.
func (e *sdEnv) link(route, action, id string, minutes string) string {
	e.t.Helper()
	prefix := map[string]string{"delete-requests": "delete:", "claude-events": "claude:"}[route]
	r := e.stored(prefix + id)
	e.channel.mu.Lock()
	tok := e.channel.links[r.ID][action]
	e.channel.mu.Unlock()
	if tok == "" {
		e.t.Fatalf("no %s link was sent for %s", action, id)
	}
	u := e.URL + "/api/" + route + "/" + strings.ReplaceAll(action, "_", "-") + "/" + id + "/" + tok
	if minutes != "" {
		u += "/" + minutes
	}
	return u
}

// lastSegment is what follows the last slash of a URL.
func lastSegment(u string) string { return u[strings.LastIndex(u, "/")+1:] }

func sdString(v any) string {
	s, _ := v.(string)
	return s
}

func sdRandomHex() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func sdKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sdItems returns the list under key of a list answer.
func sdItems(t *testing.T, what string, out map[string]any, key string) []map[string]any {
	t.Helper()
	if out["success"] != true {
		t.Errorf("%s: success %v", what, out["success"])
	}
	raw, ok := out[key].([]any)
	if !ok {
		t.Fatalf("%s: %q is %T, want an array", what, key, out[key])
	}
	items := make([]map[string]any, len(raw))
	for i, v := range raw {
		if items[i], ok = v.(map[string]any); !ok {
			t.Fatalf("%s: item %d is %T", what, i, v)
		}
	}
	return items
}

func sdIDs(items []map[string]any) []string {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = sdString(it["id"])
	}
	sort.Strings(ids)
	return ids
}
