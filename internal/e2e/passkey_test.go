package e2e_test

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/webauthn"
	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// pkEnv is a real server under the default step-up policy, reached as
// http://localhost:PORT (an IP address is no relying party id), with
// 127.0.0.1 as a trusted proxy so that a flood can come from many
// addresses.
type pkEnv struct {
	*env
	base   string // the listener's own URL, for the flood
	store  *sqlite.DB
	dbPath string
}

func startPasskeys(t *testing.T, setup ...func(*testutil.World, *approval.Config)) *pkEnv {
	t.Helper()
	// Localhost: an IP address is no relying party id. Its own password
	// slots (testserver's), so that a flood keeps busy this server's
	// argon2id slots only and not those of a test that runs at the same
	// time.
	s := testserver.New(t, testserver.At(time.Now()), testserver.WallClock(), testserver.Localhost(),
		testserver.Approval(func(s *testserver.Server, c *approval.Config) {
			c.StepUp = approval.DefaultStepUp
			for _, f := range setup {
				f(s.World, c)
			}
		}),
		testserver.Config(func(_ *testserver.Server, c *server.Config) {
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
		}))
	base := "http://127.0.0.1:" + s.Public.Port()
	return &pkEnv{env: &env{URL: s.URL, hub: s.Hub, agent: client.New(s.URL, s.Key("acme", "laptop"))}, base: base, store: s.World.Store, dbPath: s.Path}
}

// virtualAuthenticator adds Chromium's virtual authenticator to the tab: a
// platform authenticator with resident keys and user verification that
// always succeeds.
func virtualAuthenticator(t *testing.T, ctx context.Context) webauthn.AuthenticatorID {
	t.Helper()
	var id webauthn.AuthenticatorID
	do(t, ctx, "add the virtual authenticator", 10*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, webauthn.Enable, webauthn.EnableParams{}); err != nil {
			return err
		}
		res, err := cdp.Call(ctx, tg, webauthn.AddVirtualAuthenticator, webauthn.AddVirtualAuthenticatorParams{
			Options: &webauthn.VirtualAuthenticatorOptions{
				Protocol: webauthn.AuthenticatorProtocolCtap2, Ctap2version: webauthn.Ctap2versionCtap21,
				Transport: webauthn.AuthenticatorTransportInternal, HasResidentKey: true, HasUserVerification: true,
				IsUserVerified: true, AutomaticPresenceSimulation: true,
			}})
		id = res.AuthenticatorID
		return err
	}))
	return id
}

// badUV makes the authenticator answer with the user-verified bit off, or
// stop doing so.
func badUV(t *testing.T, ctx context.Context, id webauthn.AuthenticatorID, bad bool) {
	t.Helper()
	do(t, ctx, "set the UV bit override", 5*time.Second, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, webauthn.SetResponseOverrideBits, webauthn.SetResponseOverrideBitsParams{AuthenticatorID: id, IsBadUV: &bad})
		return err
	}))
}

