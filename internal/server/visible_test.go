package server_test

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
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

// TestInboxShowsHiddenCharacters: a request whose text holds hidden
// characters is refused; one stored before they were is shown in the
// inbox and on the request page with every hidden character as an escape.
func TestInboxShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	in := client.CreateInput{Kind: "rm", Action: "rm -rf " + hiddenText, Preview: "rm -rf " + hiddenText}
	_, _, err := e.agentA.Create(e.Ctx, in)
	wantRefused(t, "asking with hidden characters", err)
	// One a version before stored is still shown, escaped.
	r := storeOld(t, e.Store, e.KeyA, e.World.Clock.Now(), countersign.CreateInput{Kind: countersign.KindRm, Action: in.Action, Preview: in.Preview})
	wantShown(t, "the inbox", e.get("/approvals", e.as(s.id)).want(t, "inbox", http.StatusOK).body)
	wantShown(t, "the request page", e.get("/approvals/"+r.ID, e.as(s.id)).want(t, "request page", http.StatusOK).body)
}

// TestLinkPageShowsHiddenCharacters: the page of a one-time link shows
// every hidden character of a request stored before they were refused as
// an escape.
func TestLinkPageShowsHiddenCharacters(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	agent, err := (&identity.Authenticator{Store: s.Store}).Agent(s.Ctx, s.KeyA)
	if err != nil {
		t.Fatal(err)
	}
	tokens, links := approval.NewLinks(approval.LinkApprove)
	in := countersign.CreateInput{Kind: countersign.KindRm, Action: "rm -rf " + hiddenText,
		RiskReasons: []string{"protected path: " + hiddenText}, Links: links}
	_, _, err = s.Service.Create(s.Ctx, agent, in)
	wantRefused(t, "asking with hidden characters", err)
	storeOld(t, s.Store, s.KeyA, s.Clock.Now(), in)
	resp := nlDo(t, s, http.MethodGet, tokens[approval.LinkApprove], "", nil)
	if resp.status != http.StatusOK {
		t.Fatalf("GET the link = %d\n%s", resp.status, resp.body)
	}
	wantShown(t, "the link page", resp.body)
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

// storeOld stores what an agent key asked as a version that did not yet
// refuse hidden characters stored it: straight into the store, past the
// service's checks, with the binding the service would give it. The pages
// still show such a request, and must show it escaped.
func storeOld(t *testing.T, store countersign.Store, key string, now time.Time, in countersign.CreateInput) *countersign.Request {
	t.Helper()
	agent, err := (&identity.Authenticator{Store: store}).Agent(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	args, err := approval.Canonical(in.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	if in.Preview == "" {
		in.Preview = in.Action
	}
	r := &countersign.Request{ID: countersign.NewOrderedID("req_"), AccountID: agent.AccountID, KeyID: agent.KeyID, KeyName: agent.KeyName,
		Reference: countersign.NewReference(), Kind: in.Kind, Action: in.Action, Arguments: args, ArgsHash: approval.Hash(args),
		Preview: in.Preview, PreviewHash: approval.Hash([]byte(in.Preview)), RiskReasons: in.RiskReasons, Context: in.Context,
		Status: countersign.StatusPending, CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute), Links: in.Links,
		ArgumentsText: approval.ArgumentsText(args), Scope: &countersign.Scope{}}
	got, _, err := store.CreateRequest(t.Context(), r, 0, now, countersign.AuditEvent{Event: "created", Actor: "key:" + agent.KeyID, Detail: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// wantRefused fails unless err is the service's 400 about a control or
// format character.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	var ce *client.Error
	switch {
	case errors.As(err, &ce) && ce.Status == http.StatusBadRequest && strings.Contains(ce.Message, "control or format characters"):
	case countersign.ErrorCode(err) == countersign.EINVALID && strings.Contains(countersign.ErrorMessage(err), "control or format characters"):
	default:
		t.Fatalf("%s: %v, want it refused for its control or format characters", what, err)
	}
}
