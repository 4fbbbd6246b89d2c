package gateway_test

import (
	"context"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/cli"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioConnect serves g to one in-memory client, as over stdio.
func stdioConnect(t *testing.T, g *gateway.Gateway, o clientOpts) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := g.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := o.client().Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: o.version})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// stdioGateway is `countersign mcp` with COUNTERSIGN_URL: the harness's
// server, asked through the API with the key, the fixture as upstream.
func (h *harness) stdioGateway(key string) (*gateway.Gateway, string) {
	h.t.Helper()
	return h.stdioGatewayHold(key, 300*time.Millisecond)
}

// stdioGatewayHold is stdioGateway with another hold.
func (h *harness) stdioGatewayHold(key string, hold time.Duration) (*gateway.Gateway, string) {
	h.t.Helper()
	logFile := filepath.Join(h.t.TempDir(), "stdio.log")
	cfg := gateway.NewConfig()
	cfg.Hold = hold
	cfg.Upstreams = []gateway.UpstreamConfig{fixtureUpstream(h.t, "notes", logFile)}
	g, err := confirm.NewForClient(cfg, client.New(h.base, h.keys[key]), testLogger(h.t), io.Discard)
	if err != nil {
		h.t.Fatal(err)
	}
	g.Start(h.ctx, 20*time.Second)
	h.t.Cleanup(g.Close)
	return g, logFile
}

// TestStdioServerPending (d over stdio with a server): requests of kind mcp
// in the server's inbox; the result names <public URL>/approvals/… and the
// reference; the retry takes the approval once; a denial is told.
func TestStdioServerPending(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Upstreams = nil })
	g, logFile := h.stdioGateway("agent")
	for _, version := range []string{"", "2025-11-25"} {
		cs := stdioConnect(t, g, clientOpts{version: version})
		wantRan(t, call(t, cs, "read_note", map[string]any{"id": "1"}), "note 1 from notes")
		args := map[string]any{"id": "s" + version}
		text := wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
		r := h.pending("delete_note")
		if r.Kind != countersign.KindMCP || !strings.Contains(text, h.base+"/approvals/"+r.ID) || !strings.Contains(text, countersign.FormatReference(r.Reference)) {
			t.Fatalf("request %+v, text %q", r, text)
		}
		// Changed arguments do not take it; the same call does, once.
		wantStatus(t, call(t, cs, "delete_note", map[string]any{"id": "changed" + version}), "approval_pending")
		h.decide(r.ID, countersign.DecisionApprove)
		wantRan(t, call(t, cs, "delete_note", args), "deleted s"+version)
		if got := h.events(r.ID); strings.Join(got, ",") != "created,approved,consumed" {
			t.Errorf("audit events %v", got)
		}
		wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
		h.decide(h.pending("delete_note").ID, countersign.DecisionDeny)
		wantStatus(t, call(t, cs, "delete_note", args), "denied")
		h.decide(h.pending("delete_note").ID, countersign.DecisionDeny) // the changed call
	}
	wantCalls(t, logFile, "delete_note s", "delete_note s2025-11-25")

	// Another key's gateway does not take this key's approval.
	cs := stdioConnect(t, g, clientOpts{})
	args := map[string]any{"id": "mine"}
	wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
	h.decide(h.pending("delete_note").ID, countersign.DecisionApprove)
	other, otherLog := h.stdioGateway("agent2")
	wantStatus(t, call(t, stdioConnect(t, other, clientOpts{}), "delete_note", args), "approval_pending")
	wantCalls(t, otherLog)
	wantRan(t, call(t, cs, "delete_note", args), "deleted mine")
}

// TestStdioServerRestart: a stdio gateway started again (a new process,
// nothing in memory) finds the approval the human gave meanwhile on the
// server, by the call's binding, and runs the call once.
func TestStdioServerRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Upstreams = nil })
	g, _ := h.stdioGateway("agent")
	args := map[string]any{"id": "across a restart"}
	wantStatus(t, call(t, stdioConnect(t, g, clientOpts{}), "delete_note", args), "approval_pending")
	g.Close()
	r := h.pending("delete_note")
	h.decide(r.ID, countersign.DecisionApprove)
	again, logFile := h.stdioGateway("agent")
	cs := stdioConnect(t, again, clientOpts{})
	wantRan(t, call(t, cs, "delete_note", args), "deleted across a restart")
	if got := h.events(r.ID); strings.Join(got, ",") != "created,approved,consumed" {
		t.Errorf("audit events %v", got)
	}
	wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
	wantCalls(t, logFile, "delete_note across a restart")
	if list, _ := h.svc.List(t.Context(), h.alice, countersign.RequestFilter{}); len(list) != 2 {
		t.Errorf("%d requests, want the first and the one asked after its use", len(list))
	}
}

