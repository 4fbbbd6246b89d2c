package server_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
)

// Every decision needs the CSRF token of its own session: none, a forged
// one, another session's or another approver's is refused and decides
// nothing.
func TestInboxCSRF(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s1, s2, bob := e.signIn("alice"), e.signIn("alice"), e.signIn("bob")
	if s1.csrf == s2.csrf {
		t.Fatal("two sessions of one approver have the same CSRF token")
	}
	req := e.create(e.agentA, ibTool("s1"))
	path := "/approvals/" + req.ID + "/decision"
	cases := []struct {
		name string
		path string
		form url.Values
	}{
		{"missing", path, url.Values{"decision": {"approve"}}},
		{"empty", path, url.Values{"decision": {"approve"}, "csrf": {""}}},
		{"forged", path, url.Values{"decision": {"approve"}, "csrf": {strings.Repeat("A", len(s1.csrf))}}},
		{"another session's", path, url.Values{"decision": {"approve"}, "csrf": {s2.csrf}}},
		{"another approver's", path, url.Values{"decision": {"approve"}, "csrf": {bob.csrf}}},
		{"in the query, not the form", path + "?csrf=" + url.QueryEscape(s1.csrf), url.Values{"decision": {"approve"}}},
	}
	for _, c := range cases {
		r := e.post(c.path, c.form, e.as(s1.id)).want(t, c.name, http.StatusForbidden)
		if !strings.Contains(r.body, "did not come from your session") {
			t.Errorf("%s: the page does not say why:\n%s", c.name, r.body)
		}
		e.wantStatus(c.name, req.ID, countersign.StatusPending)
	}

	// The other forms of a session need the token too.
	for _, p := range []string{"/signout", "/sessions/signout-all", "/account"} {
		e.post(p, url.Values{"account": {e.Other.ID}}, e.as(s1.id)).want(t, p+" without a token", http.StatusForbidden)
	}
	if !e.signedIn(s1.id) || !e.signedIn(s2.id) {
		t.Error("a refused sign-out ended a session")
	}

	// The session's own token passes.
	e.decide(s1, req.ID, url.Values{"decision": {"approve"}}).wantRedirect(t, "own token", "/approvals/"+req.ID)
	e.wantStatus("own token", req.ID, countersign.StatusApproved)
}

// A decision must come from the inbox itself: Origin equal to the public
// origin, or no Origin with Sec-Fetch-Site: same-origin.
func TestInboxOrigin(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	req := e.create(e.agentA, ibTool("s1"))
	refused := []struct {
		name string
		mods []ibMod
	}{
		{"foreign Origin", []ibMod{ibHeader("Origin", "https://evil.example")}},
		{"Origin null", []ibMod{ibHeader("Origin", "null")}},
		{"Origin of the same host under https", []ibMod{ibHeader("Origin", "https://"+e.Public.Host)}},
		{"Origin of another port", []ibMod{ibHeader("Origin", "http://127.0.0.1:1")}},
		{"no Origin, no Sec-Fetch-Site", []ibMod{ibHeader("Origin", "")}},
		{"no Origin, Sec-Fetch-Site cross-site", []ibMod{ibHeader("Origin", ""), ibHeader("Sec-Fetch-Site", "cross-site")}},
		{"no Origin, Sec-Fetch-Site same-site", []ibMod{ibHeader("Origin", ""), ibHeader("Sec-Fetch-Site", "same-site")}},
		{"no Origin, Sec-Fetch-Site none", []ibMod{ibHeader("Origin", ""), ibHeader("Sec-Fetch-Site", "none")}},
		{"foreign Origin with Sec-Fetch-Site same-origin", []ibMod{ibHeader("Origin", "https://evil.example"), ibHeader("Sec-Fetch-Site", "same-origin")}},
		{"Origin null with Sec-Fetch-Site same-origin", []ibMod{ibHeader("Origin", "null"), ibHeader("Sec-Fetch-Site", "same-origin")}},
	}
	for _, c := range refused {
		e.decide(s, req.ID, url.Values{"decision": {"approve"}}, c.mods...).want(t, c.name, http.StatusForbidden)
		e.wantStatus(c.name, req.ID, countersign.StatusPending)
	}

	// Sign-in and sign-out are forms too.
	signin := url.Values{"username": {"alice"}, "password": {ibPassword}}
	for _, origin := range []string{"https://evil.example", "null"} {
		r := e.post("/signin", signin, ibFrom(e.nextAddr()), ibHeader("Origin", origin)).want(t, "sign-in from "+origin, http.StatusForbidden)
		if c := e.sessionCookie(r); c != nil {
			t.Errorf("sign-in from %s set a session cookie", origin)
		}
		e.post("/signout", url.Values{"csrf": {s.csrf}}, e.as(s.id), ibHeader("Origin", origin)).want(t, "sign-out from "+origin, http.StatusForbidden)
	}
	if !e.signedIn(s.id) {
		t.Fatal("a refused sign-out ended the session")
	}

	// The two ways in.
	e.decide(s, req.ID, url.Values{"decision": {"approve"}}, ibHeader("Origin", ""), ibHeader("Sec-Fetch-Site", "same-origin")).
		wantRedirect(t, "no Origin, Sec-Fetch-Site same-origin", "/approvals/"+req.ID)
	e.wantStatus("no Origin, Sec-Fetch-Site same-origin", req.ID, countersign.StatusApproved)
	req2 := e.create(e.agentA, ibTool("s1"))
	e.decide(s, req2.ID, url.Values{"decision": {"deny"}}).wantRedirect(t, "public Origin", "/approvals/"+req2.ID)
	e.wantStatus("public Origin", req2.ID, countersign.StatusDenied)
}

