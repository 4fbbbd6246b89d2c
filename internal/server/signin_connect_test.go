package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestSigninNamesConnection: the sign-in page on the way to a consent
// says which client asks to connect to which server and where the browser
// returns; an unknown client, or a redirect URI the client did not
// register, is named nowhere.
func TestSigninNamesConnection(t *testing.T) {
	t.Parallel()
	e := ibSetup(t, oaMCP)
	c := e.registerClient(oaCallback)
	q := e.authzQuery(c)
	signin := func(q url.Values) string {
		return e.get("/signin?next="+url.QueryEscape("/oauth/authorize?"+q.Encode())).want(t, "sign-in", http.StatusOK).body
	}
	page := signin(q)
	want := `<b class="declared">Claude</b> asks to connect to <b>` + e.Public.Host + `</b> as an agent of your account, and then to return you to <b>claude.ai</b>`
	if !strings.Contains(page, want) {
		t.Errorf("the sign-in page lacks %q:\n%s", want, page)
	}
	for what, bad := range map[string]url.Values{
		"unknown client":   {"client_id": {"nope"}, "redirect_uri": {oaCallback}},
		"foreign redirect": {"client_id": {c.id}, "redirect_uri": {"https://evil.example/cb"}},
	} {
		if p := signin(bad); strings.Contains(p, "asks to connect") || strings.Contains(p, "evil.example</b>") {
			t.Errorf("%s: the sign-in page names a connection", what)
		}
	}
	if p := e.get("/signin").want(t, "plain sign-in", http.StatusOK).body; strings.Contains(p, "asks to connect") {
		t.Error("the plain sign-in page names a connection")
	}
}

// TestGrantCards: the connections page shows one card per grant with its
// client, approver, tiers, created, last used and Revoke, and the key's
// generated name once; a revoked grant's card says so and has no Revoke.
func TestGrantCards(t *testing.T) {
	t.Parallel()
	e := ibSetup(t, oaMCP)
	c := e.registerClient(oaCallback)
	alice := e.signIn("alice")
	e.consent(alice, e.authzQuery(c))
	alice = e.signIn("alice")
	grants, _ := e.Store.Grants(e.Ctx, e.Acme.ID)
	if len(grants) != 1 {
		t.Fatalf("%d grants", len(grants))
	}
	g := grants[0]
	body := e.get("/grants", e.as(alice.id)).want(t, "grants page", http.StatusOK).body
	for _, want := range []string{
		`<li class="card grant">`, `<span class="declared">Claude</span>`, `<dd class="grant-approver">alice</dd>`,
		`<dd class="grant-tiers">read, write</dd>`, `<dd class="grant-used">never</dd>`, `<p class="grant-key">its agent key: <code>` + g.KeyName + `</code></p>`,
		`action="/grants/` + g.ID + `/revoke"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the grants page lacks %q", want)
		}
	}
	if n := strings.Count(body, g.KeyName); n != 1 {
		t.Errorf("the key's name %q appears %d times, want once", g.KeyName, n)
	}
	e.post("/grants/"+g.ID+"/revoke", url.Values{"csrf": {alice.csrf}}, e.as(alice.id)).wantRedirect(t, "revoke", "/grants")
	body = e.get("/grants", e.as(alice.id)).want(t, "grants page after revoking", http.StatusOK).body
	if !strings.Contains(body, `<li class="card grant revoked">`) || !strings.Contains(body, `class="grant-revoked"`) || strings.Contains(body, "/revoke") {
		t.Errorf("the revoked grant's card:\n%s", body)
	}
}
