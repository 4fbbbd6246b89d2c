package gateway_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/crypto/argon2"
	"golang.org/x/oauth2"
)

const oauthPassword = "correct horse battery staple"

// chromium returns the browser to drive, or skips the test without one
// (fails it when COUNTERSIGN_TEST_STRICT=1).
func chromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	testutil.Missing(t, "no Chromium: neither /usr/bin/chromium nor chromium in PATH (apt-get install -y chromium)")
	return ""
}

// chromium is one headless Chromium for the package's browser tests,
// started by the first of them and ended by TestMain.
var sharedChromium struct {
	once sync.Once
	ctx  context.Context // its first tab's, which holds the browser
	err  error
	stop func()
}

// newBrowser opens a tab of the shared Chromium in a browser context of
// its own: its cookies and storage are the test's alone, as with a fresh
// profile, the way the inbox's browser tests start a browser.
func newBrowser(t *testing.T, exe string) context.Context {
	t.Helper()
	c := &sharedChromium
	c.once.Do(func() {
		dir, err := os.MkdirTemp("", "countersign-chromium-")
		if err != nil {
			c.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.NoFirstRun, chromedp.UserDataDir(dir),
		)
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		c.ctx, c.stop = ctx, func() { cancelCtx(); cancelAlloc(); os.RemoveAll(dir) }
		// The browser lives as long as the context of its first run.
		c.err = chromedp.Do(ctx)
	})
	if c.err != nil {
		t.Fatalf("start Chromium: %v", c.err)
	}
	budget, cancelBudget := context.WithTimeout(c.ctx, 90*time.Second)
	ctx, cancelCtx := chromedp.NewContext(budget, chromedp.WithNewBrowserContext())
	t.Cleanup(func() { cancelCtx(); cancelBudget() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab of Chromium: %v", err)
	}
	return ctx
}

// pageText is the visible text of the browser's page and its URL.
func pageText(ctx context.Context) (string, string) {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
	if err != nil {
		return "", err.Error()
	}
	href, text, _ := strings.Cut(s, "\n")
	return href, text
}

// waitFor waits until the page's text holds s, riding out navigations.
func waitFor(ctx context.Context, s string) error {
	if testutil.Wait(func() bool {
		_, text := pageText(ctx)
		return strings.Contains(text, s)
	}, testutil.EventuallyWithin) {
		return nil
	}
	href, text := pageText(ctx)
	return fmt.Errorf("%q did not appear; the page at %s:\n%s", s, href, text)
}

// addApprover stores the approver ann of acme, with a cheap argon2id hash
// (CheckPassword reads the parameters from it).
func (h *harness) addApprover(name string) {
	h.t.Helper()
	salt := []byte("countersign-salt")
	k := argon2.IDKey([]byte(oauthPassword), salt, 1, 64, 1, 32)
	b64 := base64.RawStdEncoding
	hash := fmt.Sprintf("$argon2id$v=%d$m=64,t=1,p=1$%s$%s", argon2.Version, b64.EncodeToString(salt), b64.EncodeToString(k))
	if err := h.store.CreateApprover(h.ctx, &countersign.Approver{ID: countersign.NewID("apr_"), Username: name, PasswordHash: hash, CreatedAt: time.Now()}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := (&identity.Admin{Store: h.store}).CreateApprover(h.ctx, "acme", name, "", countersign.RoleAdmin); err != nil {
		h.t.Fatal(err)
	}
}

// callback is a native client's loopback redirect URI (RFC 8252): it
// hands the authorization response of each visit to the waiting fetcher.
type callback struct {
	url string
	got chan *auth.AuthorizationResult
}

func newCallback(t *testing.T) *callback {
	c := &callback{got: make(chan *auth.AuthorizationResult, 4)}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("error") != "" {
			c.got <- &auth.AuthorizationResult{State: "error:" + q.Get("error")}
		} else {
			c.got <- &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
		}
		fmt.Fprint(w, "You may close this window.")
	}))
	t.Cleanup(ts.Close)
	c.url = ts.URL + "/callback"
	return c
}

// consentInBrowser is the human's part of an authorization: open the URL,
// sign in when asked, leave out the tiers in without, allow with the
// password typed again, and hand over what the browser brought to the
// callback.
func consentInBrowser(ctx context.Context, cb *callback, authURL, username string, without ...string) (*auth.AuthorizationResult, error) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, chromedp.Navigate(authURL)); err != nil {
		return nil, fmt.Errorf("open the authorization URL: %w", err)
	}
	if href, _ := pageText(ctx); strings.Contains(href, "/signin") {
		if err := chromedp.Do(sctx,
			chromedp.SendKeys(chromedp.ID("username"), username),
			chromedp.SendKeys(chromedp.ID("password"), oauthPassword),
			chromedp.Click(chromedp.CSS(`button[type="submit"]`))); err != nil {
			return nil, fmt.Errorf("sign in: %w", err)
		}
	}
	if err := waitFor(ctx, "Tools it may use"); err != nil {
		return nil, err
	}
	for _, tier := range without {
		if err := chromedp.Do(sctx, chromedp.Click(chromedp.CSS(`input[name="tier"][value="`+tier+`"]`))); err != nil {
			return nil, fmt.Errorf("leave out %s: %w", tier, err)
		}
	}
	// Allowing asks for the password again.
	if err := chromedp.Do(sctx,
		chromedp.SendKeys(chromedp.ID("consent-password"), oauthPassword),
		chromedp.Click(chromedp.ID("allow-password"))); err != nil {
		return nil, fmt.Errorf("allow: %w", err)
	}
	select {
	case res := <-cb.got:
		return res, nil
	case <-sctx.Done():
		href, text := pageText(ctx)
		return nil, fmt.Errorf("the browser never reached the callback; the page at %s:\n%s", href, text)
	}
}

