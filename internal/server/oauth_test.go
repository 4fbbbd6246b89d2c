package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
)

const oaCallback = "https://claude.ai/api/mcp/auth_callback"

// oaMCP puts a stand-in for the gateway at /mcp that answers 200 to
// whoever the endpoint let through.
func oaMCP(c *server.Config) {
	c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "mcp") })
}

// oaClient is a registered client and one PKCE verifier.
type oaClient struct {
	id, verifier string
}

func (c oaClient) challenge() string {
	sum := sha256.Sum256([]byte(c.verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// oauthPost sends a body to an OAuth endpoint and decodes the answer.
func (e *ibEnv) oauthPost(path, contentType, body string, out any, mods ...ibMod) int {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.Ctx, http.MethodPost, e.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	// Each from its own address, unless a mod says otherwise, so that the
	// endpoints' rate limits stay out of tests about something else.
	req.Header.Set("X-Forwarded-For", e.nextAddr())
	for _, m := range mods {
		m(req)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("POST %s: %d %s: %v", path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

func (e *ibEnv) registerClient(redirect string) oaClient {
	e.t.Helper()
	var out map[string]any
	body := `{"client_name":"Claude","redirect_uris":["` + redirect + `"],"token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"]}`
	if st := e.oauthPost("/oauth/register", "application/json", body, &out); st != http.StatusCreated {
		e.t.Fatalf("register: %d %v", st, out)
	}
	return oaClient{id: out["client_id"].(string), verifier: strings.Repeat("v", 20) + countersign.NewID("")}
}

// authzQuery is an authorization request of c, every part right.
func (e *ibEnv) authzQuery(c oaClient) url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {c.id}, "redirect_uri": {oaCallback}, "state": {"st-1"},
		"code_challenge": {c.challenge()}, "code_challenge_method": {"S256"}, "resource": {e.URL + "/mcp"}, "scope": {"read write"}}
}

// consent allows c as the signed-in session s and returns the code and
// the session cookie the consent set.
func (e *ibEnv) consent(s ibSession, q url.Values, mods ...ibMod) (string, *http.Cookie) {
	e.t.Helper()
	page := e.get("/oauth/authorize?"+q.Encode(), e.as(s.id)).want(e.t, "consent page", http.StatusOK)
	form := url.Values{"csrf": {ibCSRF(e.t, page.body)}, "decision": {"allow"}, "tier": {"read", "write"}, "password": {ibPassword}}
	for k, v := range q {
		form[k] = v
	}
	// From an address of its own: the password counts against the
	// sign-in limits.
	r := e.post("/oauth/authorize", form, append([]ibMod{e.as(s.id), ibFrom(e.nextAddr())}, mods...)...)
	if r.status != http.StatusSeeOther {
		e.t.Fatalf("allow: %d %s", r.status, r.body)
	}
	loc, _ := url.Parse(r.header.Get("Location"))
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != oaCallback || loc.Query().Get("state") != "st-1" || loc.Query().Get("iss") != e.URL {
		e.t.Fatalf("allow redirects to %s", loc)
	}
	return loc.Query().Get("code"), e.sessionCookie(r)
}

type oaTokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
	Description  string `json:"error_description"`
}

func (e *ibEnv) tokenCall(form url.Values) (int, oaTokens) {
	e.t.Helper()
	var out oaTokens
	st := e.oauthPost("/oauth/token", "application/x-www-form-urlencoded", form.Encode(), &out)
	return st, out
}

func (e *ibEnv) exchange(c oaClient, code string) (int, oaTokens) {
	return e.tokenCall(url.Values{"grant_type": {"authorization_code"}, "client_id": {c.id}, "code": {code},
		"redirect_uri": {oaCallback}, "code_verifier": {c.verifier}, "resource": {e.URL + "/mcp"}})
}

func (e *ibEnv) refresh(c oaClient, rt string) (int, oaTokens) {
	return e.tokenCall(url.Values{"grant_type": {"refresh_token"}, "client_id": {c.id}, "refresh_token": {rt}})
}

// mcpStatus is what /mcp answers a bearer token.
func (e *ibEnv) mcpStatus(token string) (int, http.Header) {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(e.Ctx, http.MethodPost, e.URL+"/mcp", strings.NewReader("{}"))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestOAuthDiscovery: /mcp without a token points at the protected
// resource metadata, which names this server as the authorization server,
// whose metadata lists the endpoints, S256, the grant types, public
// clients and the scopes.
func TestOAuthDiscovery(t *testing.T) {
	t.Parallel()
	e := ibSetup(t, oaMCP)
	st, h := e.mcpStatus("")
	want := `Bearer resource_metadata="` + e.URL + `/.well-known/oauth-protected-resource/mcp"`
	if st != http.StatusUnauthorized || h.Get("WWW-Authenticate") != want {
		t.Fatalf("/mcp without a token: %d, WWW-Authenticate %q; want 401, %q", st, h.Get("WWW-Authenticate"), want)
	}
	if st, _ := e.mcpStatus(e.KeyA); st != http.StatusOK {
		t.Errorf("/mcp with an agent key: %d", st)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"} {
		var prm map[string]any
		r := e.get(path).want(t, path, http.StatusOK)
		json.Unmarshal([]byte(r.body), &prm)
		if prm["resource"] != e.URL+"/mcp" || prm["authorization_servers"].([]any)[0] != e.URL {
			t.Errorf("%s = %v", path, prm)
		}
	}
	var as map[string]any
	json.Unmarshal([]byte(e.get("/.well-known/oauth-authorization-server").want(t, "AS metadata", http.StatusOK).body), &as)
	for k, v := range map[string]string{
		"issuer": e.URL, "authorization_endpoint": e.URL + "/oauth/authorize", "token_endpoint": e.URL + "/oauth/token",
		"registration_endpoint": e.URL + "/oauth/register", "revocation_endpoint": e.URL + "/oauth/revoke",
	} {
		if as[k] != v {
			t.Errorf("%s = %v, want %s", k, as[k], v)
		}
	}
	for k, v := range map[string]string{
		"code_challenge_methods_supported": `["S256"]`, "grant_types_supported": `["authorization_code","refresh_token"]`,
		"token_endpoint_auth_methods_supported": `["none","client_secret_basic","client_secret_post"]`,
		"scopes_supported":                      `["read","write","commit","external"]`,
	} {
		if b, _ := json.Marshal(as[k]); string(b) != v {
			t.Errorf("%s = %s, want %s", k, b, v)
		}
	}
}

// TestOAuthRegistration: every metadata value is validated; bad ones get
// the RFC 7591 error and register nothing.
func TestOAuthRegistration(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	for _, tc := range []struct{ name, body, code string }{
		{"http on a public host", `{"redirect_uris":["http://evil.example/cb"]}`, "invalid_redirect_uri"},
		{"a fragment", `{"redirect_uris":["https://a.example/cb#x"]}`, "invalid_redirect_uri"},
		{"javascript", `{"redirect_uris":["javascript:alert(1)"]}`, "invalid_redirect_uri"},
		{"relative", `{"redirect_uris":["/cb"]}`, "invalid_redirect_uri"},
		{"user info", `{"redirect_uris":["https://u:p@a.example/cb"]}`, "invalid_redirect_uri"},
		{"none", `{"redirect_uris":[]}`, "invalid_redirect_uri"},
		{"implicit grant", `{"redirect_uris":["https://a.example/cb"],"grant_types":["implicit"]}`, "invalid_client_metadata"},
		{"token response", `{"redirect_uris":["https://a.example/cb"],"response_types":["token"]}`, "invalid_client_metadata"},
		{"auth method", `{"redirect_uris":["https://a.example/cb"],"token_endpoint_auth_method":"private_key_jwt"}`, "invalid_client_metadata"},
		{"control characters in the name", `{"redirect_uris":["https://a.example/cb"],"client_name":"a\u001bb"}`, "invalid_client_metadata"},
		{"a bidi override in the name", `{"redirect_uris":["https://a.example/cb"],"client_name":"Claude \u202egnp.exe"}`, "invalid_client_metadata"},
		{"a zero-width space in the name", `{"redirect_uris":["https://a.example/cb"],"client_name":"Cla\u200bude"}`, "invalid_client_metadata"},
		{"a line separator in the name", `{"redirect_uris":["https://a.example/cb"],"client_name":"a\u2028b"}`, "invalid_client_metadata"},
		{"localhost as a subdomain", `{"redirect_uris":["http://localhost.evil.example/cb"]}`, "invalid_redirect_uri"},
		{"user before the host", `{"redirect_uris":["https://x@evil.example/cb"]}`, "invalid_redirect_uri"},
		{"an IDN host", `{"redirect_uris":["https://b\u00fccher.example/cb"]}`, "invalid_redirect_uri"},
		{"a custom scheme", `{"redirect_uris":["com.example.app:/cb"]}`, "invalid_redirect_uri"},
		{"eleven URIs", `{"redirect_uris":["https://a.example/1","https://a.example/2","https://a.example/3","https://a.example/4","https://a.example/5","https://a.example/6","https://a.example/7","https://a.example/8","https://a.example/9","https://a.example/10","https://a.example/11"]}`, "invalid_redirect_uri"},
		{"unknown scope", `{"redirect_uris":["https://a.example/cb"],"scope":"admin"}`, "invalid_client_metadata"},
		{"http logo", `{"redirect_uris":["https://a.example/cb"],"logo_uri":"http://a.example/x.png"}`, "invalid_client_metadata"},
		{"not JSON", `redirect_uris=x`, "invalid_client_metadata"},
		{"two objects", `{"redirect_uris":["https://a.example/cb"]}{}`, "invalid_client_metadata"},
	} {
		var out oaTokens
		if st := e.oauthPost("/oauth/register", "application/json", tc.body, &out); st != http.StatusBadRequest || out.Error != tc.code || out.Description == "" {
			t.Errorf("%s: %d %+v, want 400 %s", tc.name, st, out, tc.code)
		}
	}
	// Loopback http is a native client's redirect (RFC 8252).
	e.registerClient("http://127.0.0.1:9/cb")
	// A confidential client gets a secret and must send it.
	var conf map[string]any
	if st := e.oauthPost("/oauth/register", "application/json", `{"redirect_uris":["`+oaCallback+`"],"token_endpoint_auth_method":"client_secret_post"}`, &conf); st != http.StatusCreated || conf["client_secret"] == nil {
		t.Fatalf("confidential registration: %d %v", st, conf)
	}
	st, out := e.tokenCall(url.Values{"grant_type": {"authorization_code"}, "client_id": {conf["client_id"].(string)}, "client_secret": {"css_wrong"}, "code": {"x"}})
	if st != http.StatusUnauthorized || out.Error != "invalid_client" {
		t.Errorf("a wrong client secret: %d %+v", st, out)
	}
}

// TestOAuthFlow: register, consent (the browser signs in first), exchange,
// /mcp with the token, refresh with rotation, revocation in the inbox; the
// browser that consented is signed in for the account, and its session
// ends with the grant.
func TestOAuthFlow(t *testing.T) {
	t.Parallel()
	e := ibSetup(t, oaMCP)
	c := e.registerClient(oaCallback)
	q := e.authzQuery(c)

	// Without a session the consent page sends the browser to sign in and
	// back.
	r := e.get("/oauth/authorize?" + q.Encode())
	r.wantRedirect(t, "consent without a session", "/signin?next="+url.QueryEscape("/oauth/authorize?"+q.Encode()))
	r = e.post("/signin", url.Values{"username": {"alice"}, "password": {ibPassword}, "next": {"/oauth/authorize?" + q.Encode()}}, ibFrom(e.nextAddr()))
	r.wantRedirect(t, "sign-in for the consent", "/oauth/authorize?"+q.Encode())
	signin := e.sessionCookie(r)
	page := e.get("/oauth/authorize?"+q.Encode(), e.as(signin.Value)).want(t, "consent page", http.StatusOK)
	for _, want := range []string{"Claude", "claude.ai", "has not checked it", `value="commit"`, "of the tiers <b>read, write</b>"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the consent page lacks %q", want)
		}
	}
	if csp := page.header.Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' https://claude.ai;") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("consent CSP = %q", csp)
	}

	code, consentCookie := e.consent(ibSession{id: signin.Value}, q)
	if consentCookie == nil || consentCookie.Value == signin.Value || !consentCookie.HttpOnly || consentCookie.SameSite != http.SameSiteLaxMode {
		t.Fatalf("the consent's cookie = %+v", consentCookie)
	}
	if e.signedIn(signin.Value) {
		t.Error("the sign-in session survives the consent that replaced it")
	}
	// The consenting browser opens the inbox straight away.
	e.get("/approvals", e.as(consentCookie.Value)).want(t, "inbox after consent", http.StatusOK)

	st, tok := e.exchange(c, code)
	if st != http.StatusOK || !strings.HasPrefix(tok.AccessToken, "csa_") || tok.TokenType != "Bearer" || tok.ExpiresIn != 3600 || tok.Scope != "read write" {
		t.Fatalf("exchange: %d %+v", st, tok)
	}
	if st, _ := e.mcpStatus(tok.AccessToken); st != http.StatusOK {
		t.Fatalf("/mcp with the access token: %d", st)
	}
	// The grant's token is no key for the API.
	if _, _, err := client.New(e.URL, tok.AccessToken).Create(e.Ctx, ibTool("s")); err == nil {
		t.Error("the access token created an API request")
	}

	st, tok2 := e.refresh(c, tok.RefreshToken)
	if st != http.StatusOK || tok2.RefreshToken == tok.RefreshToken || tok2.AccessToken == tok.AccessToken {
		t.Fatalf("refresh: %d %+v", st, tok2)
	}
	if st, _ := e.mcpStatus(tok2.AccessToken); st != http.StatusOK {
		t.Fatalf("/mcp with the refreshed token: %d", st)
	}

	// The inbox lists the grant and revokes it: every token stops, and the
	// consent's session ends.
	alice := e.signIn("alice")
	list := e.get("/grants", e.as(alice.id)).want(t, "grants page", http.StatusOK)
	grants, _ := e.Store.Grants(e.Ctx, e.Acme.ID)
	if len(grants) != 1 || !strings.Contains(list.body, "/grants/"+grants[0].ID+"/revoke") || !strings.Contains(list.body, "read, write") {
		t.Fatalf("grants page lacks the grant (%d grants):\n%s", len(grants), list.body)
	}
	// Only an admin of the account, or the approver who allowed it,
	// revokes a grant: carol, an approver, may not revoke alice's; alice,
	// no longer an admin, may still take back her own.
	for _, u := range []string{"carol", "alice"} {
		if err := e.Admin.SetRole(e.Ctx, "acme", u, countersign.RoleApprover); err != nil {
			t.Fatal(err)
		}
	}
	carol := e.signIn("carol")
	if got := e.post("/grants/"+grants[0].ID+"/revoke", url.Values{"csrf": {carol.csrf}}, e.as(carol.id)); got.status != http.StatusForbidden || !strings.Contains(got.body, "Only an admin") {
		t.Errorf("an approver revoking another's grant: %d, want 403:\n%s", got.status, got.body)
	}
	if st, _ := e.mcpStatus(tok2.AccessToken); st != http.StatusOK {
		t.Fatalf("/mcp after a refused revocation: %d", st)
	}
	e.post("/grants/"+grants[0].ID+"/revoke", url.Values{"csrf": {alice.csrf}}, e.as(alice.id)).wantRedirect(t, "revoke", "/grants")
	for _, at := range []string{tok.AccessToken, tok2.AccessToken} {
		if st, _ := e.mcpStatus(at); st != http.StatusUnauthorized {
			t.Errorf("/mcp after revocation: %d", st)
		}
	}
	if st, out := e.refresh(c, tok2.RefreshToken); st != http.StatusBadRequest || out.Error != "invalid_grant" {
		t.Errorf("refresh after revocation: %d %+v", st, out)
	}
	if e.signedIn(consentCookie.Value) {
		t.Error("the consent's session survives the revocation of its grant")
	}
	if !e.signedIn(alice.id) {
		t.Error("revoking a grant signed out a session that did not come from it")
	}

	// Nothing secret of the flow reached the log.
	logs := e.Logs.String()
	for name, secret := range map[string]string{"code": code, "verifier": c.verifier, "access token": tok.AccessToken,
		"refresh token": tok.RefreshToken, "second refresh token": tok2.RefreshToken, "session": consentCookie.Value} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds the %s", name)
		}
	}
	if !strings.Contains(logs, "oauth grant allowed") {
		t.Errorf("the log lacks the grant; it is:\n%s", logs)
	}
}