// Every page route answers 421 for another Host, even to a signed-in
// browser (DNS rebinding), and changes nothing.
func TestInboxWrongHost(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	req := e.create(e.agentA, ibTool("s1"))
	_, port, _ := strings.Cut(e.Public.Host, ":")
	form := url.Values{"csrf": {s.csrf}, "decision": {"approve"}, "username": {"alice"}, "password": {ibPassword}, "account": {e.Acme.ID}}
	routes := []struct{ method, path string }{
		{"GET", "/"},
		{"GET", "/signin"},
		{"POST", "/signin"},
		{"POST", "/signout"},
		{"GET", "/sessions"},
		{"POST", "/sessions/signout-all"},
		{"POST", "/account"},
		{"GET", "/approvals"},
		{"GET", "/approvals/events"},
		{"GET", "/approvals/" + req.ID},
		{"POST", "/approvals/" + req.ID + "/decision"},
	}
	for _, host := range []string{"evil.example", "localhost:" + port, "127.0.0.1", e.Public.Host + ".evil.example"} {
		for _, rt := range routes {
			what := rt.method + " " + rt.path + " for " + host
			var f url.Values
			if rt.method == "POST" {
				f = form
			}
			r := e.do(rt.method, rt.path, f, e.as(s.id), ibFrom(e.nextAddr()), ibHost(host)).want(t, what, http.StatusMisdirectedRequest)
			if !strings.Contains(r.body, "This server answers only as "+e.Public.Host) {
				t.Errorf("%s: the page does not say where to go:\n%s", what, r.body)
			}
			if r.header.Get("Content-Security-Policy") == "" || r.header.Get("X-Frame-Options") != "DENY" || r.header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: the page lacks its headers: %v", what, r.header)
			}
			if c := e.sessionCookie(r); c != nil {
				t.Errorf("%s: set a cookie", what)
			}
			// It links to the right address: the same page for a GET of a
			// page, the inbox otherwise.
			link := "http://" + e.Public.Host + "/approvals"
			if rt.method == "GET" && (strings.HasPrefix(rt.path, "/approvals") || rt.path == "/sessions") {
				link = "http://" + e.Public.Host + rt.path
			}
			if !strings.Contains(r.body, `href="`+link+`"`) || !strings.Contains(r.body, `<link rel="stylesheet" href="/static/app.css">`) {
				t.Errorf("%s: the page does not link to %s with its stylesheet:\n%s", what, link, r.body)
			}
		}
		// The stylesheet and script of that page are served under any
		// Host: public files, the same for everyone.
		for _, f := range []string{"/static/app.css", "/static/app.js"} {
			r := e.do("GET", f, nil, ibHost(host)).want(t, f+" for "+host, http.StatusOK)
			if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Content-Security-Policy") != "default-src 'none'" || e.sessionCookie(r) != nil {
				t.Errorf("%s for %s: headers %v", f, host, r.header)
			}
		}
	}
	e.wantStatus("wrong hosts", req.ID, countersign.StatusPending)
	if !e.signedIn(s.id) {
		t.Error("a request for a wrong host ended the session")
	}
}

