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

// pkSetup is the inbox under the default step-up policy, reached at a
// host name, so that passkeys are on.
func pkSetup(t *testing.T) *ibEnv {
	t.Helper()
	return ibSetupWith(t, approval.Config{StepUp: approval.DefaultStepUp}, ibPublic("https://approve.example.com"))
}

// pkCommit is an MCP call of the commit tier, as the gateway asks for it.
func pkCommit(n string) client.CreateInput {
	return client.CreateInput{Kind: "mcp", Action: "files.delete", Arguments: []byte(`{"path":"` + n + `"}`),
		Preview: "delete " + n, RiskReasons: []string{approval.TierReason(countersign.TierCommit)}, Tier: "commit"}
}

// TestStepUpRefusesScripts: a signed-in browser's cookie and CSRF token,
// posted by a script or by a browser without the page's script, cannot
// approve a step-up request: the answer is a page that says a passkey is
// needed, and nothing changes. Deny stays one click, and a plain request
// is approved as before.
func TestStepUpRefusesScripts(t *testing.T) {
	t.Parallel()
	e := pkSetup(t)
	s := e.signIn("alice")
	req := e.create(e.agentA, pkCommit("/srv/a"))

	page := e.get("/approvals/"+req.ID, e.as(s.id)).want(t, "request page", http.StatusOK).body
	for _, want := range []string{`data-webauthn="stepup"`, "Approving this request needs your passkey", `<a class="add-passkey" href="/passkeys?next=%2Fapprovals%2F` + req.ID + `">add one</a>`, "disabled"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page of a step-up request for an approver without passkeys lacks %q", want)
		}
	}
	r := e.decide(s, req.ID, url.Values{"decision": {"approve"}}).want(t, "scripted approve", http.StatusForbidden)
	if !strings.Contains(r.body, "needs a passkey") {
		t.Errorf("the refusal does not say a passkey is needed:\n%s", r.body)
	}
	e.wantStatus("after a scripted approve", req.ID, countersign.StatusPending)

	// A made-up answer is refused with a reason, and changes nothing.
	r = e.decide(s, req.ID, url.Values{"decision": {"approve"}, "webauthn_handle": {"made-up"}, "webauthn_response": {`{"id":"x"}`}})
	r.want(t, "approve with a made-up assertion", http.StatusBadRequest)
	if !strings.Contains(r.body, "expired or was already used") {
		t.Errorf("the refusal of a made-up assertion does not say why:\n%s", r.body)
	}
	e.wantStatus("after a made-up assertion", req.ID, countersign.StatusPending)

	// An approver token (the terminal client) cannot approve it either.
	_, token, err := e.Admin.CreateApproverToken(e.Ctx, "alice", "acme", "cli")
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.New(e.URL, token).Decide(e.Ctx, req.ID, client.Decision{Decision: "approve"})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden || !strings.Contains(apiErr.Message, "needs a passkey") {
		t.Fatalf("approve by approver token: %v, want 403 saying a passkey is needed", err)
	}
	e.wantStatus("after an approve by token", req.ID, countersign.StatusPending)

	// Deny needs no passkey.
	e.decide(s, req.ID, url.Values{"decision": {"deny"}}).wantRedirect(t, "deny", "/approvals/"+req.ID)
	e.wantStatus("after deny", req.ID, countersign.StatusDenied)

	// A window on a plain request needs one; the plain approval does not.
	plain := e.create(e.agentA, ibTool("sess-1"))
	e.decide(s, plain.ID, url.Values{"decision": {"approve"}, "auto_approve_minutes": {"5"}}).want(t, "scripted window", http.StatusForbidden)
	page = e.get("/approvals/"+plain.ID, e.as(s.id)).want(t, "plain request page", http.StatusOK).body
	if strings.Count(page, `data-webauthn="stepup"`) != 1 {
		t.Errorf("the page of a plain request should ask a passkey for the window only")
	}
	e.decide(s, plain.ID, url.Values{"decision": {"approve"}}).wantRedirect(t, "plain approve", "/approvals/"+plain.ID)
	e.wantStatus("plain approve", plain.ID, countersign.StatusApproved)
}

