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
	want := `<b class="declared">Claude</b> asks to connect to <b>` + e.public.Host + `</b> as an agent of your account, and then to return you to <b>claude.ai</b>`
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