// TestOAuthHostile: each broken or hostile request is refused with the
// standard error, and a replay revokes the grant.
func TestOAuthHostile(t *testing.T) {
	t.Parallel()
	e := ibSetup(t, oaMCP)
	c := e.registerClient(oaCallback)
	alice := e.signIn("alice")

	t.Run("authorize", func(t *testing.T) {
		// An error page, never a redirect, for what could send the browser
		// elsewhere.
		for name, mod := range map[string]func(url.Values){
			"unknown client":             func(q url.Values) { q.Set("client_id", "cli_nope") },
			"redirect one character off": func(q url.Values) { q.Set("redirect_uri", oaCallback+"x") },
			"redirect of another client": func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") },
			"redirect_uri missing":       func(q url.Values) { q.Del("redirect_uri") },
			"redirect_uri twice":         func(q url.Values) { q["redirect_uri"] = []string{oaCallback, "https://evil.example/cb"} },
		} {
			q := e.authzQuery(c)
			mod(q)
			r := e.get("/oauth/authorize?"+q.Encode(), e.as(alice.id))
			if r.status != http.StatusBadRequest || r.header.Get("Location") != "" {
				t.Errorf("%s: %d, Location %q; want an error page", name, r.status, r.header.Get("Location"))
			}
		}
		// The rest is an error page too, before and after sign-in, for a
		// client whose redirect URI is a phishing page: nothing goes back
		// to the client before the approver has seen the consent page.
		phish := e.registerClient("https://evil.example/phish-login")
		for name, tc := range map[string]struct {
			mod  func(url.Values)
			code string
		}{
			"no PKCE":           {func(q url.Values) { q.Del("code_challenge") }, "invalid_request"},
			"plain PKCE":        {func(q url.Values) { q.Set("code_challenge_method", "plain") }, "invalid_request"},
			"no state":          {func(q url.Values) { q.Del("state") }, "invalid_request"},
			"no resource":       {func(q url.Values) { q.Del("resource") }, "invalid_target"},
			"another server":    {func(q url.Values) { q.Set("resource", "https://other.example/mcp") }, "invalid_target"},
			"token response":    {func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
			"response_type x":   {func(q url.Values) { q.Set("response_type", "x") }, "unsupported_response_type"},
			"unknown scope":     {func(q url.Values) { q.Set("scope", "admin") }, "invalid_scope"},
			"no response_type":  {func(q url.Values) { q.Del("response_type") }, "unsupported_response_type"},
			"a challenge short": {func(q url.Values) { q.Set("code_challenge", "abc") }, "invalid_request"},
		} {
			q := e.authzQuery(phish)
			q.Set("redirect_uri", "https://evil.example/phish-login")
			tc.mod(q)
			for who, mods := range map[string][]ibMod{"signed out": nil, "signed in": {e.as(alice.id)}} {
				r := e.get("/oauth/authorize?"+q.Encode(), mods...)
				if r.status != http.StatusBadRequest || r.header.Get("Location") != "" || !strings.Contains(r.body, "cannot be used ("+tc.code+":") ||
					!strings.Contains(r.body, `href="/static/app.css"`) || strings.Contains(r.body, "evil.example") {
					t.Errorf("%s, %s: %d, Location %q; want the server's error page naming %s:\n%s", name, who, r.status, r.header.Get("Location"), tc.code, r.body)
				}
			}
			// A consent form with the fault, as if from the page: the
			// same page, no redirect, no grant.
			form := url.Values{"csrf": {alice.csrf}, "decision": {"allow"}, "tier": {"read"}}
			for k, v := range q {
				form[k] = v
			}
			for _, decision := range []string{"allow", "deny"} {
				form.Set("decision", decision)
				r := e.post("/oauth/authorize", form, e.as(alice.id))
				if r.status != http.StatusBadRequest || r.header.Get("Location") != "" || !strings.Contains(r.body, "cannot be used ("+tc.code+":") {
					t.Errorf("%s, consent form (%s): %d, Location %q; want the error page", name, decision, r.status, r.header.Get("Location"))
				}
			}
		}
		if grants, _ := e.Store.Grants(e.Ctx, ""); len(grants) != 0 {
			t.Errorf("faulty authorization requests made %d grants", len(grants))
		}
	})

	t.Run("consent POST", func(t *testing.T) {
		q := e.authzQuery(c)
		page := e.get("/oauth/authorize?"+q.Encode(), e.as(alice.id)).want(t, "consent page", http.StatusOK)
		form := url.Values{"csrf": {ibCSRF(t, page.body)}, "decision": {"allow"}, "tier": {"read"}, "password": {ibPassword}}
		for k, v := range q {
			form[k] = v
		}
		noCSRF := url.Values{}
		for k, v := range form {
			if k != "csrf" {
				noCSRF[k] = v
			}
		}
		e.post("/oauth/authorize", form, e.as(alice.id), ibHeader("Origin", "https://evil.example")).want(t, "foreign Origin", http.StatusForbidden)
		e.post("/oauth/authorize", form, e.as(alice.id), ibHeader("Origin", "null")).want(t, "Origin null", http.StatusForbidden)
		e.post("/oauth/authorize", noCSRF, e.as(alice.id)).want(t, "no CSRF", http.StatusForbidden)
		e.post("/oauth/authorize", form).want(t, "no session", http.StatusUnauthorized)
		bob := e.signIn("bob")
		e.post("/oauth/authorize", form, e.as(bob.id)).want(t, "another session's CSRF", http.StatusForbidden)
		// bob may not make a grant of acme, whatever the form says.
		form.Set("csrf", bob.csrf)
		form.Set("account", e.Acme.ID)
		e.post("/oauth/authorize", form, e.as(bob.id)).want(t, "another account", http.StatusForbidden)
		// No tier at all: the page again, with the reason.
		noTier := url.Values{}
		for k, v := range form {
			if k != "tier" {
				noTier[k] = v
			}
		}
		noTier.Set("csrf", alice.csrf)
		noTier.Del("account")
		if r := e.post("/oauth/authorize", noTier, e.as(alice.id)).want(t, "no tier", http.StatusBadRequest); !strings.Contains(r.body, "at least one tier") {
			t.Errorf("the consent without a tier says:\n%s", r.body)
		}
		if grants, _ := e.Store.Grants(e.Ctx, ""); len(grants) != 0 {
			t.Fatalf("refused consents made %d grants", len(grants))
		}
		// Refusing sends access_denied back.
		form.Set("csrf", alice.csrf)
		form.Del("account")
		form.Set("decision", "deny")
		r := e.post("/oauth/authorize", form, e.as(alice.id))
		if loc, _ := url.Parse(r.header.Get("Location")); r.status != http.StatusSeeOther || loc.Query().Get("error") != "access_denied" {
			t.Errorf("refuse: %d %s", r.status, r.header.Get("Location"))
		}
	})

	t.Run("token", func(t *testing.T) {
		code, _ := e.consent(e.signIn("alice"), e.authzQuery(c))
		wrong := c
		wrong.verifier = strings.Repeat("w", 50)
		for name, form := range map[string]url.Values{
			"wrong verifier":     {"grant_type": {"authorization_code"}, "client_id": {c.id}, "code": {code}, "redirect_uri": {oaCallback}, "code_verifier": {wrong.verifier}},
			"no verifier":        {"grant_type": {"authorization_code"}, "client_id": {c.id}, "code": {code}, "redirect_uri": {oaCallback}},
			"redirect one off":   {"grant_type": {"authorization_code"}, "client_id": {c.id}, "code": {code}, "redirect_uri": {oaCallback + "/"}, "code_verifier": {c.verifier}},
			"another resource":   {"grant_type": {"authorization_code"}, "client_id": {c.id}, "code": {code}, "redirect_uri": {oaCallback}, "code_verifier": {c.verifier}, "resource": {"https://other.example/mcp"}},
			"unknown grant type": {"grant_type": {"password"}, "client_id": {c.id}},
		} {
			st, out := e.tokenCall(form)
			if st != http.StatusBadRequest || out.Error == "" || out.AccessToken != "" || strings.Contains(out.Description, "sql") {
				t.Errorf("%s: %d %+v", name, st, out)
			}
		}
		other := e.registerClient(oaCallback)
		if st, out := e.exchange(other, code); st != http.StatusBadRequest || out.Error != "invalid_grant" {
			t.Errorf("another client's code: %d %+v", st, out)
		}
		if st, out := e.exchange(oaClient{id: "cli_unregistered", verifier: c.verifier}, code); st != http.StatusUnauthorized || out.Error != "invalid_client" {
			t.Errorf("an unregistered client: %d %+v", st, out)
		}
		st, tok := e.exchange(c, code)
		if st != http.StatusOK {
			t.Fatalf("the refused attempts burnt the code: %d %+v", st, tok)
		}
		// The code used twice: refused, and the grant it made is revoked.
		if st, out := e.exchange(c, code); st != http.StatusBadRequest || out.Error != "invalid_grant" {
			t.Errorf("a code used twice: %d %+v", st, out)
		}
		if st, _ := e.mcpStatus(tok.AccessToken); st != http.StatusUnauthorized {
			t.Errorf("/mcp after the code's replay: %d", st)
		}
	})

	t.Run("refresh replay", func(t *testing.T) {
		code, _ := e.consent(e.signIn("alice"), e.authzQuery(c))
		_, tok := e.exchange(c, code)
		st, tok2 := e.refresh(c, tok.RefreshToken)
		if st != http.StatusOK {
			t.Fatalf("refresh: %d %+v", st, tok2)
		}
		if st, out := e.refresh(c, tok.RefreshToken); st != http.StatusBadRequest || out.Error != "invalid_grant" {
			t.Errorf("a replayed refresh token: %d %+v", st, out)
		}
		if st, _ := e.mcpStatus(tok2.AccessToken); st != http.StatusUnauthorized {
			t.Errorf("/mcp after the replay: %d; the grant must be revoked", st)
		}
		if st, _ := e.refresh(c, tok2.RefreshToken); st != http.StatusBadRequest {
			t.Errorf("the rotated refresh token after the replay: %d", st)
		}
	})

	t.Run("revocation endpoint", func(t *testing.T) {
		code, _ := e.consent(e.signIn("alice"), e.authzQuery(c))
		_, tok := e.exchange(c, code)
		form := url.Values{"client_id": {c.id}, "token": {tok.AccessToken}}
		if st := e.oauthPost("/oauth/revoke", "application/x-www-form-urlencoded", form.Encode(), nil); st != http.StatusOK {
			t.Fatalf("revoke: %d", st)
		}
		if st, _ := e.mcpStatus(tok.AccessToken); st != http.StatusUnauthorized {
			t.Errorf("/mcp after RFC 7009 revocation: %d", st)
		}
		if st, _ := e.refresh(c, tok.RefreshToken); st != http.StatusOK {
			t.Errorf("revoking the access token took the refresh token: %d", st)
		}
	})

	t.Run("revoking the refresh token ends the grant", func(t *testing.T) {
		code, _ := e.consent(e.signIn("alice"), e.authzQuery(c))
		_, tok := e.exchange(c, code)
		agent, err := e.authenticator().AccessAgent(e.Ctx, tok.AccessToken, e.URL+"/mcp", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		form := url.Values{"client_id": {c.id}, "token": {tok.RefreshToken}}
		for range 2 { // the second time the token is gone: still 200
			if st := e.oauthPost("/oauth/revoke", "application/x-www-form-urlencoded", form.Encode(), nil); st != http.StatusOK {
				t.Fatalf("revoke: %d", st)
			}
		}
		if st, _ := e.mcpStatus(tok.AccessToken); st != http.StatusUnauthorized {
			t.Errorf("/mcp after the refresh token's revocation: %d", st)
		}
		g, err := e.Store.Grant(e.Ctx, agent.GrantID)
		if err != nil || !g.Revoked() {
			t.Errorf("the grant after its client revoked the refresh token = %+v, %v; want revoked", g, err)
		}
		if logs := e.Logs.String(); !strings.Contains(logs, `msg="oauth grant revoked" grant=`+agent.GrantID+` reason=revocation`) ||
			strings.Contains(logs, tok.RefreshToken) {
			t.Errorf("the log does not say (only) why the grant was revoked:\n%s", logs)
		}
	})
}

// TestOAuthForeignReplay: a client replaying a code or refresh token that
// was issued to another (later, with a made-up verifier or another redirect
// URI, or under the victim's public client_id) gets invalid_grant and
// changes nothing: the victim's grant, tokens and consent session
// survive. The client the token was issued to still revokes the grant by
// replaying it, and the log says why, without the token.
func TestOAuthForeignReplay(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(time.Now())
	e := ibSetup(t, oaMCP, func(c *server.Config) { c.Clock = clock })
	victim := e.registerClient(oaCallback)
	code, consent := e.consent(e.signIn("alice"), e.authzQuery(victim))
	st, tok := e.exchange(victim, code)
	if st != http.StatusOK {
		t.Fatalf("exchange: %d %+v", st, tok)
	}
	st, tok2 := e.refresh(victim, tok.RefreshToken)
	if st != http.StatusOK {
		t.Fatalf("refresh: %d %+v", st, tok2)
	}
	const evil = "https://evil.example/phish-login"
	attacker := e.registerClient(evil)
	madeUp := strings.Repeat("m", 43)
	clock.Advance(62 * time.Second)
	for name, form := range map[string]url.Values{
		"the used code, by another client": {"grant_type": {"authorization_code"}, "client_id": {attacker.id}, "code": {code},
			"redirect_uri": {evil}, "code_verifier": {madeUp}},
		"the used code, under the victim's client_id with a made-up verifier": {"grant_type": {"authorization_code"}, "client_id": {victim.id},
			"code": {code}, "redirect_uri": {oaCallback}, "code_verifier": {madeUp}},
		"the used code, under the victim's client_id with another redirect URI": {"grant_type": {"authorization_code"}, "client_id": {victim.id},
			"code": {code}, "redirect_uri": {evil}, "code_verifier": {victim.verifier}},
		"the rotated refresh token, by another client": {"grant_type": {"refresh_token"}, "client_id": {attacker.id}, "refresh_token": {tok.RefreshToken}},
	} {
		if st, out := e.tokenCall(form); st != http.StatusBadRequest || out.Error != "invalid_grant" || out.AccessToken != "" {
			t.Errorf("%s: %d %+v, want 400 invalid_grant", name, st, out)
		}
	}
	agent, err := e.authenticator().AccessAgent(e.Ctx, tok2.AccessToken, e.URL+"/mcp", time.Now())
	if err != nil {
		t.Fatalf("the victim's access token after the foreign replays: %v", err)
	}
	if g, err := e.Store.Grant(e.Ctx, agent.GrantID); err != nil || g.Revoked() {
		t.Fatalf("the victim's grant after the foreign replays = %+v, %v; want live", g, err)
	}
	if st, _ := e.mcpStatus(tok2.AccessToken); st != http.StatusOK {
		t.Errorf("/mcp with the victim's token after the foreign replays: %d", st)
	}
	if !e.signedIn(consent.Value) {
		t.Error("the foreign replays signed the victim's browser out")
	}
	if strings.Contains(e.Logs.String(), "oauth grant revoked") {
		t.Errorf("the log says a grant was revoked:\n%s", e.Logs.String())
	}
	st, tok3 := e.refresh(victim, tok2.RefreshToken)
	if st != http.StatusOK {
		t.Fatalf("the victim's refresh after the foreign replays: %d %+v", st, tok3)
	}

	// The victim's own client replaying its rotated refresh token: the
	// token leaked, the grant ends.
	if st, out := e.refresh(victim, tok2.RefreshToken); st != http.StatusBadRequest || out.Error != "invalid_grant" {
		t.Errorf("the owner's replay: %d %+v", st, out)
	}
	if st, _ := e.mcpStatus(tok3.AccessToken); st != http.StatusUnauthorized {
		t.Errorf("/mcp after the owner's replay: %d, want 401", st)
	}
	if e.signedIn(consent.Value) {
		t.Error("the consent's session survives the owner's replay")
	}
	logs := e.Logs.String()
	if !strings.Contains(logs, `msg="oauth grant revoked" grant=`+agent.GrantID+` reason=replay`) {
		t.Errorf("the log does not say the grant was revoked for a replay:\n%s", logs)
	}
	for name, secret := range map[string]string{"code": code, "refresh token": tok2.RefreshToken, "verifier": victim.verifier} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds the %s", name)
		}
	}
}