// The session cookie and the device cookie: __Host- prefixed and Secure
// under https, plain name without; HttpOnly, SameSite=Lax, Path=/ and no
// Domain either way; the session for 12 hours, the device for 180 days.
func TestInboxCookieAttributes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, public, cookie, device string
		secure                       bool
	}{
		{"https", "https://approve.example.com", "__Host-countersign_session", "__Host-countersign_device", true},
		{"http", "", "countersign_session", "countersign_device", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opts []func(*server.Config)
			if c.public != "" {
				opts = append(opts, ibPublic(c.public))
			}
			e := ibSetup(t, opts...)
			r := e.post("/signin", url.Values{"username": {"alice"}, "password": {ibPassword}}, ibFrom(e.nextAddr()))
			r.wantRedirect(t, "sign in", "/approvals")
			raw := r.header.Values("Set-Cookie")
			if len(raw) != 2 {
				t.Fatalf("Set-Cookie %q, want the session's and the device's", raw)
			}
			for i, want := range []struct {
				name string
				ttl  time.Duration
			}{{c.cookie, 12 * time.Hour}, {c.device, 180 * 24 * time.Hour}} {
				ck := r.cookie[i]
				if ck.Name != want.name || ck.Value == "" || ck.Secure != c.secure || !ck.HttpOnly ||
					ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" {
					t.Errorf("cookie %q: name %s, secure %v, httponly %v, samesite %v, path %q, domain %q; want %s, secure %v, HttpOnly, Lax, path /, no domain",
						raw[i], ck.Name, ck.Secure, ck.HttpOnly, ck.SameSite, ck.Path, ck.Domain, want.name, c.secure)
				}
				if ck.MaxAge != int(want.ttl.Seconds()) {
					t.Errorf("cookie %q lasts %d s, want %s", raw[i], ck.MaxAge, want.ttl)
				}
				if strings.Contains(raw[i], "; Secure") != c.secure {
					t.Errorf("cookie %q: Secure should be %v", raw[i], c.secure)
				}
			}
			ck := r.cookie[0]
			if e.get("/approvals", e.cookie(c.cookie, ck.Value)).status != http.StatusOK {
				t.Fatal("the cookie does not open the inbox")
			}
			// Under https the server reads only the prefixed name, which a
			// sibling subdomain cannot set.
			if c.secure {
				e.get("/approvals", e.cookie("countersign_session", ck.Value)).
					wantRedirect(t, "unprefixed cookie under https", "/signin?next=%2Fapprovals")
			}
			inbox := e.get("/approvals", e.as(ck.Value))
			out := e.post("/signout", url.Values{"csrf": {ibCSRF(t, inbox.body)}}, e.as(ck.Value))
			out.wantRedirect(t, "sign out", "/signin")
			cleared := e.sessionCookie(out)
			if cleared == nil || cleared.Value != "" || cleared.MaxAge >= 0 || cleared.Secure != c.secure || cleared.Path != "/" {
				t.Errorf("sign-out cookie %q does not clear the session cookie", out.header.Values("Set-Cookie"))
			}
		})
	}
}

// Every sign-in gets a new session id: a cookie planted beforehand never
// becomes a session, and signing in again never reuses the old id.
func TestInboxNewSessionIDAtSignIn(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	const planted = "planted-by-someone-else-0123456789abcdef"
	creds := url.Values{"username": {"alice"}, "password": {ibPassword}}
	seen := map[string]bool{planted: true}
	prev := planted
	for i := range 3 {
		r := e.post("/signin", creds, e.as(prev), ibFrom(e.nextAddr()))
		r.wantRedirect(t, "sign in", "/approvals")
		c := e.sessionCookie(r)
		if c == nil || len(c.Value) < 32 {
			t.Fatalf("sign-in %d: session cookie %v, want a long random id", i, c)
		}
		if seen[c.Value] {
			t.Fatalf("sign-in %d reused the session id %q", i, c.Value)
		}
		seen[c.Value] = true
		prev = c.Value
	}
	if e.signedIn(planted) {
		t.Error("the planted cookie became a session")
	}
	if !e.signedIn(prev) {
		t.Error("the newest session does not work")
	}
}