var inboxLink = regexp.MustCompile(`https?://\S+/approvals/[A-Za-z0-9_]+`)

// TestGoSDKOAuth is the whole flow with the MCP Go SDK's OAuth client:
// it finds the authorization server from /mcp's 401, registers itself, the
// consent runs in real Chromium (sign-in included), it exchanges the code,
// lists and calls tools within the tiers allowed, refreshes its token, and
// is refused once the grant is revoked. The browser that consented opens
// the inbox link of approval_pending without signing in again.
func TestGoSDKOAuth(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	h := newHarness(t, nil)
	h.addApprover("ann")
	browser := newBrowser(t, exe)
	cb := newCallback(t)

	var mu sync.Mutex
	var fetches int
	var issued []string // access tokens as the client got them
	fetcher := func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		mu.Lock()
		fetches++
		n := fetches
		mu.Unlock()
		if n > 1 {
			return nil, errors.New("the test allows one consent only")
		}
		return consentInBrowser(browser, cb, args.URL, "ann", "external")
	}
	// The discovery client refuses loopback dials unless the caller takes
	// over dialing: this test's server is on 127.0.0.1.
	httpc := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}, Timeout: 30 * time.Second}
	handler, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			ClientName: "Go SDK test client", RedirectURIs: []string{cb.url},
			GrantTypes: []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethod: "none",
		}},
		AuthorizationCodeFetcher: fetcher,
		RequestRefreshToken:      true,
		Client:                   httpc,
		// The first token is handed over already expired, so that the
		// first call refreshes it through oauth2's own refresh.
		NewTokenSource: func(ctx context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
			mu.Lock()
			issued = append(issued, tok.AccessToken)
			mu.Unlock()
			stale := *tok
			stale.Expiry = time.Now().Add(-time.Minute)
			return cfg.TokenSource(ctx, &stale), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "go-oauth", Version: "1"}, nil)
	cs, err := client.Connect(h.ctx, &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", OAuthHandler: handler, HTTPClient: httpc}, nil)
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	defer cs.Close()

	tools, err := cs.ListTools(h.ctx, nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
	}
	if !names["read_note"] || !names["delete_note"] || names["send_mail"] {
		t.Errorf("the grant (read, write, commit) lists %v: want read_note and delete_note, and no send_mail (external)", names)
	}
	wantRan(t, call(t, cs, "read_note", map[string]any{"id": "n1"}), "note n1 from notes")

	grants, _ := h.store.Grants(h.ctx, "")
	if len(grants) != 1 || grants[0].ApproverName != "ann" || strings.Join(grants[0].Tiers, ",") != "read,write,commit" || grants[0].ClientName != "Go SDK test client" {
		t.Fatalf("grants = %+v", grants)
	}
	ts, _ := handler.TokenSource(h.ctx)
	now, err := ts.Token()
	if err != nil || len(issued) != 1 || now.AccessToken == issued[0] || now.RefreshToken == "" {
		t.Fatalf("the client did not refresh: issued %d, now %v (%v)", len(issued), now, err)
	}

	// A commit call waits for a human; the inbox link opens in the
	// browser that consented, signed in already.
	text := wantStatus(t, call(t, cs, "delete_note", map[string]any{"id": "n1"}), "approval_pending")
	link := inboxLink.FindString(text)
	r := h.pending("delete_note")
	if link == "" || r.KeyID != grants[0].KeyID {
		t.Fatalf("approval_pending %q; the request's key %s, the grant's %s", text, r.KeyID, grants[0].KeyID)
	}
	if err := chromedp.Do(browser, chromedp.Navigate(link)); err != nil {
		t.Fatalf("open %s: %v", link, err)
	}
	if err := waitFor(browser, countersign.FormatReference(r.Reference)); err != nil {
		t.Fatalf("the inbox link in the consenting browser: %v", err)
	}
	if href, _ := pageText(browser); strings.Contains(href, "/signin") {
		t.Fatalf("the consenting browser was sent to sign in: %s", href)
	}
	h.decide(r.ID, countersign.DecisionApprove)
	wantRan(t, call(t, cs, "delete_note", map[string]any{"id": "n1"}), "deleted n1")

	// Revoked in the inbox's store: the next call is refused at once, and
	// the consent's session is gone.
	if err := h.store.RevokeGrant(h.ctx, "", grants[0].ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(h.ctx, &mcp.CallToolParams{Name: "read_note", Arguments: map[string]any{"id": "n2"}}); err == nil {
		t.Fatal("a call after the grant's revocation went through")
	}
	// The request's page reloads itself when the request changes; a
	// navigation it cuts short is tried again.
	for i := 0; ; i++ {
		err := chromedp.Do(browser, chromedp.Navigate(h.base+"/approvals"))
		if err == nil {
			break
		} else if i == 3 {
			t.Fatal(err)
		}
	}
	if err := waitFor(browser, "Sign in as an approver"); err != nil {
		t.Errorf("the consenting browser after revocation: %v", err)
	}
}

// TestTypeScriptSDKOAuth is the whole flow with the TypeScript SDK's
// client auth (testdata/npm/client-oauth.mjs): discovery from /mcp's 401,
// registration, the consent in real Chromium, the code exchange, tools
// listed and called, a refresh that rotates the tokens, and refusal after
// the grant is revoked in the inbox.
func TestTypeScriptSDKOAuth(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	dir := npmDir(t)
	h := newHarness(t, nil)
	h.addApprover("ann")
	browser := newBrowser(t, exe)
	cb := newCallback(t)

	cmd := exec.Command("node", filepath.Join(dir, "client-oauth.mjs"), h.base+"/mcp", cb.url)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	c := &tsClient{t: t, in: in, out: bufio.NewScanner(out)}
	c.out.Buffer(make([]byte, 1<<20), 1<<20)

	m := c.read()
	authURL, ok := m["authorize"].(string)
	if !ok {
		t.Fatalf("the TypeScript client did not ask for a consent: %v", m)
	}
	res, err := consentInBrowser(browser, cb, authURL, "ann", "commit", "external")
	if err != nil {
		t.Fatal(err)
	}
	c.send(map[string]string{"code": res.Code})
	if m := c.read(); m["connected"] != "countersign" {
		t.Fatalf("the TypeScript client after the consent: %v", m)
	}

	c.send(map[string]any{"op": "list"})
	m = c.read()
	var names []string
	tools, _ := m["tools"].([]any)
	for _, x := range tools {
		names = append(names, fmt.Sprint(x.(map[string]any)["name"]))
	}
	if !slices.Contains(names, "read_note") || !slices.Contains(names, "write_note") || slices.Contains(names, "delete_note") {
		t.Errorf("the grant (read, write) lists %v", names)
	}
	c.send(map[string]any{"op": "call", "tool": "read_note", "args": map[string]any{"id": "t1"}})
	if text, _ := c.result(c.read()); text != "note t1 from notes" {
		t.Errorf("read_note: %q", text)
	}

	c.send(map[string]any{"op": "refresh"})
	if m := c.read(); m["refreshed"] != true {
		t.Fatalf("refresh: %v", m)
	}
	c.send(map[string]any{"op": "call", "tool": "write_note", "args": map[string]any{"id": "t1", "text": "x"}})
	if text, _ := c.result(c.read()); text != "written" {
		t.Errorf("write_note after the refresh: %q", text)
	}

	grants, _ := h.store.Grants(h.ctx, "")
	if len(grants) != 1 || grants[0].ClientName != "TypeScript SDK test client" {
		t.Fatalf("grants = %+v", grants)
	}
	if err := h.store.RevokeGrant(h.ctx, "", grants[0].ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Refused: the refresh fails with invalid_grant and the client is sent
	// back to the consent page.
	c.send(map[string]any{"op": "call", "tool": "read_note", "args": map[string]any{"id": "t2"}})
	m = c.read()
	if _, again := m["authorize"]; again {
		m = c.read()
	}
	if _, failed := m["error"]; !failed {
		t.Errorf("a call after the grant's revocation: %v", m)
	}
}

// grantToken makes a grant of acme with the tiers, as the consent page
// would, and returns an access token of it.
func (h *harness) grantToken(tb testing.TB, tiers ...string) string {
	tb.Helper()
	h.addApprover("grantor")
	o := &identity.OAuth{Store: h.store, Clock: h.clock, Resource: h.base + "/mcp"}
	c, _, err := o.Register(h.ctx, &identity.ClientMetadata{ClientName: "bench", RedirectURIs: []string{"http://127.0.0.1:9/cb"},
		TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"}}, "127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	acme, _ := h.store.AccountByName(h.ctx, "acme")
	ann, _ := h.store.ApproverByUsername(h.ctx, "grantor")
	verifier := strings.Repeat("v", 43)
	code, _, _, err := o.Allow(h.ctx, identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: ann.ID, Username: ann.Username, AccountID: acme.ID, Role: countersign.RoleAdmin},
		AccountID: acme.ID, Client: c, RedirectURI: c.RedirectURIs[0], Challenge: identity.S256(verifier), Tiers: tiers,
		Proof: identity.PasswordProof(ann.ID)})
	if err != nil {
		tb.Fatal(err)
	}
	ts, err := o.ExchangeCode(h.ctx, c, code, c.RedirectURIs[0], verifier, h.base+"/mcp")
	if err != nil {
		tb.Fatal(err)
	}
	return ts.AccessToken
}