// TestOAuthAccounts: a grant of acme is a principal of acme only: its
// token never reaches other's approvals, and the browser its consent
// signed in sees acme's inbox and nothing of other's.
func TestOAuthAccounts(t *testing.T) {
	t.Parallel()
	e := ibSetup(t, oaMCP)
	c := e.registerClient(oaCallback)
	carol := e.signIn("carol") // a member of both
	q := e.authzQuery(c)
	page := e.get("/oauth/authorize?"+q.Encode(), e.as(carol.id)).want(t, "consent page", http.StatusOK)
	if !strings.Contains(page.body, `name="account"`) {
		t.Fatal("the consent page offers no choice of account to an approver of two")
	}
	form := url.Values{"csrf": {ibCSRF(t, page.body)}, "decision": {"allow"}, "tier": {"read"}, "account": {e.Acme.ID}, "password": {ibPassword}}
	for k, v := range q {
		form[k] = v
	}
	r := e.post("/oauth/authorize", form, e.as(carol.id))
	loc, _ := url.Parse(r.header.Get("Location"))
	consent := e.sessionCookie(r)
	_, tok := e.exchange(c, loc.Query().Get("code"))

	agent, err := (e.authenticator()).AccessAgent(e.Ctx, tok.AccessToken, e.URL+"/mcp", time.Now())
	if err != nil || agent.AccountID != e.Acme.ID || agent.GrantID == "" {
		t.Fatalf("AccessAgent = %+v, %v", agent, err)
	}
	if _, err := e.authenticator().AccessAgent(e.Ctx, tok.AccessToken, "https://other.example/mcp", time.Now()); countersign.ErrorCode(err) != countersign.EUNAUTHORIZED {
		t.Errorf("the token for another resource: %v", err)
	}
	theirs := e.create(e.agX, ibTool("x"))
	if _, err := e.Service.Get(e.Ctx, agent, theirs.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the grant reads other's request: %v", err)
	}
	if _, err := e.Service.Consume(e.Ctx, agent, theirs.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the grant consumes other's request: %v", err)
	}
	// Not even another principal of its own account.
	mine := e.create(e.agentA, ibTool("a"))
	if _, err := e.Service.Get(e.Ctx, agent, mine.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the grant reads key a's request: %v", err)
	}
	e.get("/approvals/"+mine.ID, e.as(consent.Value)).want(t, "acme's request in the consent's inbox", http.StatusOK)
	e.get("/approvals/"+theirs.ID, e.as(consent.Value)).want(t, "other's request in the consent's inbox", http.StatusNotFound)
}

