package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// ibPassword is every test approver's password.
const ibPassword = testutil.Password

// ibEnv is testserver's server with the helpers of the pages: the
// accounts acme (agent keys a and a2, the approver alice) and other (the
// key x, the approver bob), and carol, who belongs to both.
type ibEnv struct {
	*testserver.Server
	t *testing.T

	carol                *countersign.Approver
	keyA2                string // another agent key of acme
	addrs                atomic.Int64
	client               *http.Client
	agentA, agentA2, agX *client.Client
}

// ibSetup starts an environment. Unless an option says otherwise, the
// PublicURL is the listener's own http URL and 127.0.0.1 is a trusted
// proxy, so that each sign-in can come from its own X-Forwarded-For
// address and the sign-in limit stays out of tests about something else.
func ibSetup(t *testing.T, opts ...func(*server.Config)) *ibEnv {
	t.Helper()
	return ibSetupWith(t, approval.Config{}, opts...)
}

// ibSetupWith is ibSetup with the service's configuration. The service
// runs on the wall clock, as the pages' sessions do.
func ibSetupWith(t *testing.T, svcCfg approval.Config, opts ...func(*server.Config)) *ibEnv {
	t.Helper()
	s := testserver.New(t, testserver.WallClock(),
		testserver.Approval(func(_ *testserver.Server, c *approval.Config) { *c = svcCfg }),
		testserver.Config(func(s *testserver.Server, c *server.Config) {
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
			// Set here, not left to the server, so that an option may wrap it.
			c.Store = s.Store
			for _, o := range opts {
				o(c)
			}
		}))
	e := &ibEnv{Server: s, t: t}
	e.keyA2 = s.Key("acme", "a2")
	e.carol = s.Approver("carol", "acme", "other")
	e.client = &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	e.agentA, e.agentA2, e.agX = client.New(e.URL, e.KeyA), client.New(e.URL, e.keyA2), client.New(e.URL, e.KeyX)
	return e
}

// ibPublic makes the server answer as https://approve.example.com.
func ibPublic(raw string) func(*server.Config) {
	return func(c *server.Config) {
		u, err := url.Parse(raw)
		if err != nil {
			panic(err)
		}
		c.PublicURL = u
	}
}

// ibNoProxies trusts no proxy: X-Forwarded-For is only a header.
func ibNoProxies(c *server.Config) { c.TrustedProxies = nil }

type ibMod func(*http.Request)

// ibHeader sets a header; an empty value removes it.
func ibHeader(k, v string) ibMod {
	return func(r *http.Request) {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
}

// ibHost sends the request for another Host.
func ibHost(h string) ibMod { return func(r *http.Request) { r.Host = h } }

// ibFrom makes the request come through the trusted proxy from addr.
func ibFrom(addr string) ibMod { return ibHeader("X-Forwarded-For", addr) }

// as sends a session cookie under the server's cookie name.
func (e *ibEnv) as(id string) ibMod { return e.cookie(e.cookieName(), id) }

func (e *ibEnv) cookie(name, value string) ibMod {
	return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: name, Value: value}) }
}

func (e *ibEnv) cookieName() string {
	if e.Public.Scheme == "https" {
		return "__Host-countersign_session"
	}
	return "countersign_session"
}

func (e *ibEnv) origin() string { return e.Public.Scheme + "://" + e.Public.Host }

// do sends a page request the way the inbox's own browser would: for the
// public Host and, for a POST, a form with the public Origin. Mods change
// that.
func (e *ibEnv) do(method, path string, form url.Values, mods ...ibMod) response {
	e.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(e.Ctx, method, e.URL+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = e.Public.Host
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", e.origin())
	}
	for _, m := range mods {
		m(req)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return readResponse(e.t, resp)
}

func (e *ibEnv) get(path string, mods ...ibMod) response {
	return e.do(http.MethodGet, path, nil, mods...)
}

func (e *ibEnv) post(path string, form url.Values, mods ...ibMod) response {
	if form == nil {
		form = url.Values{}
	}
	return e.do(http.MethodPost, path, form, mods...)
}

// want fails the test unless the answer has the status.
func (r response) want(t *testing.T, what string, status int) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body:\n%s", what, r.status, status, r.body)
	}
	// A <wbr> marks where a long path may break on a narrow screen; the
	// tests read the text without them.
	r.body = strings.ReplaceAll(r.body, "<wbr>", "")
	return r
}