// TestStdioServerElicit (a, b, c over stdio with a server): the elicitation
// carries the preview and the inbox link; the inbox decides.
func TestStdioServerElicit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Upstreams = nil })
	g, logFile := h.stdioGatewayHold("agent", elicitHold)
	for _, version := range []string{"", "2025-11-25"} {
		var seen []*mcp.ElicitParams
		cs := stdioConnect(t, g, clientOpts{version: version, elicit: h.elicitVia("send_mail", countersign.DecisionApprove, "accept", &seen)})
		wantRan(t, call(t, cs, "send_mail", map[string]any{"to": "f" + version}), "sent to f"+version)
		if len(seen) != 1 || seen[0].Mode != "form" || !strings.Contains(seen[0].Message, h.base+"/approvals/") {
			t.Fatalf("%q: elicitations %+v", version, seen)
		}
		cs = stdioConnect(t, g, clientOpts{version: version, urlOnly: true, elicit: h.elicitVia("send_mail", countersign.DecisionApprove, "accept", &seen)})
		wantRan(t, call(t, cs, "send_mail", map[string]any{"to": "u" + version}), "sent to u"+version)
		if last := seen[len(seen)-1]; last.Mode != "url" || !strings.HasPrefix(last.URL, h.base+"/approvals/req_") {
			t.Fatalf("%q: URL elicitation %+v", version, last)
		}
		cs = stdioConnect(t, g, clientOpts{version: version, elicit: h.elicitVia("send_mail", countersign.DecisionDeny, "accept", &seen)})
		wantStatus(t, call(t, cs, "send_mail", map[string]any{"to": "d" + version}), "denied")
		cs = stdioConnect(t, g, clientOpts{version: version, elicit: h.elicitVia("send_mail", "", "decline", &seen)})
		wantStatus(t, call(t, cs, "send_mail", map[string]any{"to": "x" + version}), "declined")
	}
	wantCalls(t, logFile, "send_mail f", "send_mail u", "send_mail f2025-11-25", "send_mail u2025-11-25")
}