// TestPasskeyRoutesRefuse: the ceremonies' routes refuse what they must:
// no session, another site, a begin for another decision than approve.
func TestPasskeyRoutesRefuse(t *testing.T) {
	t.Parallel()
	e := pkSetup(t)
	s := e.signIn("alice")
	req := e.create(e.agentA, pkCommit("/srv/b"))
	for what, r := range map[string]response{
		"register begin without a session": e.post("/passkeys/register/begin", url.Values{"name": {"x"}}),
		"step-up begin without a session":  e.post("/approvals/"+req.ID+"/stepup", url.Values{"decision": {"approve"}}),
		"register begin without CSRF":      e.post("/passkeys/register/begin", url.Values{"name": {"x"}}, e.as(s.id)),
		"sign-in begin from another site":  e.post("/signin/passkey/begin", nil, ibHeader("Origin", "https://evil.example")),
	} {
		if r.status != http.StatusUnauthorized && r.status != http.StatusForbidden {
			t.Errorf("%s: status %d, want 401 or 403:\n%s", what, r.status, r.body)
		}
	}
	r := e.post("/approvals/"+req.ID+"/stepup", url.Values{"decision": {"approve"}, "csrf": {s.csrf}}, e.as(s.id))
	r.want(t, "step-up begin without a passkey", http.StatusForbidden)
	if !strings.Contains(r.body, "you have none yet") {
		t.Errorf("step-up begin without a passkey: %s", r.body)
	}
	r = e.post("/approvals/"+req.ID+"/stepup", url.Values{"decision": {"deny"}, "csrf": {s.csrf}}, e.as(s.id))
	r.want(t, "step-up begin of a deny", http.StatusBadRequest)
	r = e.post("/signin/passkey/begin", nil).want(t, "sign-in begin", http.StatusOK)
	if !strings.Contains(r.body, `"rpId":"approve.example.com"`) || !strings.Contains(r.body, `"userVerification":"required"`) ||
		strings.Contains(r.body, "allowCredentials") {
		t.Errorf("sign-in options: %s", r.body)
	}
	e.post("/signin/passkey", url.Values{"webauthn_handle": {"x"}}).want(t, "sign-in without an answer", http.StatusBadRequest)
	e.get("/enrol/cse_unknown").want(t, "an unknown enrolment link", http.StatusNotFound)
}

