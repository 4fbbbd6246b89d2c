package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
)

// hiddenText holds characters that display as nothing or reorder the text
// (a soft hyphen, a zero-width space, a word joiner, a byte order mark, a
// right-to-left override and a tag character); hiddenShown is how every
// surface must show it.
const (
	hiddenText  = "/srv/\u00adlogs\u200b\u2060\ufeff \u202etxt.exe\U000e0041"
	hiddenShown = `/srv/\u00adlogs\u200b\u2060\ufeff \u202etxt.exe\U000e0041`
)

// wantShown fails unless a page shows hiddenText escaped and holds none of
// its hidden characters raw.
func wantShown(t *testing.T, what, body string) {
	t.Helper()
	if strings.ContainsAny(body, "\u00ad\u200b\u2060\ufeff\u202e\U000e0041") {
		t.Errorf("%s holds a hidden character raw:\n%s", what, body)
	}
	if !strings.Contains(body, hiddenShown) {
		t.Errorf("%s does not show %s:\n%s", what, hiddenShown, body)
	}
}

// TestInboxShowsHiddenCharacters: the inbox and the request page show
// every hidden character an agent sent as an escape.
func TestInboxShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	r := e.create(e.agentA, client.CreateInput{Kind: "rm", Action: "rm -rf " + hiddenText, Preview: "rm -rf " + hiddenText})
	wantShown(t, "the inbox", e.get("/approvals", e.as(s.id)).want(t, "inbox", http.StatusOK).body)
	wantShown(t, "the request page", e.get("/approvals/"+r.ID, e.as(s.id)).want(t, "request page", http.StatusOK).body)
}

// TestLinkPageShowsHiddenCharacters: the page of a one-time link shows
// every hidden character an agent sent as an escape.
func TestLinkPageShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	agent, err := (&approval.Authenticator{Store: s.store}).Agent(s.ctx, s.keyA)
	if err != nil {
		t.Fatal(err)
	}
	tokens, links := approval.NewLinks(approval.LinkApprove)
	_, _, err = s.svc.Create(s.ctx, agent, countersign.CreateInput{Kind: countersign.KindRm, Action: "rm -rf " + hiddenText,
		RiskReasons: []string{"protected path: " + hiddenText}, Links: links})
	if err != nil {
		t.Fatal(err)
	}
	resp := nlDo(t, s, http.MethodGet, tokens[approval.LinkApprove], "", nil)
	if resp.status != http.StatusOK {
		t.Fatalf("GET the link = %d\n%s", resp.status, resp.body)
	}
	wantShown(t, "the link page", string(resp.body))
}

// TestSessionsPageShowsHiddenCharacters: the sessions page, where an
// approver looks for a browser that is not theirs, shows the hidden
// characters of a session's User-Agent (whoever signed in chose it) as
// escapes, so that one cannot pass for another.
func TestSessionsPageShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	r := e.post("/signin", url.Values{"username": {"alice"}, "password": {ibPassword}, "next": {"/approvals"}}, ibFrom(e.nextAddr()),
		func(r *http.Request) { r.Header.Set("User-Agent", "Mozilla "+hiddenText) })
	r.wantRedirect(t, "sign in", "/approvals")
	c := e.sessionCookie(r)
	if c == nil {
		t.Fatal("no session cookie")
	}
	wantShown(t, "the sessions page", e.get("/sessions", e.as(c.Value)).want(t, "sessions page", http.StatusOK).body)
}