// TestStdioServerDown: with the server unreachable, nothing that needs a
// human runs, and the model is told why.
func TestStdioServerDown(t *testing.T) {
	t.Parallel()
	logFile := filepath.Join(t.TempDir(), "down.log")
	cfg := gateway.NewConfig()
	cfg.Upstreams = []gateway.UpstreamConfig{fixtureUpstream(t, "notes", logFile)}
	g, err := confirm.NewForClient(cfg, client.New("http://127.0.0.1:1", "csk_x"), testLogger(t), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g.Start(t.Context(), 20*time.Second)
	t.Cleanup(g.Close)
	cs := stdioConnect(t, g, clientOpts{})
	res := call(t, cs, "delete_note", map[string]any{"id": "x"})
	if !res.IsError || !strings.Contains(textOf(res), "cannot be reached") {
		t.Fatalf("result %q", textOf(res))
	}
	wantRan(t, call(t, cs, "read_note", map[string]any{"id": "r"}), "note r from notes")
	wantCalls(t, logFile)
}

// standalone is `countersign mcp` without a server: its own store in dir,
// and an opener that records the links it was given.
type standalone struct {
	g       *gateway.Gateway
	logFile string
	dir     string
	mu      sync.Mutex
	opened  []string
	fail    error
}

// newStandaloneGateway opens a standalone gateway's store in dir and
// builds the gateway on it as countersign mcp does (cli.StandaloneGateway),
// with the pages' directory in dir. The store closes after the gateway:
// cleanups run last registered first.
func newStandaloneGateway(t *testing.T, cfg *gateway.Config, dir string, o confirm.StandaloneOptions) (*gateway.Gateway, func(), error) {
	t.Helper()
	store, err := sqlite.Open(t.Context(), filepath.Join(dir, "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	o.Pages = filepath.Join(dir, "pages")
	return cli.StandaloneGateway(t.Context(), cfg, store, o)
}

func newStandalone(t *testing.T) *standalone {
	t.Helper()
	return newStandaloneHold(t, 300*time.Millisecond)
}

// newStandaloneHold is newStandalone with another hold.
func newStandaloneHold(t *testing.T, hold time.Duration) *standalone {
	t.Helper()
	s := &standalone{logFile: filepath.Join(t.TempDir(), "calls.log"), dir: t.TempDir()}
	cfg := gateway.NewConfig()
	cfg.Hold = hold
	cfg.Upstreams = []gateway.UpstreamConfig{fixtureUpstream(t, "notes", s.logFile)}
	g, closeG, err := newStandaloneGateway(t, cfg, s.dir, confirm.StandaloneOptions{Log: testLogger(t), Stderr: io.Discard,
		Open: func(u string) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.opened = append(s.opened, u)
			return s.fail
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeG)
	g.Start(t.Context(), 20*time.Second)
	t.Cleanup(g.Close)
	s.g = g
	return s
}

func (s *standalone) lastLink(t *testing.T) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.opened) == 0 {
		t.Fatal("no page was opened")
	}
	return s.opened[len(s.opened)-1]
}

// audit returns the events of the standalone store's audit log.
func (s *standalone) audit(t *testing.T) []string {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(s.dir, "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	entries, err := db.AuditLog(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Event+" "+e.Actor)
	}
	return out
}

// TestStandaloneElicit: without a server, the user's answer to the form is
// the decision (ADR 0003), for new and legacy clients.
func TestStandaloneElicit(t *testing.T) {
	t.Parallel()
	s := newStandaloneHold(t, elicitHold)
	for _, version := range []string{"", "2025-11-25"} {
		var seen []string
		answer := "accept"
		cs := stdioConnect(t, s.g, clientOpts{version: version, elicit: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			seen = append(seen, r.Params.Message)
			return &mcp.ElicitResult{Action: answer}, nil
		}})
		wantRan(t, call(t, cs, "delete_note", map[string]any{"id": "a" + version}), "deleted a"+version)
		if len(seen) != 1 || !strings.Contains(seen[0], "Allow this call once?") || !strings.Contains(seen[0], `"id": "a`+version+`"`) || strings.Contains(seen[0], "http") {
			t.Fatalf("elicitations %q", seen)
		}
		answer = "decline"
		wantStatus(t, call(t, cs, "delete_note", map[string]any{"id": "b" + version}), "declined")
	}
	wantCalls(t, s.logFile, "delete_note a", "delete_note a2025-11-25")
	if len(s.opened) != 0 {
		t.Errorf("pages opened for clients with elicitation: %d", len(s.opened))
	}
	got := strings.Join(s.audit(t), "\n")
	for _, want := range []string{"approved approver:mcp-client", "consumed key:", "denied approver:mcp-client"} {
		if !strings.Contains(got, want) {
			t.Errorf("audit lacks %q:\n%s", want, got)
		}
	}
}

// TestStandalonePage: a client without elicitation (or with URL
// elicitation only) gets approval_pending; the local page, opened with the
// opener and never shown to the model, decides; the retry runs once.
func TestStandalonePage(t *testing.T) {
	t.Parallel()
	s := newStandalone(t)
	for _, o := range []clientOpts{{}, {urlOnly: true, elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return nil, errors.New("never asked")
	}}} {
		cs := stdioConnect(t, s.g, o)
		args := map[string]any{"to": "page@example.com", "urlOnly": o.urlOnly}
		res := call(t, cs, "send_mail", args)
		text := wantStatus(t, res, "approval_pending")
		arg := s.lastLink(t)
		// The opener's argument is on its command line, which any process
		// reads in /proc: one that sends it with the page's Origin, as
		// from a browser, decides nothing.
		attack(t, arg)
		if r := s.pendingRequest(t); r == nil {
			t.Fatal("a process that read the opener's command line decided the request")
		}
		b := openPage(t, arg)
		if strings.Contains(text, b.origin) || strings.Contains(text, "http") || strings.Contains(text, arg) {
			t.Fatalf("the model was shown the page: %q", text)
		}
		if !strings.Contains(b.page, "page@example.com") || !strings.Contains(b.page, "Approve once") {
			t.Fatalf("page %q", b.page)
		}
		// A second opening of the link (another program that got to the
		// file) is told so and gets no way in.
		if code, body, cookies := rawGet(t, b.link, ""); code != http.StatusGone || len(cookies) != 0 || !strings.Contains(body, "already opened") {
			t.Errorf("second opening: %d %q, cookies %v", code, body, cookies)
		}
		if code, _, _ := rawGet(t, b.pageURL, ""); code != http.StatusNotFound {
			t.Errorf("the page without its cookie: %d", code)
		}
		// Another Host (DNS rebinding) and a cross-origin POST are refused.
		if code := b.status(t, http.MethodGet, "evil.example:80", ""); code != http.StatusMisdirectedRequest {
			t.Errorf("another Host: %d", code)
		}
		if code := b.status(t, http.MethodPost, "", "http://evil.example"); code != http.StatusForbidden {
			t.Errorf("cross-origin POST: %d", code)
		}
		// A bare POST says no origin and is refused too.
		if code := b.status(t, http.MethodPost, "", ""); code != http.StatusForbidden {
			t.Errorf("POST without Origin or Sec-Fetch-Site: %d", code)
		}
		wantStatus(t, call(t, cs, "send_mail", args), "approval_pending")
		if done := b.post(t, "approve"); !strings.Contains(done, "Approved once") {
			t.Fatalf("after approving: %q", done)
		}
		wantRan(t, call(t, cs, "send_mail", args), "sent to page@example.com")
		wantStatus(t, call(t, cs, "send_mail", args), "approval_pending")
		if done := openPage(t, s.lastLink(t)).post(t, "deny"); !strings.Contains(done, "Denied") {
			t.Fatalf("after denying: %q", done)
		}
		wantStatus(t, call(t, cs, "send_mail", args), "denied")
		// A used page decides nothing more.
		if done := b.post(t, "approve"); !strings.Contains(done, "consumed") {
			t.Fatalf("used page: %q", done)
		}
	}
	wantCalls(t, s.logFile, "send_mail page@example.com", "send_mail page@example.com")

	// No way to show the page: the call does not run and is not left
	// waiting.
	s.fail = errors.New("no display")
	cs := stdioConnect(t, s.g, clientOpts{})
	res := call(t, cs, "delete_note", map[string]any{"id": "nope"})
	if !res.IsError || !strings.Contains(textOf(res), "could not show the confirmation page") {
		t.Fatalf("result %q", textOf(res))
	}
}

