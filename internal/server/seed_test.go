package server_test

// Tests of the seed-compatible routes (/api/delete-requests…,
// /api/claude-events…): a client that signs the way the seed's Python
// clients do works unchanged, every refused call leaves the store alone, and
// a link in an e-mail never decides on GET.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// sdMaxBody is the server's bound on a body (64 KiB).
const sdMaxBody = 64 << 10

// sdHex64 is a link token: 32 random bytes in lowercase hex.
var sdHex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ---------------------------------------------------------------------------
// The seed's signer, in Go.

// sdPyJSON serialises v exactly as the seed's clients do:
// json.dumps(v, sort_keys=True, separators=(',', ':')) with Python's default
// ensure_ascii=True. Keys sorted by code point, no whitespace, every
// character outside ' '..'~' escaped as a lowercase \uXXXX (a surrogate pair
// above U+FFFF) except the short escapes \" \\ \n \r \t \b \f, and '/' left
// alone.
func sdPyJSON(v any) []byte {
	var b bytes.Buffer
	sdPyEncode(&b, v)
	return b.Bytes()
}

func sdPyEncode(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case string:
		sdPyString(b, x)
	case []string:
		b.WriteByte('[')
		for i, s := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			sdPyString(b, s)
		}
		b.WriteByte(']')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			sdPyEncode(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // UTF-8 byte order is code point order
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			sdPyString(b, k)
			b.WriteByte(':')
			sdPyEncode(b, x[k])
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("sdPyEncode: no Python form for %T", v))
	}
}

func sdPyString(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r >= 0x20 && r <= 0x7e:
				b.WriteRune(r)
			case r < 0x10000:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			}
		}
	}
	b.WriteByte('"')
}

// sdSign is the seed's signature: hex HMAC-SHA256 of the exact body.
func sdSign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// sdPython returns python3, or skips the test when there is none, unless
// COUNTERSIGN_TEST_STRICT=1 asks for a failure instead.
func sdPython(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		testutil.Missing(t, "python3 is not on PATH: the real seed client is not run")
	}
	return p
}