func (e *ibEnv) authenticator() *identity.Authenticator {
	return &identity.Authenticator{Store: e.Store}
}

// TestOAuthRateLimits: one address cannot register clients or call the
// token endpoint without bound.
func TestOAuthRateLimits(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	body := `{"redirect_uris":["` + oaCallback + `"],"token_endpoint_auth_method":"none"}`
	limited := func(path, ct, body string) bool {
		for range 200 {
			var out oaTokens
			if st := e.oauthPost(path, ct, body, &out, ibFrom("203.0.113.9")); st == http.StatusTooManyRequests {
				return out.Error == "slow_down"
			}
		}
		return false
	}
	if !limited("/oauth/register", "application/json", body) {
		t.Error("registration from one address is not limited")
	}
	if !limited("/oauth/token", "application/x-www-form-urlencoded", "grant_type=refresh_token&client_id=x&refresh_token=y") {
		t.Error("the token endpoint is not limited")
	}
	// Another address is not held back.
	if st := e.oauthPost("/oauth/register", "application/json", body, nil); st != http.StatusCreated {
		t.Errorf("registration from another address: %d", st)
	}
}

// TestConsentEscapes: what a client declares about itself reaches the
// consent page and the grants page as text only.
func TestConsentEscapes(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	var out map[string]any
	body := `{"client_name":"<img src=x onerror=alert(1)>\"'","redirect_uris":["` + oaCallback + `"],"token_endpoint_auth_method":"none"}`
	if st := e.oauthPost("/oauth/register", "application/json", body, &out); st != http.StatusCreated {
		t.Fatalf("register: %d %v", st, out)
	}
	c := oaClient{id: out["client_id"].(string), verifier: strings.Repeat("v", 50)}
	alice := e.signIn("alice")
	q := e.authzQuery(c)
	q.Set("state", `"><script>alert(1)</script>`)
	page := e.get("/oauth/authorize?"+q.Encode(), e.as(alice.id)).want(t, "consent page", http.StatusOK)
	if strings.Contains(page.body, "<img src=x") || strings.Contains(page.body, "<script>alert") {
		t.Fatalf("the consent page carries markup a client sent:\n%s", page.body)
	}
	if !strings.Contains(page.body, "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the consent page does not show the declared name as text:\n%s", page.body)
	}
	signedIn := e.consentAs(alice, q)
	list := e.get("/grants", e.as(signedIn)).want(t, "grants page", http.StatusOK)
	if strings.Contains(list.body, "<img src=x") || !strings.Contains(list.body, "&lt;img src=x") {
		t.Errorf("the grants page shows the name unescaped or not at all:\n%s", list.body)
	}
}