// pendingRequest returns the standalone store's pending request, or nil.
func (s *standalone) pendingRequest(t *testing.T) *countersign.Request {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(s.dir, "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	accs, err := db.Accounts(t.Context())
	if err != nil || len(accs) != 1 {
		t.Fatalf("accounts %v %v", accs, err)
	}
	list, err := db.Requests(t.Context(), countersign.RequestFilter{AccountID: accs[0].ID, Status: countersign.StatusPending})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) == 0 {
		return nil
	}
	return list[0]
}

// attack is a process that read the opener's argument: it takes every URL
// in it (or in the file it names, were that readable to others) and posts an
// approval with that URL's origin.
func attack(t *testing.T, arg string) {
	t.Helper()
	if u, err := url.Parse(arg); err == nil && u.Scheme == "http" {
		req, _ := http.NewRequest(http.MethodPost, arg, strings.NewReader("decision=approve"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://"+u.Host)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		return
	}
	st, err := os.Stat(arg)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Fatalf("the opener got %q (%v, %v), want a file only its user reads", arg, st, err)
	}
	if dir, err := os.Stat(filepath.Dir(arg)); err != nil || dir.Mode().Perm() != 0o700 {
		t.Fatalf("the opener's file is in %s (%v, %v), want a private directory", filepath.Dir(arg), dir, err)
	}
}

// browser is what a browser holds after opening the local page from the
// opener's file: its cookie jar and the page.
type browser struct {
	c                     *http.Client
	origin, link, pageURL string
	page                  string
}

var refresh = regexp.MustCompile(`http-equiv="refresh" content="0; url=([^"]+)"`)

// openPage opens the opener's file as a browser does: it follows the
// file's refresh to the one-time link, which is then gone with the file.
func openPage(t *testing.T, file string) *browser {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	m := refresh.FindSubmatch(b)
	if m == nil {
		t.Fatalf("the opener's file %q leads nowhere", b)
	}
	jar, _ := cookiejar.New(nil)
	br := &browser{c: &http.Client{Jar: jar}, link: html.UnescapeString(string(m[1]))}
	u, _ := url.Parse(br.link)
	br.origin = "http://" + u.Host
	resp, err := br.c.Get(br.link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", br.link, resp.StatusCode, page)
	}
	br.page, br.pageURL = string(page), resp.Request.URL.String()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the opener's file is still there once opened (%v)", err)
	}
	return br
}

