package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestConsentNeedsFreshProof: a signed-in session with its CSRF token
// (what an agent driving the approver's browser has) cannot allow a
// connection: Allow asks for the password again. A wrong password is
// refused and counts against the sign-in limits of the address, as a
// sign-in does; the right one makes the grant.
func TestConsentNeedsFreshProof(t *testing.T) {
	t.Parallel()
	e := ibSetup(t, oaMCP)
	c := e.registerClient(oaCallback)
	alice := e.signIn("alice")
	q := e.authzQuery(c)
	page := e.get("/oauth/authorize?"+q.Encode(), e.as(alice.id)).want(t, "consent page", http.StatusOK)
	for _, want := range []string{`id="consent-password"`, `autocomplete="current-password"`, "Allowing needs your password again"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the consent page lacks %q:\n%s", want, page.body)
		}
	}
	form := func(password string) url.Values {
		f := url.Values{"csrf": {alice.csrf}, "decision": {"allow"}, "tier": {"read", "write"}}
		if password != "" {
			f.Set("password", password)
		}
		for k, v := range q {
			f[k] = v
		}
		return f
	}
	noGrant := func(what string) {
		t.Helper()
		if grants, _ := e.Store.Grants(e.Ctx, ""); len(grants) != 0 {
			t.Fatalf("%s made %d grants", what, len(grants))
		}
	}

	// The session and its CSRF token alone: refused, on the consent page.
	r := e.post("/oauth/authorize", form(""), e.as(alice.id), ibFrom("203.0.113.20"))
	if r.status != http.StatusUnauthorized || r.header.Get("Location") != "" || !strings.Contains(r.body, "Type your password") ||
		!strings.Contains(r.body, `id="consent-password"`) {
		t.Fatalf("Allow without the password: %d, Location %q:\n%s", r.status, r.header.Get("Location"), r.body)
	}
	noGrant("Allow without the password")

	// Wrong passwords, from one address: refused, and counted as sign-in
	// attempts of the address (5 in any 60 s), so the sixth is held back
	// even with the right password, and so is a sign-in from there.
	const from = "203.0.113.21"
	for i := range 5 {
		r := e.post("/oauth/authorize", form("hunter2-guess"), e.as(alice.id), ibFrom(from))
		if r.status != http.StatusUnauthorized || !strings.Contains(r.body, "Wrong password. Type the password you sign in with to allow the connection.") {
			t.Fatalf("wrong password %d: %d:\n%s", i+1, r.status, r.body)
		}
	}
	r = e.post("/oauth/authorize", form(ibPassword), e.as(alice.id), ibFrom(from))
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "Too many sign-in attempts from your address") {
		t.Fatalf("the right password after five wrong ones: %d, Retry-After %q:\n%s", r.status, r.header.Get("Retry-After"), r.body)
	}
	e.post("/signin", url.Values{"username": {"alice"}, "password": {ibPassword}}, ibFrom(from)).want(t, "a sign-in from that address", http.StatusTooManyRequests)
	noGrant("wrong passwords")
	if logs := e.Logs.String(); !strings.Contains(logs, "password confirmation refused: wrong password") || strings.Contains(logs, "hunter2-guess") {
		t.Errorf("the log of the wrong passwords:\n%s", logs)
	}

	// The right password, from elsewhere: the grant, the code, tokens.
	r = e.post("/oauth/authorize", form(ibPassword), e.as(alice.id), ibFrom("203.0.113.22"))
	loc, _ := url.Parse(r.header.Get("Location"))
	if r.status != http.StatusSeeOther || loc.Query().Get("code") == "" || loc.Query().Get("state") != "st-1" {
		t.Fatalf("Allow with the password: %d to %q:\n%s", r.status, loc, r.body)
	}
	if st, tok := e.exchange(c, loc.Query().Get("code")); st != http.StatusOK || tok.Scope != "read write" {
		t.Fatalf("exchange: %d %+v", st, tok)
	}
	if !strings.Contains(e.Logs.String(), "proof=password") {
		t.Error("the log does not say how the consent was proved")
	}
	if strings.Contains(e.Logs.String(), ibPassword) {
		t.Error("the log holds the password")
	}
}