// consentAs allows q as s, whatever its state, checks the redirect and
// returns the session id the consent signed the browser in with.
func (e *ibEnv) consentAs(s ibSession, q url.Values) string {
	e.t.Helper()
	page := e.get("/oauth/authorize?"+q.Encode(), e.as(s.id)).want(e.t, "consent page", http.StatusOK)
	form := url.Values{"csrf": {ibCSRF(e.t, page.body)}, "decision": {"allow"}, "tier": {"read"}, "password": {ibPassword}}
	for k, v := range q {
		form[k] = v
	}
	r := e.post("/oauth/authorize", form, e.as(s.id), ibFrom(e.nextAddr()))
	if loc, _ := url.Parse(r.header.Get("Location")); r.status != http.StatusSeeOther || loc.Query().Get("state") != q.Get("state") || loc.Query().Get("code") == "" {
		e.t.Fatalf("allow: %d to %s", r.status, r.header.Get("Location"))
	}
	return e.sessionCookie(r).Value
}

// evictingStore makes room, as a new registration at the server's cap of
// clients does, just before a grant is stored: the never-used client of
// the consent page is deleted while its page was open.
type evictingStore struct {
	countersign.Store
}

func (s evictingStore) CreateGrant(ctx context.Context, g *countersign.Grant, key *countersign.AgentKey, sess *countersign.Session, code *countersign.OAuthToken) error {
	other := &countersign.OAuthClient{ID: countersign.NewID("csc_"), Name: "other", RedirectURIs: []string{oaCallback}, AuthMethod: "none",
		RegisteredFrom: "192.0.2.9", CreatedAt: time.Now()}
	if err := s.Store.CreateOAuthClient(ctx, other, countersign.ClientLimits{Max: 1}); err != nil {
		return err
	}
	return s.Store.CreateGrant(ctx, g, key, sess, code)
}