// Sign-in is limited to 5 attempts a minute per client address (IPv6 per
// /64): the sixth is refused even with the right password, and another
// address is not affected.
func TestInboxSigninLimit(t *testing.T) {
	t.Parallel()
	wrong := url.Values{"username": {"alice"}, "password": {"not the password"}}
	right := url.Values{"username": {"alice"}, "password": {ibPassword}}
	signin := func(e *ibEnv, form url.Values, from string) response {
		t.Helper()
		return e.post("/signin", form, ibFrom(from))
	}
	exhaust := func(e *ibEnv, from ...string) {
		t.Helper()
		for i := range 5 {
			r := signin(e, wrong, from[i%len(from)]).want(t, "wrong password", http.StatusUnauthorized)
			if !strings.Contains(r.body, "Wrong username or password.") {
				t.Fatalf("attempt %d: the page does not say why:\n%s", i+1, r.body)
			}
		}
	}
	limited := func(e *ibEnv, from string) {
		t.Helper()
		r := signin(e, right, from).want(t, "sixth attempt from "+from, http.StatusTooManyRequests)
		ra, err := strconv.Atoi(r.header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 60 {
			t.Errorf("Retry-After %q, want 1 to 60 seconds", r.header.Get("Retry-After"))
		}
		if e.sessionCookie(r) != nil {
			t.Error("a limited attempt set a session cookie")
		}
		if !strings.Contains(r.body, "Too many sign-in attempts") {
			t.Errorf("the page does not say why:\n%s", r.body)
		}
	}
	allowed := func(e *ibEnv, from string) {
		t.Helper()
		r := signin(e, right, from)
		r.wantRedirect(t, "sign-in from "+from, "/approvals")
		if e.sessionCookie(r) == nil {
			t.Errorf("sign-in from %s set no cookie", from)
		}
	}

	t.Run("IPv4", func(t *testing.T) {
		e := ibSetup(t)
		exhaust(e, "203.0.113.7")
		limited(e, "203.0.113.7")
		allowed(e, "203.0.113.8")
		// The proxy appends the real client; what the client itself put in
		// front of it does not count.
		limited(e, "10.9.8.7, 203.0.113.7")
		// A proxy that writes the client's port counts the client, not
		// itself.
		limited(e, "203.0.113.7:41234")
		allowed(e, "203.0.113.9:41234")
	})
	t.Run("IPv6 per /64", func(t *testing.T) {
		e := ibSetup(t)
		exhaust(e, "2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:aaaa:bbbb:cccc:dddd")
		limited(e, "2001:db8:1:2:ffff::9")
		limited(e, "[2001:db8:1:2::77]:443")
		allowed(e, "2001:db8:1:3::1")
	})
	t.Run("X-Forwarded-For of an untrusted client", func(t *testing.T) {
		e := ibSetup(t, ibNoProxies)
		exhaust(e, "203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4", "203.0.113.5")
		limited(e, "203.0.113.6")
	})
}

// A session ends with sign out, sign out everywhere (all of that
// approver's, nobody else's), removal from the account and a new password.
func TestInboxSessionRevocation(t *testing.T) {
	t.Parallel()
	t.Run("sign out", func(t *testing.T) {
		e := ibSetup(t)
		s, other := e.signIn("alice"), e.signIn("alice")
		req := e.create(e.agentA, ibTool("s1"))
		e.post("/signout", url.Values{"csrf": {s.csrf}}, e.as(s.id)).wantRedirect(t, "sign out", "/signin")
		e.get("/approvals", e.as(s.id)).wantRedirect(t, "old cookie", "/signin?next=%2Fapprovals")
		e.decide(s, req.ID, url.Values{"decision": {"approve"}}).want(t, "decision with the old cookie", http.StatusUnauthorized)
		e.wantStatus("decision with the old cookie", req.ID, countersign.StatusPending)
		if !e.signedIn(other.id) {
			t.Error("signing out one browser ended another")
		}
	})
	t.Run("sign out everywhere", func(t *testing.T) {
		e := ibSetup(t)
		a1, a2, bob, carol := e.signIn("alice"), e.signIn("alice"), e.signIn("bob"), e.signIn("carol")
		sessions := e.get("/sessions", e.as(a1.id)).want(t, "sessions page", http.StatusOK)
		if n := strings.Count(sessions.body, "signed in 20"); n != 2 {
			t.Errorf("the sessions page lists %d sessions, want alice's 2:\n%s", n, sessions.body)
		}
		e.post("/sessions/signout-all", url.Values{"csrf": {a1.csrf}}, e.as(a1.id)).wantRedirect(t, "sign out everywhere", "/signin")
		if e.signedIn(a1.id) || e.signedIn(a2.id) {
			t.Error("an approver's session survived sign out everywhere")
		}
		if !e.signedIn(bob.id) || !e.signedIn(carol.id) {
			t.Error("sign out everywhere ended another approver's session")
		}
	})
	t.Run("removed from the account", func(t *testing.T) {
		e := ibSetup(t)
		alice, bob := e.signIn("alice"), e.signIn("bob")
		if _, err := e.Store.RemoveMembership(e.Ctx, e.Alice.ID, e.Acme.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if e.signedIn(alice.id) {
			t.Error("the session survived the removal from its account")
		}
		if !e.signedIn(bob.id) {
			t.Error("removing alice ended bob's session")
		}
	})
	t.Run("new password", func(t *testing.T) {
		e := ibSetup(t)
		alice, bob := e.signIn("alice"), e.signIn("bob")
		if _, err := e.Store.SetPassword(e.Ctx, e.Alice.ID, testutil.PasswordHash(), false, time.Now()); err != nil {
			t.Fatal(err)
		}
		if e.signedIn(alice.id) {
			t.Error("the session survived a new password")
		}
		if !e.signedIn(bob.id) {
			t.Error("alice's new password ended bob's session")
		}
	})
}