// create asks as the agent. The browser waits on a page that does not
// reload when the account's requests change, so that the reload does not
// abort the test's next navigation.
func (e *pkEnv) create(t *testing.T, ctx context.Context, in client.CreateInput) *countersign.Request {
	t.Helper()
	do(t, ctx, "leave live pages", 10*time.Second, chromedp.Navigate(e.URL+"/passkeys"), appears("Your passkeys"))
	r, _, err := e.agent.Create(t.Context(), in)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := e.store.Request(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (e *pkEnv) status(t *testing.T, id string) countersign.Status {
	t.Helper()
	r, err := e.store.Request(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

// press clicks the element of a CSS selector from the page's script, once
// it is there. Unlike a click on a DOM node, it rides out a document that
// is replaced between the lookup and the click.
func press(sel string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(sel)
	expr := fmt.Sprintf("(() => { const el = document.querySelector(%s); if (!el) return false; el.click(); return true; })()", q)
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		// Pressed, or the context done: either stops the wait.
		pressed := false
		testutil.Wait(func() bool {
			ok, err := chromedp.Evaluate[bool](expr)(ctx, tg)
			pressed = err == nil && ok
			return pressed || ctx.Err() != nil
		}, testutil.EventuallyWithin)
		if !pressed {
			return chromedp.Void{}, fmt.Errorf("press %s: %w", sel, cmp.Or(ctx.Err(), context.DeadlineExceeded))
		}
		return chromedp.Void{}, nil
	}
}

func commitCall(n string) client.CreateInput {
	return client.CreateInput{Kind: "mcp", Action: "files.delete", Arguments: []byte(`{"path":"` + n + `"}`),
		Preview: "delete " + n, RiskReasons: []string{approval.TierReason(countersign.TierCommit)}, Tier: "commit"}
}

// hookJS, run in a request's page, holds the page's passkey prompt until
// the test releases it, records the challenge it was given, and keeps the
// fields of the form it submits, for a replay.
const hookJS = `(() => {
  window.__hold = new Promise(r => { window.__release = r; });
  const get = navigator.credentials.get.bind(navigator.credentials);
  navigator.credentials.get = async (o) => {
    window.__challenge = b64urlEncode(o.publicKey.challenge);
    await window.__hold;
    return get(o);
  };
  const submit = HTMLFormElement.prototype.submit;
  HTMLFormElement.prototype.submit = function () {
    if (this.elements.webauthn_response) {
      sessionStorage.setItem("answer", JSON.stringify({h: this.elements.webauthn_handle.value, r: this.elements.webauthn_response.value}));
    }
    return submit.call(this);
  };
  return true;
})()`

// postJS posts a decision form by script, with the page's CSRF token, and
// answers the status and the page's text.
const postJS = `async function post(id, fields) {
  const body = new URLSearchParams(fields);
  body.set("csrf", document.querySelector("input[name=csrf]").value);
  const res = await fetch("/approvals/" + id + "/decision", {method: "POST", body, redirect: "manual"});
  const html = await res.text();
  const doc = new DOMParser().parseFromString(html, "text/html");
  return res.status + " " + (doc.querySelector(".error") ? doc.querySelector(".error").textContent : "");
}
async function begin(id) {
  const body = new URLSearchParams({decision: "approve", csrf: document.querySelector("input[name=csrf]").value});
  const res = await fetch("/approvals/" + id + "/stepup", {method: "POST", body});
  return res.json();
}
async function assertFor(options) {
  return JSON.stringify(encodeCredential(await navigator.credentials.get(requestOptions(options))));
}`

func evalAsync[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// stepUpNonce reads the nonce of the one step-up ceremony in flight, from
// the store's own file.
func (e *pkEnv) stepUpNonce(t *testing.T) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var data string
	if err := db.QueryRow(`SELECT data FROM webauthn_ceremonies WHERE purpose = 'stepup'`).Scan(&data); err != nil {
		t.Fatalf("read the step-up ceremony: %v", err)
	}
	var d struct {
		StepUp struct {
			Nonce string `json:"nonce"`
		} `json:"step_up"`
	}
	if err := json.Unmarshal([]byte(data), &d); err != nil || d.StepUp.Nonce == "" {
		t.Fatalf("the step-up ceremony %s: %v", data, err)
	}
	return d.StepUp.Nonce
}

// TestBrowserPasskeys drives the passkeys in Chromium with the DevTools
// virtual authenticator: register, sign in without a username, approve a
// step-up request whose challenge is that request's, fail with the UV bit
// off, with an assertion made for another request and with a replayed one,
// approve a plain request without a ceremony, and sign in with the passkey
// while a flood of wrong passwords keeps the argon2id slots busy.
func TestBrowserPasskeys(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startPasskeys(t)
	ctx := browser(t, exe)
	auth := virtualAuthenticator(t, ctx)
	alice, err := e.store.ApproverByUsername(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}

	// Register, after signing in with the password.
	do(t, ctx, "sign in with the password", 15*time.Second,
		chromedp.Navigate(e.URL+"/signin"),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		press(`form[action="/signin"] button`),
		appears("Waiting for you"),
	)
	do(t, ctx, "add a passkey", 15*time.Second,
		chromedp.Navigate(e.URL+"/passkeys"),
		chromedp.SendKeys(chromedp.ID("name"), "laptop"),
		chromedp.SendKeys(chromedp.ID("current-password"), password),
		press(`form[data-webauthn="register"] button`),
		appears("Passkey laptop added."),
	)
	keys, err := e.store.Passkeys(t.Context(), alice.ID)
	if err != nil || len(keys) != 1 || keys[0].Name != "laptop" {
		t.Fatalf("after registering: %v, %v", keys, err)
	}
	credID := base64.RawURLEncoding.EncodeToString(keys[0].CredentialID)

	// Sign out, and in again with the passkey: no username typed.
	signInWithPasskey := func(what string) time.Duration {
		t.Helper()
		do(t, ctx, what+": sign out", 10*time.Second,
			press(`form[action="/signout"] button`),
			chromedp.WaitVisible(chromedp.ID("username")),
		)
		began := time.Now()
		do(t, ctx, what, 20*time.Second,
			press(`form[data-webauthn="signin"] button`),
			appears("Waiting for you"),
		)
		return time.Since(began)
	}
	quiet := signInWithPasskey("sign in with the passkey")
	if v := eval[string](t, ctx, `document.getElementById("username") ? "form" : location.pathname`); v != "/approvals" {
		t.Fatalf("after the passkey sign-in the browser is at %q", v)
	}

	// A step-up request: the challenge the browser signs is the one bound
	// to this request, its binding and this decision.
	a := e.create(t, ctx, commitCall("/srv/a"))
	do(t, ctx, "open the step-up request", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+a.ID), appears("needs your passkey"))
	eval[bool](t, ctx, hookJS)
	do(t, ctx, "click approve", 5*time.Second, press(`form[data-webauthn="stepup"] button`))
	if !testutil.Wait(func() bool { return eval[string](t, ctx, `window.__challenge || ""`) != "" }, testutil.EventuallyWithin) {
		t.Fatalf("the page never asked the authenticator\n%s", state(ctx))
	}
	challenge := eval[string](t, ctx, `window.__challenge`)
	want := base64.RawURLEncoding.EncodeToString(identity.StepUpChallenge(e.stepUpNonce(t), a.ID, a.BindingHash(), "approve", 0))
	if challenge != want {
		t.Fatalf("the browser signed the challenge %s, want the request's %s", challenge, want)
	}
	eval[bool](t, ctx, `window.__release(); true`)
	do(t, ctx, "approved with the passkey", 10*time.Second, appears("by alice"))
	if st := e.status(t, a.ID); st != countersign.StatusApproved {
		t.Fatalf("after the step-up the request is %s", st)
	}
	entries, _ := e.store.AuditLog(t.Context(), 0, 1000)
	last := entries[len(entries)-1]
	if last.RequestID != a.ID || last.Event != "approved" || !strings.Contains(last.Detail, `"verified":"webauthn"`) ||
		!strings.Contains(last.Detail, `"credential_id":"`+credID+`"`) {
		t.Fatalf("the audit entry of the step-up: %s %s %s", last.RequestID, last.Event, last.Detail)
	}

	// A replay of that answer, and answers made for another request, do
	// not approve b.
	b := e.create(t, ctx, commitCall("/srv/b"))
	c := e.create(t, ctx, commitCall("/srv/c"))
	do(t, ctx, "open b", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+b.ID), appears("needs your passkey"))
	eval[bool](t, ctx, postJS+"; window.post = post; window.begin = begin; window.assertFor = assertFor; true")
	got := evalAsync[string](t, ctx, `(async () => { const a = JSON.parse(sessionStorage.getItem("answer"));
		return post("`+b.ID+`", {decision: "approve", webauthn_handle: a.h, webauthn_response: a.r}); })()`)
	if !strings.HasPrefix(got, "400 ") || !strings.Contains(got, "already used") {
		t.Errorf("a replayed assertion: %q, want 400 saying it was used", got)
	}
	got = evalAsync[string](t, ctx, `(async () => { const s = await begin("`+c.ID+`");
		return post("`+b.ID+`", {decision: "approve", webauthn_handle: s.handle, webauthn_response: await assertFor(s.options)}); })()`)
	if !strings.HasPrefix(got, "400 ") || !strings.Contains(got, "another request") {
		t.Errorf("an assertion made for another request: %q, want 400 saying so", got)
	}
	got = evalAsync[string](t, ctx, `(async () => { const mine = await begin("`+b.ID+`"); const other = await begin("`+c.ID+`");
		return post("`+b.ID+`", {decision: "approve", webauthn_handle: mine.handle, webauthn_response: await assertFor(other.options)}); })()`)
	if !strings.HasPrefix(got, "400 ") || !strings.Contains(got, "Confirming with the passkey failed") {
		t.Errorf("an assertion of another request's challenge: %q, want 400 from the check", got)
	}
	for _, r := range []*countersign.Request{b, c} {
		if st := e.status(t, r.ID); st != countersign.StatusPending {
			t.Fatalf("after the refused assertions %s is %s", r.ID, st)
		}
	}

	// With the UV bit off the server refuses, and says why.
	badUV(t, ctx, auth, true)
	do(t, ctx, "approve b without user verification", 15*time.Second,
		chromedp.Navigate(e.URL+"/approvals/"+b.ID),
		press(`form[data-webauthn="stepup"] button`),
		appears("Confirming with the passkey failed"),
	)
	if st := e.status(t, b.ID); st != countersign.StatusPending {
		t.Fatalf("without user verification b is %s", st)
	}
	badUV(t, ctx, auth, false)
	do(t, ctx, "approve b with the passkey", 15*time.Second,
		chromedp.Navigate(e.URL+"/approvals/"+b.ID),
		press(`form[data-webauthn="stepup"] button`),
		appears("by alice"),
	)
	if st := e.status(t, b.ID); st != countersign.StatusApproved {
		t.Fatalf("b after a good assertion: %s", st)
	}

	// A plain request is approved with one click, no ceremony.
	p := e.create(t, ctx, client.CreateInput{Kind: "tool", Action: "Bash", Arguments: []byte(`{"command":"ls"}`), Preview: "ls"})
	do(t, ctx, "open the plain request", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+p.ID), appears("Approve"))
	if n := eval[int](t, ctx, `document.querySelectorAll("form[data-webauthn]").length`); n != 0 {
		t.Fatalf("the plain request's page has %d passkey forms", n)
	}
	eval[bool](t, ctx, `navigator.credentials.get = async () => { sessionStorage.setItem("asked", "1"); throw new Error("no"); }; true`)
	do(t, ctx, "approve the plain request", 10*time.Second,
		press(`form[action$="/decision"] button.primary`),
		appears("by alice"),
	)
	if st := e.status(t, p.ID); st != countersign.StatusApproved || eval[string](t, ctx, `sessionStorage.getItem("asked") || ""`) != "" {
		t.Fatalf("the plain request: %s, a ceremony was asked for: %v", st, eval[string](t, ctx, `sessionStorage.getItem("asked") || ""`))
	}

	// Under a flood of wrong passwords from many addresses, which keeps
	// both argon2id slots busy, the passkey sign-in goes through.
	stop, done := flood(t, e.base, e.env.URL)
	if !testutil.Wait(func() bool { return done.Load() >= 4 }, testutil.EventuallyWithin) {
		t.Fatalf("the flood answered only %d sign-ins in %s", done.Load(), testutil.EventuallyWithin)
	}
	before := done.Load()
	// Side by side, under the same flood: alice's password sign-in, whose
	// (cheap) hash still waits for an argon2id slot.
	// An unknown browser's check may be told to come back (429) when no
	// slot frees in time: the status goes with the time.
	type signedIn struct {
		status int
		took   time.Duration
		err    error
	}
	pw := make(chan signedIn, 1)
	go func() {
		began := time.Now()
		status, err := passwordSignIn(t.Context(), e.base, e.env.URL)
		pw <- signedIn{status, time.Since(began), err}
	}()
	flooded := signInWithPasskey("sign in with the passkey under a password flood")
	during := done.Load() - before
	pwDone := <-pw
	stop()
	if pwDone.err != nil {
		t.Fatalf("password sign-in: %v", pwDone.err)
	}
	pwStatus, pwTook := pwDone.status, pwDone.took
	if during == 0 {
		t.Fatalf("no flood sign-in was answered while the passkey signed in: the flood did not run")
	}
	t.Logf("passkey sign-in: %v without a flood, %v under a flood of wrong passwords (%d answered meanwhile); a password sign-in under the same flood: %d in %v",
		quiet.Round(time.Millisecond), flooded.Round(time.Millisecond), during, pwStatus, pwTook.Round(time.Millisecond))
}