// TestConsentClientGone: a client deleted while its consent page was open
// gets no grant, and the approver who allowed it reads why on a page (400),
// not an internal error.
func TestConsentClientGone(t *testing.T) {
	t.Parallel()
	e := ibSetup(t, oaMCP, func(c *server.Config) { c.Store = evictingStore{c.Store} })
	c := e.registerClient(oaCallback)
	q := e.authzQuery(c)
	alice := e.session("alice")
	page := e.get("/oauth/authorize?"+q.Encode(), e.as(alice.id)).want(t, "consent page", http.StatusOK)
	form := url.Values{"csrf": {ibCSRF(t, page.body)}, "decision": {"allow"}, "tier": {"read"}, "password": {ibPassword}}
	for k, v := range q {
		form[k] = v
	}
	r := e.post("/oauth/authorize", form, e.as(alice.id), ibFrom(e.nextAddr())).want(t, "allow for a client gone", http.StatusBadRequest)
	if !strings.Contains(r.body, "no longer registered with this server") || !strings.Contains(r.body, "Go back and connect it again.") {
		t.Errorf("the page says not why:\n%s", r.body)
	}
	if grants, err := e.Store.Grants(e.Ctx, ""); err != nil || len(grants) != 0 {
		t.Errorf("grants after the refusal: %v, %v", grants, err)
	}
	if strings.Contains(e.Logs.String(), "internal error") {
		t.Errorf("the refusal was logged as an internal error:\n%s", e.Logs.String())
	}
}
