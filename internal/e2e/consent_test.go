package e2e_test

import (
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/testutil"
)

// consentClient registers a public OAuth client whose redirect URI is a
// callback server of the test; codes carries what reaches it.
func consentClient(t *testing.T, e *pkEnv) (id, callback string, codes chan url.Values) {
	t.Helper()
	codes = make(chan url.Values, 4)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cb" {
			http.NotFound(w, r) // the browser's favicon
			return
		}
		codes <- r.URL.Query()
		w.Write([]byte("callback reached"))
	}))
	t.Cleanup(cb.Close)
	callback = cb.URL + "/cb"
	body := `{"client_name":"Agent's client","redirect_uris":["` + callback + `"],"token_endpoint_auth_method":"none"}`
	resp, err := http.Post(e.URL+"/oauth/register", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ClientID string `json:"client_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d, %v", resp.StatusCode, err)
	}
	return out.ClientID, callback, codes
}

// consentNonce reads the nonce and binding of the one consent ceremony in
// flight, from the store's own file.
func (e *pkEnv) consentNonce(t *testing.T) (nonce, binding string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var data string
	if err := db.QueryRow(`SELECT data FROM webauthn_ceremonies WHERE purpose = 'consent'`).Scan(&data); err != nil {
		t.Fatalf("read the consent ceremony: %v", err)
	}
	var d struct {
		Consent struct {
			Nonce   string `json:"nonce"`
			Binding string `json:"binding"`
		} `json:"consent"`
	}
	if err := json.Unmarshal([]byte(data), &d); err != nil || d.Consent.Nonce == "" {
		t.Fatalf("the consent ceremony %s: %v", data, err)
	}
	return d.Consent.Nonce, d.Consent.Binding
}

// TestBrowserConsent drives the consent page in Chromium as an agent that
// drives the approver's signed-in browser would, and as the approver:
// a scripted Allow without the password is refused; a wrong password is
// refused; the right one makes the grant; with a passkey (the DevTools
// virtual authenticator) the browser signs the challenge bound to this
// consent, and that makes a grant too.
func TestBrowserConsent(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startPasskeys(t)
	ctx := browser(t, exe)
	virtualAuthenticator(t, ctx)
	client, callback, codes := consentClient(t, e)
	verifier := strings.Repeat("v", 43)
	authorize := func(state string) string {
		return e.URL + "/oauth/authorize?" + url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {callback},
			"state": {state}, "code_challenge": {identity.S256(verifier)}, "code_challenge_method": {"S256"},
			"resource": {e.URL + "/mcp"}, "scope": {"read"}}.Encode()
	}
	grants := func() int {
		t.Helper()
		list, err := e.store.Grants(t.Context(), "")
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	reached := func(what, wantState string) {
		t.Helper()
		q := testutil.ReceiveOr(t, codes, what+": the callback", func() { t.Log(state(ctx)) })
		if q.Get("code") == "" || q.Get("state") != wantState {
			t.Fatalf("%s: the callback got %v", what, q)
		}
	}

	do(t, ctx, "sign in and open the consent page", 20*time.Second,
		chromedp.Navigate(authorize("s1")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		press(`form[action="/signin"] button`),
		appears("Allowing needs your password again"),
	)
	// What an agent at the browser can do: submit the form by script, with
	// the session's cookie and CSRF token, and no password.
	eval[bool](t, ctx, `document.getElementById("consent-allow").submit(); true`)
	do(t, ctx, "allow by script, without the password", 10*time.Second, appears("Type your password"))
	do(t, ctx, "allow with a wrong password", 10*time.Second,
		chromedp.SendKeys(chromedp.ID("consent-password"), "not the password"),
		press("#allow-password"),
		appears("Wrong password"),
	)
	if n := grants(); n != 0 || len(codes) != 0 {
		t.Fatalf("the refused consents made %d grants and reached the callback %d times", n, len(codes))
	}
	do(t, ctx, "allow with the password", 10*time.Second,
		chromedp.SendKeys(chromedp.ID("consent-password"), password),
		press("#allow-password"),
		appears("callback reached"),
	)
	reached("allow with the password", "s1")
	if n := grants(); n != 1 {
		t.Fatalf("after allowing with the password: %d grants", n)
	}

	// With a passkey: the browser signs the challenge of this consent.
	do(t, ctx, "add a passkey", 15*time.Second,
		chromedp.Navigate(e.URL+"/passkeys"),
		chromedp.SendKeys(chromedp.ID("name"), "laptop"),
		chromedp.SendKeys(chromedp.ID("current-password"), password),
		press(`form[data-webauthn="register"] button`),
		appears("Passkey laptop added."),
	)
	do(t, ctx, "open the consent page again", 10*time.Second, chromedp.Navigate(authorize("s2")), appears("Allow with a passkey"))
	eval[bool](t, ctx, hookJS)
	do(t, ctx, "allow with the passkey", 5*time.Second, press("#allow-passkey"))
	if !testutil.Wait(func() bool { return eval[string](t, ctx, `window.__challenge || ""`) != "" }, testutil.EventuallyWithin) {
		t.Fatalf("the page never asked the authenticator\n%s", state(ctx))
	}
	nonce, binding := e.consentNonce(t)
	alice, err := e.store.ApproverByUsername(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	accounts, err := e.store.MembershipAccounts(t.Context(), alice.ID)
	if err != nil || len(accounts) != 1 {
		t.Fatalf("alice's accounts: %v, %v", accounts, err)
	}
	want := identity.ConsentBinding{ClientID: client, RedirectURI: callback, Challenge: identity.S256(verifier), AccountID: accounts[0].ID, Tiers: []string{"read"}}
	if binding != want.Hash() {
		t.Fatalf("the ceremony is bound to %s, want this consent's %s", binding, want.Hash())
	}
	if got := eval[string](t, ctx, `window.__challenge`); got != base64.RawURLEncoding.EncodeToString(identity.ConsentChallenge(nonce, want)) {
		t.Fatalf("the browser signed the challenge %s, not this consent's", got)
	}
	eval[bool](t, ctx, `window.__release(); true`)
	do(t, ctx, "allowed with the passkey", 10*time.Second, appears("callback reached"))
	reached("allow with the passkey", "s2")
	if n := grants(); n != 2 {
		t.Fatalf("after allowing with the passkey: %d grants", n)
	}
}