// sdRunPython runs testdata/seedclient/client.py with the arguments and
// stdin and returns its stdout.
func sdRunPython(t *testing.T, python string, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, append([]string{filepath.Join("testdata", "seedclient", "client.py")}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python3 client.py %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

// ---------------------------------------------------------------------------
// The environment: the real server over the real service on SQLite.

type sdEnv struct {
	t      *testing.T
	ctx    context.Context
	url    string // the public URL, which is the test server's
	store  *sqlite.DB
	clock  *testutil.Clock
	admin  *approval.Admin
	acct   *countersign.Account
	client *http.Client

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

type sdResp struct {
	status int
	header http.Header
	body   []byte
}

func sdNew(t *testing.T) *sdEnv {
	t.Helper()
	return sdNewWith(t, approval.StepUpPolicy{})
}

// sdNewWith is sdNew under a step-up policy.
func sdNewWith(t *testing.T, stepUp approval.StepUpPolicy) *sdEnv {
	t.Helper()
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "seed.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	clock := testutil.NewClock(time.Now().UTC().Truncate(time.Second))
	e := &sdEnv{t: t, ctx: ctx, store: store, clock: clock, admin: &approval.Admin{Store: store, Clock: clock}}
	e.client = &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if e.acct, err = e.admin.CreateAccount(ctx, "ops"); err != nil {
		t.Fatal(err)
	}
	if _, err = e.admin.CreateAccount(ctx, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	k, secret, err := e.admin.CreateSeedKey(ctx, "ops", "saferm")
	if err != nil {
		t.Fatalf("CreateSeedKey: %v", err)
	}
	e.seed, e.seedKeyID = secret, k.ID
	if _, e.plain, err = e.admin.CreateAgentKey(ctx, "ops", "plain"); err != nil {
		t.Fatalf("CreateAgentKey: %v", err)
	}
	if _, e.oldSeed, err = e.admin.CreateSeedKey(ctx, "ops", "old"); err != nil {
		t.Fatalf("CreateSeedKey: %v", err)
	}
	if err := store.RevokeAgentKey(ctx, e.acct.ID, "old", clock.Now()); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	e.approver = e.newApprover("ops", "carol")
	e.stranger = e.newApprover("elsewhere", "dave")

	logs := &testutil.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := metrics.NewRegistry()
	hub := approval.NewHub()
	e.channel = &sdChannel{links: map[string]map[string]string{}}
	svc := approval.New(store, clock, hub, approval.Config{MaxPending: 1000, Notifier: e.channel, StepUp: stepUp}, log, approval.NewMetrics(reg, hub))

	ts := httptest.NewUnstartedServer(nil)
	pub, err := url.Parse("http://" + ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{PublicURL: pub}, svc, &approval.Authenticator{Store: store}, reg, log)
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	if ts.URL != pub.String() {
		t.Fatalf("test server at %s, public URL %s", ts.URL, pub)
	}
	e.url = ts.URL
	return e
}

// newApprover adds an approver to the account and returns an API token of
// it. The row is written directly, with a hash nobody signs in with, so
// that no slow password hashing runs under the race detector.
func (e *sdEnv) newApprover(account, username string) string {
	e.t.Helper()
	ap := &countersign.Approver{ID: countersign.NewID("apr_"), Username: username, PasswordHash: "$argon2id$v=19$m=64,t=1,p=1$c2Q$c2Q", CreatedAt: e.clock.Now()}
	if err := e.store.CreateApprover(e.ctx, ap); err != nil {
		e.t.Fatalf("create approver: %v", err)
	}
	if _, err := e.admin.CreateApprover(e.ctx, account, username, ""); err != nil {
		e.t.Fatalf("add approver: %v", err)
	}
	_, tok, err := e.admin.CreateApproverToken(e.ctx, username, account, "sd")
	if err != nil {
		e.t.Fatalf("create approver token: %v", err)
	}
	return tok
}

// with returns the environment reporting to t, for a subtest, so that a
// helper's Fatal ends the subtest and not its parent.
func (e *sdEnv) with(t *testing.T) *sdEnv {
	c := *e
	c.t = t
	return &c
}

func (e *sdEnv) do(req *http.Request) sdResp {
	e.t.Helper()
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatalf("%s %s: read: %v", req.Method, req.URL.Path, err)
	}
	return sdResp{resp.StatusCode, resp.Header, body}
}

// get fetches a path or a full URL, with a bearer credential when one is
// given.
func (e *sdEnv) get(target, bearer string) sdResp {
	e.t.Helper()
	if strings.HasPrefix(target, "/") {
		target = e.url + target
	}
	req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, target, nil)
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
func (e *sdEnv) post(path, header string, body []byte, sig string) sdResp {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.url+path, bytes.NewReader(body))
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
func (e *sdEnv) signed(path string, payload map[string]any) sdResp {
	e.t.Helper()
	header := "X-SafeRM-Signature"
	if strings.HasPrefix(path, "/api/claude-events") {
		header = "X-Claude-Signature"
	}
	body := sdPyJSON(payload)
	return e.post(path, header, body, sdSign(e.seed, body))
}

// form posts a form to a link URL with the headers, as a browser would.
func (e *sdEnv) form(target string, headers map[string]string, values url.Values) sdResp {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, target, strings.NewReader(values.Encode()))
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
func (e *sdEnv) press(target string, values url.Values) sdResp {
	e.t.Helper()
	return e.form(target, map[string]string{"Origin": e.url}, values)
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
	r, err := e.store.RequestBySeedID(e.ctx, seedID)
	if err != nil {
		e.t.Fatalf("RequestBySeedID(%s): %v", seedID, err)
	}
	r, err = e.store.Request(e.ctx, r.ID)
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
	entries, err := e.store.AuditLog(e.ctx, 0, 100000)
	if err != nil {
		e.t.Fatalf("AuditLog: %v", err)
	}
	fmt.Fprintf(&b, "audit entries: %d\n", len(entries))
	accounts, err := e.store.Accounts(e.ctx)
	if err != nil {
		e.t.Fatalf("Accounts: %v", err)
	}
	for _, acc := range accounts {
		list, err := e.store.Requests(e.ctx, countersign.RequestFilter{AccountID: acc.ID, Limit: 1000})
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
func sdDecode(t *testing.T, what string, r sdResp, status int) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.UseNumber()
	var out map[string]any
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("%s: decode %s: %v", what, r.body, err)
	}
	return out
}

// sdWantError checks a JSON error answer: status and code.
func sdWantError(t *testing.T, what string, r sdResp, status int, code string) {
	t.Helper()
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	err := json.Unmarshal(r.body, &e)
	if r.status != status || err != nil || e.Error.Code != code || e.Error.Message == "" {
		t.Errorf("%s: %d %s, want %d with code %q", what, r.status, bytes.TrimSpace(r.body), status, code)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
}

// sdPage checks an HTML answer's status and headers and returns its body.
func sdPage(t *testing.T, what string, r sdResp, status int) string {
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
	return string(r.body)
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
	u := e.url + "/api/" + route + "/" + strings.ReplaceAll(action, "_", "-") + "/" + id + "/" + tok
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

// ---------------------------------------------------------------------------
// Tests.

// The Go signer serialises like Python's json.dumps(sort_keys=True,
// separators=(',', ':')), checked against literal Python output and, when
// python3 is there, against Python itself.
func TestSdPythonJSON(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{map[string]any{"b": 1, "a": "x"}, `{"a":"x","b":1}`},
		{"rm -rf /srv/café/données", `"rm -rf /srv/caf\u00e9/donn\u00e9es"`},
		{"q\"b\\s\n\r\t\b\f\x01\x1f\x7f<>&'/", `"q\"b\\s\n\r\t\b\f\u0001\u001f\u007f<>&'/"`},
		{"\u2028 € — 😀", `"\u2028 \u20ac \u2014 \ud83d\ude00"`},
		{map[string]any{"z": []any{1, "é", nil, true, false, int64(-3)}, "a": map[string]any{"c": []string{}, "b": ""}, "é": 0, "Z": 0},
			`{"Z":0,"a":{"b":"","c":[]},"z":[1,"\u00e9",null,true,false,-3],"\u00e9":0}`},
	}
	for _, c := range cases {
		if got := string(sdPyJSON(c.v)); got != c.want {
			t.Errorf("sdPyJSON(%#v) = %s, want %s", c.v, got, c.want)
		}
	}

	t.Run("python", func(t *testing.T) {
		python := sdPython(t)
		values := make([]any, len(cases))
		for i, c := range cases {
			values[i] = c.v
		}
		in, err := json.Marshal(values)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(string(sdRunPython(t, python, in, "dump")), "\n"), "\n")
		if len(lines) != len(cases) {
			t.Fatalf("python printed %d lines, want %d: %q", len(lines), len(cases), lines)
		}
		for i, c := range cases {
			if got := string(sdPyJSON(c.v)); lines[i] != got {
				t.Errorf("case %d: python %s, Go %s", i, lines[i], got)
			}
		}
	})
}

func TestSeedDeleteCreate(t *testing.T) {
	e := sdNew(t)
	const id = "del_1700000000_12345"
	payload := e.deletePayload(id, "rm -rf /var/www/data")
	body := sdPyJSON(payload)
	out := sdDecode(t, "create", e.post("/api/delete-requests", "X-SafeRM-Signature", body, sdSign(e.seed, body)), http.StatusCreated)
	if out["success"] != true || out["request_id"] != id {
		t.Errorf("create: %v", out)
	}
	// No one-time link goes back to the key's holder: approval_url is the
	// request's inbox page, where only a signed-in approver decides.
	r := e.stored("delete:" + id)
	if got, want := out["approval_url"], e.url+"/approvals/"+r.ID; got != want || out["inbox_url"] != want {
		t.Errorf("approval_url %v and inbox_url %v, want both %s", got, out["inbox_url"], want)
	}
	for k, v := range out {
		if s, _ := v.(string); sdHex64.MatchString(lastSegment(s)) || strings.Contains(k, "deny") {
			t.Errorf("the answer carries a link: %s = %v", k, v)
		}
	}
	if got, want := sdUnix(t, "expires_at", out["expires_at"]), e.clock.Now().Add(10*time.Minute).Unix(); got != want {
		t.Errorf("expires_at %d, want %d (ten minutes ahead)", got, want)
	}
	if !bytes.Equal(r.Seed, body) || r.KeyID != e.seedKeyID || r.Status != countersign.StatusPending ||
		r.Kind != countersign.KindRm || r.Action != "rm -rf /var/www/data" ||
		r.Context.User != "deploy" || r.Context.Host != "prod-01" || r.Context.Cwd != "/home/deploy" ||
		!slices.Equal(r.RiskReasons, []string{"recursive deletion (-r/-R)", "protected path: /var/www"}) {
		t.Errorf("stored request: %+v", r)
	}
	e.wantStatus("delete-requests", id, map[string]any{"status": "pending", "approved_by": nil})

	before := e.snapshot()

	t.Run("same body again", func(t *testing.T) {
		e := e.with(t)
		out := sdDecode(t, "again", e.post("/api/delete-requests", "X-SafeRM-Signature", body, sdSign(e.seed, body)), http.StatusOK)
		if out["success"] != true || out["request_id"] != id {
			t.Errorf("again: %v", out)
		}
		if out["approval_url"] != e.url+"/approvals/"+r.ID {
			t.Errorf("again: approval_url %v", out["approval_url"])
		}
		e.unchanged("the same body again", before)
	})

	t.Run("different body same id", func(t *testing.T) {
		e := e.with(t)
		for name, change := range map[string]func(p map[string]any){
			"command":      func(p map[string]any) { p["command"] = "rm -rf /var/www" },
			"hostname":     func(p map[string]any) { p["hostname"] = "prod-02" },
			"user":         func(p map[string]any) { p["user"] = "root" },
			"risk_reasons": func(p map[string]any) { p["risk_reasons"] = []string{} },
			"timestamp":    func(p map[string]any) { p["timestamp"] = int64(1700000001) },
		} {
			p := e.deletePayload(id, "rm -rf /var/www/data")
			change(p)
			sdWantError(t, "other "+name+", same request_id", e.signed("/api/delete-requests", p), http.StatusConflict, countersign.ECONFLICT)
		}
		e.unchanged("a different body with the same request_id", before)
	})

	t.Run("unauthorized", func(t *testing.T) {
		e := e.with(t)
		const id2 = "del_1700000000_999"
		good := sdPyJSON(e.deletePayload(id2, "rm -rf /srv/x"))
		tampered := bytes.Replace(good, []byte("/srv/x"), []byte("/srv/y"), 1)
		for _, c := range []struct {
			name, header, sig string
			body              []byte
		}{
			{"bad signature", "X-SafeRM-Signature", sdSign("not the secret", good), good},
			{"missing signature", "X-SafeRM-Signature", "", good},
			{"malformed signature", "X-SafeRM-Signature", "zz" + sdSign(e.seed, good)[2:], good},
			{"short signature", "X-SafeRM-Signature", sdSign(e.seed, good)[:32], good},
			{"ordinary key's secret", "X-SafeRM-Signature", sdSign(e.plain, good), good},
			{"revoked designated key", "X-SafeRM-Signature", sdSign(e.oldSeed, good), good},
			{"tampered after signing", "X-SafeRM-Signature", sdSign(e.seed, good), tampered},
			{"signature in the Claude header", "X-Claude-Signature", sdSign(e.seed, good), good},
			{"the secret itself", "X-SafeRM-Signature", e.seed, good},
		} {
			sdWantError(t, c.name, e.post("/api/delete-requests", c.header, c.body, c.sig), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
		}
		if _, err := e.store.RequestBySeedID(e.ctx, "delete:"+id2); countersign.ErrorCode(err) != countersign.ENOTFOUND {
			t.Errorf("a refused request was stored: %v", err)
		}
		e.unchanged("unauthorized requests", before)
		sdWantError(t, "status of the refused", e.get("/api/delete-requests/"+id2+"/status", ""), http.StatusNotFound, countersign.ENOTFOUND)
	})

	t.Run("bad input", func(t *testing.T) {
		e := e.with(t)
		good := string(sdPyJSON(e.deletePayload("del_bad", "rm -rf /srv/x")))
		for name, b := range map[string]string{
			"malformed":            good[:len(good)-1],
			"not JSON":             "request_id=del_bad",
			"empty":                "",
			"an array":             "[]",
			"two objects":          good + good,
			"unknown field":        strings.Replace(good, `{"affected_paths"`, `{"admin":true,"affected_paths"`, 1),
			"file_count a string":  strings.Replace(good, `"file_count":47`, `"file_count":"47"`, 1),
			"file_count a float":   strings.Replace(good, `"file_count":47`, `"file_count":4.5`, 1),
			"risk_reasons string":  strings.Replace(good, `"risk_reasons":[`, `"risk_reasons":"x","x":[`, 1),
			"request_id a number":  strings.Replace(good, `"request_id":"del_bad"`, `"request_id":7`, 1),
			"request_id with '/'":  strings.Replace(good, `"request_id":"del_bad"`, `"request_id":"../del"`, 1),
			"request_id empty":     strings.Replace(good, `"request_id":"del_bad"`, `"request_id":""`, 1),
			"negative file_count":  strings.Replace(good, `"file_count":47`, `"file_count":-1`, 1),
			"empty command":        strings.Replace(good, `"command":"rm -rf /srv/x"`, `"command":""`, 1),
			"command not a string": strings.Replace(good, `"command":"rm -rf /srv/x"`, `"command":["rm"]`, 1),
		} {
			if b == good {
				t.Fatalf("%s: the replacement did not apply", name)
			}
			sdWantError(t, name, e.post("/api/delete-requests", "X-SafeRM-Signature", []byte(b), sdSign(e.seed, []byte(b))), http.StatusBadRequest, countersign.EINVALID)
		}
		e.unchanged("bad input", before)
	})

	t.Run("too large", func(t *testing.T) {
		e := e.with(t)
		base := sdPyJSON(e.deletePayload("del_big", "rm -rf /srv/big"))
		over := append(append([]byte{}, base...), bytes.Repeat([]byte(" "), sdMaxBody+1-len(base))...)
		sdWantError(t, "64 KiB + 1", e.post("/api/delete-requests", "X-SafeRM-Signature", over, sdSign(e.seed, over)), http.StatusRequestEntityTooLarge, countersign.ETOOLARGE)
		sdWantError(t, "64 KiB + 1 on the Claude route", e.post("/api/claude-events", "X-Claude-Signature", over, sdSign(e.seed, over)), http.StatusRequestEntityTooLarge, countersign.ETOOLARGE)
		e.unchanged("too large", before)
		exact := over[:sdMaxBody]
		sdDecode(t, "exactly 64 KiB", e.post("/api/delete-requests", "X-SafeRM-Signature", exact, sdSign(e.seed, exact)), http.StatusCreated)
	})
}

func TestSeedDeleteLinks(t *testing.T) {
	e := sdNew(t)
	const id = "del_1700000000_1"
	e.createDelete(id, "rm -rf /var/www/data")
	approveURL, denyURL := e.link("delete-requests", approval.LinkApprove, id, ""), e.link("delete-requests", approval.LinkDeny, id, "")
	approveTok, denyTok := lastSegment(approveURL), lastSegment(denyURL)
	e.createDelete("del_1700000000_2", "rm -rf /var/www/other")
	otherTok := lastSegment(e.link("delete-requests", approval.LinkApprove, "del_1700000000_2", ""))
	otherDenyURL := e.link("delete-requests", approval.LinkDeny, "del_1700000000_2", "")

	e.wantStatus("delete-requests", id, map[string]any{"status": "pending", "approved_by": nil})
	sdWantError(t, "status of an unknown id", e.get("/api/delete-requests/del_nope/status", ""), http.StatusNotFound, countersign.ENOTFOUND)
	sdWantError(t, "delete status of a Claude id", e.get("/api/claude-events/"+id+"/status", ""), http.StatusNotFound, countersign.ENOTFOUND)

	before := e.snapshot()

	t.Run("GET changes nothing", func(t *testing.T) {
		e := e.with(t)
		for i := range 3 {
			page := sdPage(t, "GET approval_url", e.get(approveURL, ""), http.StatusOK)
			if i == 0 {
				for _, want := range []string{
					"rm -rf /var/www/data",
					`<form method="post" action="/api/delete-requests/approve/` + id + "/" + approveTok + `"`,
					"Approve ",
					"/var/www/data",
					"recursive deletion (-r/-R)",
					"deploy@prod-01",
				} {
					if !strings.Contains(page, want) {
						t.Errorf("confirm page lacks %q:\n%s", want, page)
					}
				}
			}
			page = sdPage(t, "GET deny_url", e.get(denyURL, ""), http.StatusOK)
			if !strings.Contains(page, `<form method="post" action="/api/delete-requests/deny/`+id+"/"+denyTok+`"`) {
				t.Errorf("deny page lacks its form:\n%s", page)
			}
			req, _ := http.NewRequestWithContext(e.ctx, http.MethodHead, approveURL, nil)
			if r := e.do(req); r.status != http.StatusOK {
				t.Errorf("HEAD approval_url: %d", r.status)
			}
		}
		e.unchanged("GET of the links", before)
		e.wantStatus("delete-requests", id, map[string]any{"status": "pending", "approved_by": nil})
	})

	t.Run("foreign origin", func(t *testing.T) {
		e := e.with(t)
		for name, h := range map[string]map[string]string{
			"foreign Origin":               {"Origin": "https://evil.example"},
			"Origin null":                  {"Origin": "null"},
			"Origin of another port":       {"Origin": "http://127.0.0.1:1"},
			"no Origin, no Sec-Fetch-Site": {},
			"no Origin, cross-site":        {"Sec-Fetch-Site": "cross-site"},
			"foreign Origin, same-origin":  {"Origin": "https://evil.example", "Sec-Fetch-Site": "same-origin"},
		} {
			for _, u := range []string{approveURL, denyURL} {
				sdPage(t, name, e.form(u, h, url.Values{"reason": {"x"}}), http.StatusForbidden)
			}
		}
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, err := http.NewRequestWithContext(e.ctx, method, approveURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "evil.example"
			req.Header.Set("Origin", "http://evil.example")
			sdPage(t, method+" under another Host", e.do(req), http.StatusMisdirectedRequest)
		}
		e.unchanged("POSTs from elsewhere", before)
		e.wantStatus("delete-requests", id, map[string]any{"status": "pending", "approved_by": nil})
	})

	t.Run("not found alike", func(t *testing.T) {
		e := e.with(t)
		base := e.url + "/api/delete-requests/"
		var first []byte
		for name, u := range map[string]string{
			"another request's token":     base + "approve/" + id + "/" + otherTok,
			"a wrong token":               base + "approve/" + id + "/" + sdRandomHex(),
			"a short token":               base + "approve/" + id + "/" + approveTok[:20],
			"a long token":                base + "approve/" + id + "/" + approveTok + "00",
			"the approve token on deny":   base + "deny/" + id + "/" + approveTok,
			"the deny token on approve":   base + "approve/" + id + "/" + denyTok,
			"an unknown id":               base + "approve/del_nope/" + approveTok,
			"the token under another id":  base + "approve/del_1700000000_2/" + approveTok,
			"the Claude route":            e.url + "/api/claude-events/approve/" + id + "/" + approveTok,
			"the Claude respond route":    e.url + "/api/claude-events/respond/" + id + "/" + approveTok,
			"the auto-approve route":      e.url + "/api/claude-events/auto-approve/" + id + "/" + approveTok + "/5",
			"a non-hex token of 64 chars": base + "approve/" + id + "/" + strings.Repeat("z", 64),
		} {
			for _, r := range []sdResp{e.get(u, ""), e.press(u, nil)} {
				page := sdPage(t, name, r, http.StatusNotFound)
				if first == nil {
					first = []byte(page)
				} else if page != string(first) {
					t.Errorf("%s: the 404 differs from the others:\n%s\nvs\n%s", name, page, first)
				}
			}
		}
		e.unchanged("links that do not fit", before)
	})

	t.Run("POST decides once", func(t *testing.T) {
		e := e.with(t)
		page := sdPage(t, "POST approval_url", e.press(approveURL, nil), http.StatusOK)
		if !strings.Contains(page, "Done") || strings.Contains(page, `<form method="post"`) {
			t.Errorf("decided page:\n%s", page)
		}
		e.wantStatus("delete-requests", id, map[string]any{"status": "approved", "approved_by": "admin"})
		if r := e.stored("delete:" + id); r.Status != countersign.StatusApproved || r.DecidedBy != approval.DecidedByLink {
			t.Errorf("stored: %s by %q", r.Status, r.DecidedBy)
		}
		after := e.snapshot()

		page = sdPage(t, "POST approval_url again", e.press(approveURL, nil), http.StatusConflict)
		if !strings.Contains(page, `class="error"`) || strings.Contains(page, "Done") || strings.Contains(page, `<form method="post"`) {
			t.Errorf("second POST page:\n%s", page)
		}
		sdPage(t, "POST deny_url after approval", e.press(denyURL, url.Values{"reason": {"no"}}), http.StatusConflict)
		page = sdPage(t, "GET approval_url after approval", e.get(approveURL, ""), http.StatusOK)
		if strings.Contains(page, `<form method="post"`) {
			t.Errorf("a decided request still offers a form:\n%s", page)
		}
		e.unchanged("a used link", after)
		e.wantStatus("delete-requests", id, map[string]any{"status": "approved", "approved_by": "admin"})
	})

	t.Run("same-origin without Origin", func(t *testing.T) {
		e := e.with(t)
		sdPage(t, "deny with Sec-Fetch-Site", e.form(otherDenyURL, map[string]string{"Sec-Fetch-Site": "same-origin"}, url.Values{"reason": {"not today"}}), http.StatusOK)
		e.wantStatus("delete-requests", "del_1700000000_2", map[string]any{"status": "denied", "approved_by": "admin"})
		if r := e.stored("delete:del_1700000000_2"); r.Reason != "not today" {
			t.Errorf("deny reason %q", r.Reason)
		}
	})
}

func TestSeedDeleteLinkExpired(t *testing.T) {
	e := sdNew(t)
	e.createDelete("del_old_1", "rm -rf /srv/a")
	e.createDelete("del_old_2", "rm -rf /srv/b")
	approveURL, denyURL := e.link("delete-requests", approval.LinkApprove, "del_old_1", ""), e.link("delete-requests", approval.LinkDeny, "del_old_1", "")

	e.clock.Advance(10*time.Minute + time.Second)

	sdPage(t, "POST approval_url after expiry", e.press(approveURL, nil), http.StatusConflict)
	e.wantStatus("delete-requests", "del_old_1", map[string]any{"status": "expired", "approved_by": nil})
	sdPage(t, "POST deny_url after expiry", e.press(denyURL, nil), http.StatusConflict)
	page := sdPage(t, "GET approval_url after expiry", e.get(approveURL, ""), http.StatusOK)
	if strings.Contains(page, `<form method="post"`) || !strings.Contains(page, "expired") {
		t.Errorf("expired page:\n%s", page)
	}
	// A request nobody opened reads as expired on its status route too.
	e.wantStatus("delete-requests", "del_old_2", map[string]any{"status": "expired", "approved_by": nil})
	if r := e.stored("delete:del_old_1"); r.Status != countersign.StatusExpired || r.DecidedBy != "" {
		t.Errorf("stored: %s by %q", r.Status, r.DecidedBy)
	}
}

func TestSeedDeleteList(t *testing.T) {
	e := sdNew(t)
	e.createDelete("del_a", "rm -rf /srv/a")
	e.createDelete("del_b", "rm -rf /srv/b")
	e.createDelete("del_c", "rm -rf /srv/c")
	sdPage(t, "approve del_b", e.press(e.link("delete-requests", approval.LinkApprove, "del_b", ""), nil), http.StatusOK)

	all := sdItems(t, "list", sdDecode(t, "list", e.get("/api/delete-requests", e.approver), http.StatusOK), "requests")
	if got := sdIDs(all); !slices.Equal(got, []string{"del_a", "del_b", "del_c"}) {
		t.Fatalf("list: %v", got)
	}
	seedFields := []string{"id", "command", "risk_reasons", "affected_paths", "file_count", "user", "hostname", "cwd",
		"status", "created_at", "expires_at", "approved_by", "approved_at"}
	now := e.clock.Now().Unix()
	for _, it := range all {
		for _, f := range seedFields {
			if _, ok := it[f]; !ok {
				t.Errorf("%v lacks %q", it["id"], f)
			}
		}
		for _, k := range sdKeys(it) {
			if strings.Contains(k, "token") || strings.Contains(k, "seed") || strings.Contains(k, "hash") {
				t.Errorf("%v shows %q", it["id"], k)
			}
		}
		id := sdString(it["id"])
		if it["command"] != "rm -rf /srv/"+id[len(id)-1:] || it["user"] != "deploy" || it["hostname"] != "prod-01" ||
			it["cwd"] != "/home/deploy" || it["file_count"] != json.Number("47") ||
			!reflect.DeepEqual(it["risk_reasons"], []any{"recursive deletion (-r/-R)", "protected path: /var/www"}) ||
			!reflect.DeepEqual(it["affected_paths"], []any{"/var/www/data"}) {
			t.Errorf("item: %v", it)
		}
		if sdUnix(t, "created_at", it["created_at"]) != now || sdUnix(t, "expires_at", it["expires_at"]) != now+600 {
			t.Errorf("%s: created_at %v expires_at %v, want %d and %d", id, it["created_at"], it["expires_at"], now, now+600)
		}
		if id == "del_b" {
			if it["status"] != "approved" || it["approved_by"] != "email link" || sdUnix(t, "approved_at", it["approved_at"]) != now {
				t.Errorf("del_b: %v", it)
			}
		} else if it["status"] != "pending" || it["approved_by"] != nil || it["approved_at"] != nil {
			t.Errorf("%s: %v", id, it)
		}
	}

	for q, want := range map[string][]string{
		"?status=pending":          {"del_a", "del_c"},
		"?status=approved":         {"del_b"},
		"?status=denied":           {},
		"?status=pending&limit=50": {"del_a", "del_c"},
	} {
		items := sdItems(t, q, sdDecode(t, q, e.get("/api/delete-requests"+q, e.approver), http.StatusOK), "requests")
		if got := sdIDs(items); !slices.Equal(got, want) {
			t.Errorf("list%s: %v, want %v", q, got, want)
		}
	}
	if items := sdItems(t, "limit=1", sdDecode(t, "limit=1", e.get("/api/delete-requests?limit=1", e.approver), http.StatusOK), "requests"); len(items) != 1 {
		t.Errorf("limit=1: %d items", len(items))
	}
	sdWantError(t, "limit=0", e.get("/api/delete-requests?limit=0", e.approver), http.StatusBadRequest, countersign.EINVALID)
	if items := sdItems(t, "another account", sdDecode(t, "another account", e.get("/api/delete-requests", e.stranger), http.StatusOK), "requests"); len(items) != 0 {
		t.Errorf("an approver of another account sees %v", sdIDs(items))
	}
	sdWantError(t, "agent key", e.get("/api/delete-requests", e.plain), http.StatusForbidden, countersign.EFORBIDDEN)
	sdWantError(t, "designated key", e.get("/api/delete-requests", e.seed), http.StatusForbidden, countersign.EFORBIDDEN)
	sdWantError(t, "no credentials", e.get("/api/delete-requests", ""), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
	sdWantError(t, "unknown token", e.get("/api/delete-requests", "cst_nope"), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
}

func TestSeedClaudeEvents(t *testing.T) {
	e := sdNew(t)
	out := e.createEvent("evt_1", "s-1", "Bash")
	if out["success"] != true || out["event_id"] != "evt_1" {
		t.Errorf("create: %v", out)
	}
	if got, want := sdUnix(t, "expires_at", out["expires_at"]), e.clock.Now().Add(10*time.Minute).Unix(); got != want {
		t.Errorf("expires_at %d, want %d", got, want)
	}
	// No one-time link goes back to the key's holder, as none does in the
	// seed's answer; the inbox page is where an approver decides.
	if want := e.url + "/approvals/" + e.stored("claude:evt_1").ID; out["inbox_url"] != want {
		t.Errorf("inbox_url %v, want %s", out["inbox_url"], want)
	}
	for k, v := range out {
		if s, _ := v.(string); sdHex64.MatchString(lastSegment(s)) || strings.HasSuffix(k, "_url") && k != "inbox_url" {
			t.Errorf("the answer carries a link: %s = %v", k, v)
		}
	}
	respondURL := e.link("claude-events", approval.LinkRespond, "evt_1", "")
	respondTok := lastSegment(respondURL)
	e.wantStatus("claude-events", "evt_1", map[string]any{"status": "pending", "response_text": nil, "resolved_by": nil})
	sdWantError(t, "status of an unknown event", e.get("/api/claude-events/evt_nope/status", ""), http.StatusNotFound, countersign.ENOTFOUND)
	if r := e.stored("claude:evt_1"); r.Kind != countersign.KindTool || r.Action != "Bash" || r.Context.SessionID != "s-1" {
		t.Errorf("stored: %+v", r)
	}

	t.Run("signature", func(t *testing.T) {
		e := e.with(t)
		before := e.snapshot()
		body := sdPyJSON(e.eventPayload("evt_x", "s-1", "Bash", "ls"))
		for name, sig := range map[string][2]string{
			"missing":               {"X-Claude-Signature", ""},
			"wrong secret":          {"X-Claude-Signature", sdSign("nope", body)},
			"ordinary key":          {"X-Claude-Signature", sdSign(e.plain, body)},
			"revoked key":           {"X-Claude-Signature", sdSign(e.oldSeed, body)},
			"the SafeRM header":     {"X-SafeRM-Signature", sdSign(e.seed, body)},
			"over another body":     {"X-Claude-Signature", sdSign(e.seed, append(body, ' '))},
			"not hex":               {"X-Claude-Signature", "sha256=xyz"},
			"the secret, not a MAC": {"X-Claude-Signature", e.seed},
		} {
			sdWantError(t, name, e.post("/api/claude-events", sig[0], body, sig[1]), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
		}
		bad := []byte(strings.Replace(string(body), `"tool_input":"ls"`, `"tool_input":1`, 1))
		sdWantError(t, "tool_input a number", e.post("/api/claude-events", "X-Claude-Signature", bad, sdSign(e.seed, bad)), http.StatusBadRequest, countersign.EINVALID)
		unknown := []byte(strings.Replace(string(body), `{"event_id"`, `{"approved":true,"event_id"`, 1))
		sdWantError(t, "unknown field", e.post("/api/claude-events", "X-Claude-Signature", unknown, sdSign(e.seed, unknown)), http.StatusBadRequest, countersign.EINVALID)
		e.unchanged("refused events", before)
	})

	t.Run("same event again", func(t *testing.T) {
		e := e.with(t)
		before := e.snapshot()
		again := sdDecode(t, "again", e.signed("/api/claude-events", e.eventPayload("evt_1", "s-1", "Bash", "run evt_1")), http.StatusOK)
		if again["event_id"] != "evt_1" || again["approve_url"] != nil || again["respond_url"] != nil || again["auto_approve_url"] != nil || again["inbox_url"] != out["inbox_url"] {
			t.Errorf("again: %v", again)
		}
		sdWantError(t, "another body, same event_id", e.signed("/api/claude-events", e.eventPayload("evt_1", "s-1", "Bash", "rm -rf /")), http.StatusConflict, countersign.ECONFLICT)
		sdWantError(t, "another session, same event_id", e.signed("/api/claude-events", e.eventPayload("evt_1", "s-2", "Bash", "run evt_1")), http.StatusConflict, countersign.ECONFLICT)
		e.unchanged("the same event again", before)
	})

	t.Run("respond", func(t *testing.T) {
		e := e.with(t)
		before := e.snapshot()
		page := sdPage(t, "GET respond_url", e.get(respondURL, ""), http.StatusOK)
		for _, want := range []string{
			`<form method="post" action="/api/claude-events/respond/evt_1/` + respondTok + `"`,
			`name="response"`,
			"run evt_1",
		} {
			if !strings.Contains(page, want) {
				t.Errorf("respond page lacks %q:\n%s", want, page)
			}
		}
		sdPage(t, "respond from elsewhere", e.form(respondURL, map[string]string{"Origin": "https://evil.example"}, url.Values{"response": {"hi"}}), http.StatusForbidden)
		sdPage(t, "empty response", e.press(respondURL, url.Values{"response": {""}}), http.StatusBadRequest)
		e.unchanged("GET and refused POSTs of respond", before)

		const text = "Use /tmp/build2 instead — merci & <thanks>"
		page = sdPage(t, "POST respond_url", e.press(respondURL, url.Values{"response": {text}}), http.StatusOK)
		if !strings.Contains(page, "Done") {
			t.Errorf("respond page:\n%s", page)
		}
		e.wantStatus("claude-events", "evt_1", map[string]any{"status": "responded", "response_text": text, "resolved_by": "email"})
		sdPage(t, "approve after respond", e.press(e.link("claude-events", approval.LinkApprove, "evt_1", ""), nil), http.StatusConflict)
		e.wantStatus("claude-events", "evt_1", map[string]any{"status": "responded", "response_text": text, "resolved_by": "email"})
	})

	t.Run("approve link", func(t *testing.T) {
		e := e.with(t)
		e.createEvent("evt_2", "s-2", "Read")
		sdPage(t, "approve", e.press(e.link("claude-events", approval.LinkApprove, "evt_2", ""), nil), http.StatusOK)
		e.wantStatus("claude-events", "evt_2", map[string]any{"status": "approved", "response_text": nil, "resolved_by": "email"})
		e.createEvent("evt_2d", "s-2", "Read")
		sdPage(t, "deny", e.press(e.link("claude-events", approval.LinkDeny, "evt_2d", ""), url.Values{"reason": {"no"}}), http.StatusOK)
		e.wantStatus("claude-events", "evt_2d", map[string]any{"status": "denied", "response_text": nil, "resolved_by": "email"})
	})

	autoLink := func(e *sdEnv, id, minutes string) string {
		return e.link("claude-events", approval.LinkAutoApprove, id, "") + "/" + minutes
	}
	window := func(e *sdEnv, id string) time.Duration {
		r := e.stored("claude:" + id)
		if r.AutoApproveUntil.IsZero() {
			e.t.Fatalf("%s opened no window", id)
		}
		return r.AutoApproveUntil.Sub(r.DecidedAt)
	}

	t.Run("auto-approve clamped", func(t *testing.T) {
		e := e.with(t)
		e.createEvent("evt_3", "s-3", "WebFetch")
		e.createEvent("evt_4", "s-4", "WebFetch")
		before := e.snapshot()
		for _, m := range []string{"abc", "", "1.5"} {
			u := autoLink(e, "evt_3", m)
			if m == "" {
				u = strings.TrimSuffix(u, "/")
			}
			r := e.get(u, "")
			if r.status != http.StatusNotFound {
				t.Errorf("minutes %q: %d", m, r.status)
			}
		}
		page := sdPage(t, "GET auto-approve 0", e.get(autoLink(e, "evt_3", "0"), ""), http.StatusOK)
		if !strings.Contains(page, "Approve for 1 minutes") {
			t.Errorf("minutes 0 not shown as 1:\n%s", page)
		}
		page = sdPage(t, "GET auto-approve 999", e.get(autoLink(e, "evt_4", "999"), ""), http.StatusOK)
		if !strings.Contains(page, "Approve for 60 minutes") {
			t.Errorf("minutes 999 not shown as 60:\n%s", page)
		}
		e.unchanged("GET of auto-approve links", before)

		sdPage(t, "POST auto-approve 0", e.press(autoLink(e, "evt_3", "0"), nil), http.StatusOK)
		sdPage(t, "POST auto-approve 999", e.press(autoLink(e, "evt_4", "999"), nil), http.StatusOK)
		if w := window(e, "evt_3"); w != time.Minute {
			t.Errorf("minutes 0: window %s, want 1m", w)
		}
		if w := window(e, "evt_4"); w != time.Hour {
			t.Errorf("minutes 999: window %s, want 1h", w)
		}
		e.wantStatus("claude-events", "evt_3", map[string]any{"status": "approved", "response_text": nil, "resolved_by": "email"})
		sdPage(t, "auto-approve link again", e.press(autoLink(e, "evt_3", "5"), nil), http.StatusConflict)

		// The window approves the same key, session and tool at once, for a
		// tool that has no shape beyond its name.
		auto := sdDecode(t, "in the window", e.signed("/api/claude-events", e.eventPayload("evt_5", "s-3", "WebFetch", "another command")), http.StatusOK)
		for k, v := range map[string]any{"success": true, "event_id": "evt_5", "status": "auto_approved", "auto_approved": true} {
			if auto[k] != v {
				t.Errorf("in the window: %s = %v, want %v (%v)", k, auto[k], v, auto)
			}
		}
		if _, ok := auto["approve_url"]; ok {
			t.Errorf("an auto-approved event got links: %v", auto)
		}
		e.wantStatus("claude-events", "evt_5", map[string]any{"status": "approved", "response_text": nil, "resolved_by": "auto_approve"})
		e.createEvent("evt_6", "s-3", "Write")        // another tool
		e.createEvent("evt_7", "s-other", "WebFetch") // another session
		// A shell command's shape is not known to the seed's events: no
		// window covers one.
		e.createEvent("evt_6b", "s-3", "Bash")

		// After the clamped minute the window is closed; the hour is not.
		e.clock.Advance(time.Minute + time.Second)
		e.createEvent("evt_8", "s-3", "WebFetch")
		sdDecode(t, "in the hour window", e.signed("/api/claude-events", e.eventPayload("evt_9", "s-4", "WebFetch", "x")), http.StatusOK)
	})

	t.Run("list", func(t *testing.T) {
		e := e.with(t)
		list := sdItems(t, "list s-3", sdDecode(t, "list", e.get("/api/claude-events?session_id=s-3", e.approver), http.StatusOK), "events")
		if got := sdIDs(list); !slices.Equal(got, []string{"evt_3", "evt_5", "evt_6", "evt_6b", "evt_8"}) {
			t.Errorf("session s-3: %v", got)
		}
		for _, it := range list {
			for _, f := range []string{"id", "event_type", "session_id", "tool_name", "tool_input", "status", "created_at", "expires_at", "response_text", "resolved_by", "resolved_at"} {
				if _, ok := it[f]; !ok {
					t.Errorf("%v lacks %q", it["id"], f)
				}
			}
			for _, k := range sdKeys(it) {
				if strings.Contains(k, "token") {
					t.Errorf("%v shows %q", it["id"], k)
				}
			}
			if it["session_id"] != "s-3" || it["event_type"] != "tool_approval" {
				t.Errorf("item: %v", it)
			}
		}
		pending := sdItems(t, "pending s-3", sdDecode(t, "list", e.get("/api/claude-events?session_id=s-3&status=pending", e.approver), http.StatusOK), "events")
		if got := sdIDs(pending); !slices.Equal(got, []string{"evt_6", "evt_6b", "evt_8"}) {
			t.Errorf("pending in s-3: %v", got)
		}
		responded := sdItems(t, "responded", sdDecode(t, "list", e.get("/api/claude-events?status=responded", e.approver), http.StatusOK), "events")
		if len(responded) != 1 || responded[0]["id"] != "evt_1" || responded[0]["response_text"] == nil || responded[0]["resolved_by"] != "email" {
			t.Errorf("responded: %v", responded)
		}
		sdWantError(t, "agent key", e.get("/api/claude-events", e.plain), http.StatusForbidden, countersign.EFORBIDDEN)
		sdWantError(t, "no credentials", e.get("/api/claude-events", ""), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
	})
}

// Every value a seed client sends is escaped on the pages.
func TestSeedEscaping(t *testing.T) {
	e := sdNew(t)
	const script, img = `<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`
	command := `rm -rf "/tmp/` + script + `" "/tmp/` + img + `"`
	p := e.deletePayload("del_xss", command)
	p["risk_reasons"] = []string{"protected path: " + script, img}
	p["affected_paths"] = []string{"/tmp/" + script, "/tmp/" + img}
	p["user"], p["hostname"], p["cwd"] = script, img, "/home/"+script
	out := sdDecode(t, "create", e.signed("/api/delete-requests", p), http.StatusCreated)
	approveURL := e.link("delete-requests", approval.LinkApprove, sdString(out["request_id"]), "")
	denyURL := e.link("delete-requests", approval.LinkDeny, sdString(out["request_id"]), "")

	check := func(what, page string) {
		t.Helper()
		for _, raw := range []string{script, "<img", "<script>alert", "onerror=alert(1)>"} {
			if strings.Contains(page, raw) {
				t.Errorf("%s holds %q unescaped:\n%s", what, raw, page)
			}
		}
		for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks the escaped %q:\n%s", what, want, page)
			}
		}
	}
	check("approve page", sdPage(t, "GET approve link", e.get(approveURL, ""), http.StatusOK))
	check("deny page", sdPage(t, "GET deny link", e.get(denyURL, ""), http.StatusOK))
	page := sdPage(t, "POST deny link", e.press(denyURL, url.Values{"reason": {script + img}}), http.StatusOK)
	check("decided page", page)
	// A used link shows nothing of its request but its state.
	if page := sdPage(t, "POST deny link again", e.press(denyURL, nil), http.StatusConflict); strings.Contains(page, "alert(1)") || !strings.Contains(page, "no longer works") {
		t.Errorf("the used link's page shows the request:\n%s", page)
	}

	sdDecode(t, "create event", e.signed("/api/claude-events", e.eventPayload("evt_xss", img, script, "echo "+script+img)), http.StatusCreated)
	respondURL := e.link("claude-events", approval.LinkRespond, "evt_xss", "")
	check("respond page", sdPage(t, "GET respond link", e.get(respondURL, ""), http.StatusOK))
	check("auto-approve page", sdPage(t, "GET auto-approve link", e.get(e.link("claude-events", approval.LinkAutoApprove, "evt_xss", "15"), ""), http.StatusOK))
	check("responded page", sdPage(t, "POST respond link", e.press(respondURL, url.Values{"response": {script + img}}), http.StatusOK))

	// The JSON answers carry the text as JSON strings, never as markup.
	list := e.get("/api/delete-requests", e.approver)
	if bytes.Contains(list.body, []byte("<script>")) || bytes.Contains(list.body, []byte("<img")) {
		t.Errorf("list holds raw markup: %s", list.body)
	}
	items := sdItems(t, "list", sdDecode(t, "list", list, http.StatusOK), "requests")
	if len(items) != 1 || items[0]["command"] != command || items[0]["user"] != script {
		t.Errorf("list: %v", items)
	}
}

// A real Python client, written like the seed's, works against the server.
func TestSeedPythonClient(t *testing.T) {
	python := sdPython(t)
	e := sdNew(t)
	const deleteID, eventID = "del_1700000000_4242", "evt_py_1"
	raw := sdRunPython(t, python, nil, e.url, e.seed, deleteID, eventID)

	type call struct {
		Body      string         `json:"body"`
		Signature string         `json:"signature"`
		Status    int            `json:"status"`
		Answer    map[string]any `json:"answer"`
	}
	var out struct {
		Delete       call `json:"delete"`
		DeleteStatus call `json:"delete_status"`
		Claude       call `json:"claude"`
		ClaudeStatus call `json:"claude_status"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}

	// The Go signer makes the very bytes and signature Python made.
	del := map[string]any{
		"request_id":     deleteID,
		"command":        "rm -rf /srv/café/données",
		"risk_reasons":   []string{"recursive deletion (-r/-R)", "protected path: /srv/café"},
		"affected_paths": []string{"/srv/café/données"},
		"file_count":     47,
		"user":           "déploy",
		"hostname":       "prod-01",
		"cwd":            "/home/deploy",
		"timestamp":      int64(1700000000),
	}
	evt := e.eventPayload(eventID, "session-xyz", "Bash", "rm -rf /tmp/build — \"café\" 😀")
	for _, c := range []struct {
		name    string
		payload map[string]any
		got     call
	}{{"delete", del, out.Delete}, {"claude", evt, out.Claude}} {
		want := sdPyJSON(c.payload)
		if c.got.Body != string(want) {
			t.Errorf("%s: python sent\n%s\nthe Go signer makes\n%s", c.name, c.got.Body, want)
		}
		if c.got.Signature != sdSign(e.seed, []byte(c.got.Body)) {
			t.Errorf("%s: python signed %s, Go %s", c.name, c.got.Signature, sdSign(e.seed, []byte(c.got.Body)))
		}
		if !strings.Contains(c.got.Body, `\u00e9`) || strings.Contains(c.got.Body, "é") || strings.Contains(c.got.Body, `\/`) {
			t.Errorf("%s: body not serialised the seed's way: %s", c.name, c.got.Body)
		}
	}

	if out.Delete.Status != http.StatusCreated {
		t.Fatalf("delete: %d %v", out.Delete.Status, out.Delete.Answer)
	}
	a := out.Delete.Answer
	if a["success"] != true || a["request_id"] != deleteID {
		t.Errorf("delete answer: %v", a)
	}
	if want := e.url + "/approvals/" + e.stored("delete:"+deleteID).ID; a["approval_url"] != want || a["deny_url"] != nil {
		t.Errorf("delete answer: approval_url %v, deny_url %v; want the inbox page %s and no link", a["approval_url"], a["deny_url"], want)
	}
	if got, want := sdUnix(t, "expires_at", a["expires_at"]), e.clock.Now().Add(10*time.Minute).Unix(); got != want {
		t.Errorf("expires_at %d, want %d", got, want)
	}
	if out.DeleteStatus.Status != http.StatusOK || !reflect.DeepEqual(out.DeleteStatus.Answer, map[string]any{"status": "pending", "approved_by": nil}) {
		t.Errorf("delete status: %d %v", out.DeleteStatus.Status, out.DeleteStatus.Answer)
	}
	if r := e.stored("delete:" + deleteID); r.Action != "rm -rf /srv/café/données" || r.Context.User != "déploy" || string(r.Seed) != out.Delete.Body {
		t.Errorf("stored delete: %q %q %s", r.Action, r.Context.User, r.Seed)
	}

	if out.Claude.Status != http.StatusCreated {
		t.Fatalf("claude: %d %v", out.Claude.Status, out.Claude.Answer)
	}
	c := out.Claude.Answer
	if c["success"] != true || c["event_id"] != eventID {
		t.Errorf("claude answer: %v", c)
	}
	for _, k := range []string{"approve_url", "deny_url", "respond_url", "auto_approve_url"} {
		if v, ok := c[k]; ok {
			t.Errorf("claude answer: %s = %v, want no link", k, v)
		}
	}
	if out.ClaudeStatus.Status != http.StatusOK || !reflect.DeepEqual(out.ClaudeStatus.Answer, map[string]any{"status": "pending", "response_text": nil, "resolved_by": nil}) {
		t.Errorf("claude status: %d %v", out.ClaudeStatus.Status, out.ClaudeStatus.Answer)
	}
	if r := e.stored("claude:" + eventID); r.Action != "Bash" || r.Context.SessionID != "session-xyz" || !strings.Contains(r.Preview, "rm -rf /tmp/build — \"café\" 😀") {
		t.Errorf("stored event: %q %q %q", r.Action, r.Context.SessionID, r.Preview)
	}

	// The link a human received decides for the Python client.
	sdPage(t, "approve the Python request", e.press(e.link("delete-requests", approval.LinkApprove, deleteID, ""), nil), http.StatusOK)
	e.wantStatus("delete-requests", deleteID, map[string]any{"status": "approved", "approved_by": "admin"})
}