// passwordSignIn posts alice's password from a fresh address and returns
// the status.
func passwordSignIn(ctx context.Context, base, public string) (int, error) {
	u, _ := url.Parse(public)
	form := url.Values{"username": {"alice"}, "password": {password}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/signin", strings.NewReader(form.Encode()))
	req.Host = u.Host
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", public)
	req.Header.Set("X-Forwarded-For", "192.0.2.77")
	hc := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// flood posts wrong passwords for unknown names, each from its own address
// (through the trusted proxy), from 8 workers, until stopped. Each one
// costs an argon2id hash with the real parameters.
func flood(t *testing.T, base, public string) (stop func(), done *atomic.Int64) {
	t.Helper()
	done = &atomic.Int64{}
	ctx, cancel := context.WithCancel(context.Background())
	u, _ := url.Parse(public)
	var wg sync.WaitGroup
	var n atomic.Int64
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			for ctx.Err() == nil {
				i := n.Add(1)
				form := url.Values{"username": {fmt.Sprintf("nobody-%d-%d", w, i)}, "password": {"wrong password"}}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/signin", strings.NewReader(form.Encode()))
				req.Host = u.Host
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Origin", public)
				req.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", w, (i>>8)&255, i&255))
				resp, err := hc.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				done.Add(1)
			}
		}()
	}
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop) // a test that fails before it stops the flood
	return stop, done
}