// post decides as the page's own form does in a browser: with the page's
// origin and cookie.
func (b *browser) post(t *testing.T, decision string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.pageURL, strings.NewReader(url.Values{"decision": {decision}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.origin)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// status sends a request to the page with the browser's cookie.
func (b *browser) status(t *testing.T, method, host, origin string) int {
	t.Helper()
	req, _ := http.NewRequest(method, b.pageURL, strings.NewReader("decision=approve"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// rawGet gets a URL with no cookies and no redirects.
func rawGet(t *testing.T, link, _ string) (int, string, []*http.Cookie) {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Cookies()
}

// TestStdioKeys: over stdio with a server, [keys] cannot be checked (the
// gateway has one key, with [policy]) and is refused; standalone, an entry
// is checked against the gateway's own store and applies to its key.
func TestStdioKeys(t *testing.T) {
	t.Parallel()
	cfg := gateway.NewConfig()
	cfg.Keys["acme/ci"] = gateway.Policy{Tiers: gateway.AllTiers}
	if _, err := confirm.NewForClient(cfg, client.New("http://127.0.0.1:1", "csk_x"), testLogger(t), io.Discard); err == nil ||
		!strings.Contains(err.Error(), "this gateway's one key has the [policy]: remove [keys]") {
		t.Errorf("[keys] with a server: %v", err)
	}
	if _, _, err := newStandaloneGateway(t, cfg, t.TempDir(), confirm.StandaloneOptions{Stderr: io.Discard}); err == nil ||
		!strings.Contains(err.Error(), `[keys."acme/ci"]: no account "acme" has an agent key "ci"`) {
		t.Errorf("standalone [keys] naming another store's key: %v", err)
	}
	logFile := filepath.Join(t.TempDir(), "calls.log")
	cfg = gateway.NewConfig()
	cfg.Upstreams = []gateway.UpstreamConfig{fixtureUpstream(t, "notes", logFile)}
	cfg.Keys["local/mcp-gateway"] = gateway.Policy{Tiers: gateway.Tiers(gateway.TierRead)}
	g, closeG, err := newStandaloneGateway(t, cfg, t.TempDir(), confirm.StandaloneOptions{Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeG)
	g.Start(t.Context(), 20*time.Second)
	t.Cleanup(g.Close)
	cs := stdioConnect(t, g, clientOpts{})
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "write_note", Arguments: map[string]any{"id": "w"}}); err == nil {
		t.Error("the standalone key's [keys] entry did not apply")
	}
	wantRan(t, call(t, cs, "read_note", map[string]any{"id": "r"}), "note r from notes")
}

// TestStandaloneNeedsItsStore: the caller builds the store and the
// approval service on it; a gateway given none refuses to start rather
// than keep approvals nowhere.
func TestStandaloneNeedsItsStore(t *testing.T) {
	t.Parallel()
	_, _, err := cli.StandaloneGateway(t.Context(), gateway.NewConfig(), nil, confirm.StandaloneOptions{Stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "needs its store") {
		t.Errorf("StandaloneGateway without a store: %v", err)
	}
	_, _, err = confirm.NewStandalone(gateway.NewConfig(), confirm.StandaloneOptions{Pages: t.TempDir(), Stderr: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "needs its store") {
		t.Errorf("NewStandalone without an approval service: %v", err)
	}
}