// TestPasskeyOnlySignIn: with the password off, a password sign-in is
// refused exactly as a wrong password is.
func TestPasskeyOnlySignIn(t *testing.T) {
	t.Parallel()
	e := pkSetup(t)
	if _, err := e.Store.SetPassword(e.Ctx, e.Alice.ID, "", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	wrong := e.post("/signin", url.Values{"username": {"bob"}, "password": {"not it"}}, ibFrom(e.nextAddr()))
	for _, pw := range []string{ibPassword, ""} {
		r := e.post("/signin", url.Values{"username": {"alice"}, "password": {pw}}, ibFrom(e.nextAddr()))
		if r.status != wrong.status || e.sessionCookie(r) != nil || !strings.Contains(r.body, "Wrong username or password.") {
			t.Fatalf("password sign-in of a passkey-only approver: %d, want %d as a wrong password:\n%s", r.status, wrong.status, r.body)
		}
	}
}

// TestStepUpLinks: an e-mailed link cannot approve a delete of a
// protected path under the default policy; its deny link still denies.
func TestStepUpLinks(t *testing.T) {
	t.Parallel()
	e := sdNewWith(t, approval.DefaultStepUp)
	const id = "del_1700000000_9"
	e.createDelete(id, "rm -rf /var/www/data")
	page := sdPage(t, "approve link", e.press(e.link("delete-requests", approval.LinkApprove, id, ""), nil), http.StatusForbidden)
	if !strings.Contains(page, "needs a passkey") {
		t.Errorf("the approve link's refusal does not say a passkey is needed:\n%s", page)
	}
	if r := e.stored("delete:" + id); r.Status != countersign.StatusPending {
		t.Fatalf("after the approve link the request is %s", r.Status)
	}
	e.press(e.link("delete-requests", approval.LinkDeny, id, ""), url.Values{"reason": {"no"}})
	if r := e.stored("delete:" + id); r.Status != countersign.StatusDenied {
		t.Fatalf("after the deny link the request is %s", r.Status)
	}
}

// TestPasskeyNameHidden: a passkey's name is shown on /passkeys and by
// `countersign approver passkeys` in a terminal, so a name with a C1
// control (U+009B starts an escape sequence in some terminals), a bidi
// override or a zero-width character is refused before any ceremony.
func TestPasskeyNameHidden(t *testing.T) {
	t.Parallel()
	e := pkSetup(t)
	s := e.signIn("alice")
	for _, name := range []string{"lap\u009b2Jtop", "laptop \u202egnp", "lap\u200btop"} {
		r := e.post("/passkeys/register/begin", url.Values{"name": {name}, "password": {ibPassword}, "csrf": {s.csrf}}, e.as(s.id))
		r.want(t, "register begin with a hidden character in the name", http.StatusBadRequest)
	}
	e.post("/passkeys/register/begin", url.Values{"name": {"laptop"}, "password": {ibPassword}, "csrf": {s.csrf}}, e.as(s.id)).want(t, "register begin", http.StatusOK)
}

// TestPasskeyRegistrationNeedsPassword: a session cookie with its CSRF
// token does not add a passkey. An agent that drives the signed-in
// browser could otherwise add one of its own (a virtual authenticator)
// and answer every step-up with it. The approver types the password
// again; a passkey-only approver adds one through an enrolment link.
func TestPasskeyRegistrationNeedsPassword(t *testing.T) {
	t.Parallel()
	e := pkSetup(t)
	s := e.signIn("alice")
	for what, pw := range map[string][]string{"no password": nil, "a wrong password": {"not it"}} {
		r := e.post("/passkeys/register/begin", url.Values{"name": {"agent"}, "password": pw, "csrf": {s.csrf}}, e.as(s.id))
		if r.status != http.StatusUnauthorized || strings.Contains(r.body, `"handle"`) {
			t.Errorf("register begin with %s: %d, want 401 and no ceremony:\n%s", what, r.status, r.body)
		}
	}
	e.post("/passkeys/register/begin", url.Values{"name": {"laptop"}, "password": {ibPassword}, "csrf": {s.csrf}}, e.as(s.id)).
		want(t, "register begin with the password", http.StatusOK)
	page := e.get("/passkeys", e.as(s.id)).want(t, "passkeys page", http.StatusOK).body
	if !strings.Contains(page, `name="password"`) {
		t.Errorf("the passkeys page asks for no password")
	}

	if _, err := e.Store.SetPassword(e.Ctx, e.Alice.ID, "", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	ap, err := e.Store.ApproverByID(e.Ctx, e.Alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := (&identity.Sessions{Store: e.Store, Clock: countersign.SystemClock{}}).Open(e.Ctx, ap, "127.0.0.1", "test")
	if err != nil {
		t.Fatal(err)
	}
	page = e.get("/passkeys", e.as(id)).want(t, "passkeys page of a passkey-only approver", http.StatusOK).body
	if strings.Contains(page, `data-webauthn="register"`) || !strings.Contains(page, "countersign approver enrol") {
		t.Errorf("the passkeys page of a passkey-only approver should point to an enrolment link, not offer a form")
	}
	s = ibSession{id: id, csrf: ibCSRF(t, page)}
	r := e.post("/passkeys/register/begin", url.Values{"name": {"agent"}, "password": {ibPassword}, "csrf": {s.csrf}}, e.as(s.id))
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "approver enrol") {
		t.Errorf("register begin of a passkey-only approver: %d, want 403 naming approver enrol:\n%s", r.status, r.body)
	}
}