// TestBrowserEnrolment: a passkey-only approver who never signed in adds
// a passkey through the CLI's one-time link, signs in with it, and the
// link is used up.
func TestBrowserEnrolment(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startPasskeys(t)
	ctx := browser(t, exe)
	virtualAuthenticator(t, ctx)
	carol := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "carol", PasswordHash: "", CreatedAt: time.Now()}
	if err := e.store.CreateApprover(t.Context(), carol); err != nil {
		t.Fatal(err)
	}
	if _, err := (&identity.Admin{Store: e.store}).CreateApprover(t.Context(), "acme", "carol", "", countersign.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(e.URL)
	pk, err := identity.NewPasskeys(e.store, nil, nil, u)
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := pk.NewEnrolment(t.Context(), carol.ID)
	if err != nil {
		t.Fatal(err)
	}
	link := e.URL + "/enrol/" + token
	do(t, ctx, "enrol with the link", 15*time.Second,
		chromedp.Navigate(link),
		appears("adds a passkey for the approver carol"),
		chromedp.SendKeys(chromedp.ID("name"), "phone"),
		press(`form[data-webauthn="register"] button`),
		appears("A passkey was added for carol"),
	)
	if keys, err := e.store.Passkeys(t.Context(), carol.ID); err != nil || len(keys) != 1 || keys[0].Name != "phone" {
		t.Fatalf("after enrolment: %v, %v", keys, err)
	}
	do(t, ctx, "sign in as carol with the passkey", 15*time.Second,
		chromedp.Navigate(e.URL+"/signin"),
		press(`form[data-webauthn="signin"] button`),
		appears("Waiting for you"),
		appears("carol"),
	)
	do(t, ctx, "the link again", 10*time.Second, chromedp.Navigate(link), appears("unknown, used or expired"))
}