// wantRedirect fails the test unless the answer is 303 to location.
func (r response) wantRedirect(t *testing.T, what, location string) {
	t.Helper()
	if r.status != http.StatusSeeOther || r.header.Get("Location") != location {
		t.Fatalf("%s: %d to %q, want 303 to %q; body:\n%s", what, r.status, r.header.Get("Location"), location, r.body)
	}
}

// sessionCookie returns the session cookie the answer set, or nil.
func (e *ibEnv) sessionCookie(r response) *http.Cookie {
	for _, c := range r.cookie {
		if c.Name == e.cookieName() {
			return c
		}
	}
	return nil
}

// ibSession is a signed-in browser: its cookie value and the CSRF token its
// pages carry.
type ibSession struct {
	id, csrf string
}

// nextAddr is a fresh client address for a sign-in.
func (e *ibEnv) nextAddr() string { return fmt.Sprintf("198.51.100.%d", e.addrs.Add(1)) }

// signIn signs an approver in through the form, from a fresh address, and
// reads the CSRF token off the inbox.
func (e *ibEnv) signIn(username string) ibSession {
	e.t.Helper()
	r := e.post("/signin", url.Values{"username": {username}, "password": {ibPassword}, "next": {"/approvals"}}, ibFrom(e.nextAddr()))
	r.wantRedirect(e.t, "sign in "+username, "/approvals")
	c := e.sessionCookie(r)
	if c == nil || c.Value == "" {
		e.t.Fatalf("sign in %s: no session cookie in %v", username, r.header["Set-Cookie"])
	}
	inbox := e.get("/approvals", e.as(c.Value)).want(e.t, "inbox after sign-in", http.StatusOK)
	return ibSession{id: c.Value, csrf: ibCSRF(e.t, inbox.body)}
}

var ibCSRFField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// ibCSRF returns the CSRF token of a page's forms; all of them must carry
// the same one.
func ibCSRF(t *testing.T, page string) string {
	t.Helper()
	m := ibCSRFField.FindAllStringSubmatch(page, -1)
	if len(m) == 0 {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	for _, x := range m[1:] {
		if x[1] != m[0][1] {
			t.Fatalf("the page's forms carry different CSRF tokens: %q and %q", m[0][1], x[1])
		}
	}
	return m[0][1]
}

// decide posts the decision form of a request with the session's token.
func (e *ibEnv) decide(s ibSession, id string, form url.Values, mods ...ibMod) response {
	e.t.Helper()
	if !form.Has("csrf") {
		form.Set("csrf", s.csrf)
	}
	return e.post("/approvals/"+id+"/decision", form, append([]ibMod{e.as(s.id)}, mods...)...)
}

// create asks for a decision with an agent client and expects a new
// request.
func (e *ibEnv) create(c *client.Client, in client.CreateInput) *client.Request {
	e.t.Helper()
	if in.Kind == "" {
		in.Kind = "tool"
	}
	r, created, err := c.Create(e.Ctx, in)
	if err != nil || !created {
		e.t.Fatalf("create %q: created %v, %v", in.Action, created, err)
	}
	return r
}

var ibSeq atomic.Int64

// ibTool is a tool request distinct from every other one.
func ibTool(session string) client.CreateInput {
	n := ibSeq.Add(1)
	return client.CreateInput{
		Kind: "tool", Action: "Bash",
		Arguments: []byte(fmt.Sprintf(`{"command":"rm -rf build-%d"}`, n)),
		Preview:   fmt.Sprintf("rm -rf build-%d", n),
		Context:   client.Context{SessionID: session},
		Scope:     &client.Scope{Commands: []string{"rm"}, Paths: []string{"/src"}},
	}
}

// request reads a request straight from the store.
func (e *ibEnv) request(id string) *countersign.Request {
	e.t.Helper()
	r, err := e.Store.Request(e.Ctx, id)
	if err != nil {
		e.t.Fatalf("read %s: %v", id, err)
	}
	return r
}

// wantStatus fails the test unless the stored request has the status.
func (e *ibEnv) wantStatus(what, id string, status countersign.Status) {
	e.t.Helper()
	if got := e.request(id).Status; got != status {
		e.t.Errorf("%s: request is %s, want %s", what, got, status)
	}
}

// signedIn reports whether a cookie value still opens the inbox.
func (e *ibEnv) signedIn(id string) bool {
	e.t.Helper()
	r := e.get("/approvals", e.as(id))
	switch {
	case r.status == http.StatusOK:
		return true
	case r.status == http.StatusSeeOther && strings.HasPrefix(r.header.Get("Location"), "/signin"):
		return false
	}
	e.t.Fatalf("GET /approvals: unexpected %d %s", r.status, r.body)
	return false
}
