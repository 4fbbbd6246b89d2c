package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/testutil"
)

// next, after sign-in, goes only to the server's own pages; anything else
// goes to the inbox.
func TestInboxNext(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	cases := []struct{ next, want string }{
		{"", "/approvals"},
		{"/approvals", "/approvals"},
		{"/approvals/req_x", "/approvals/req_x"},
		{"/sessions", "/sessions"},
		{"//evil.com", "/approvals"},
		{"///evil.com", "/approvals"},
		{"https://evil.com", "/approvals"},
		{"http:/evil.com", "/approvals"},
		{`/\evil.com`, "/approvals"},
		{`\\evil.com`, "/approvals"},
		{`/approvals/\evil.com`, "/approvals"},
		{"/%2F%2Fevil.com", "/approvals"},
		{"/\t/evil.com", "/approvals"},
		{"javascript:alert(1)", "/approvals"},
		{"/signin", "/approvals"},
		{"/signout", "/approvals"},
		{"/approvalsevil.com", "/approvals"},
		{"/static/app.js", "/approvals"},
	}
	for _, c := range cases {
		// Signed in already: the form sends the browser on at once.
		e.get("/signin?next="+url.QueryEscape(c.next), e.as(s.id)).wantRedirect(t, "signed in, next "+c.next, c.want)
		// Signed out: the form carries only a safe next ...
		form := e.get("/signin?next="+url.QueryEscape(c.next)).want(t, "sign-in form", http.StatusOK)
		if !strings.Contains(form.body, `name="next" value="`+c.want+`"`) {
			t.Errorf("next %q: the form does not carry %q:\n%s", c.next, c.want, form.body)
		}
		// ... and signing in with any next goes only to a safe one.
		r := e.post("/signin", url.Values{"username": {"alice"}, "password": {ibPassword}, "next": {c.next}}, ibFrom(e.nextAddr()))
		r.wantRedirect(t, "sign in, next "+c.next, c.want)
	}

	// A link to a request survives the detour through sign-in.
	e.get("/approvals/req_x").wantRedirect(t, "request page signed out", "/signin?next=%2Fapprovals%2Freq_x")
}

// GET never changes anything: the routes that change state take only
// POST, whatever the query says.
func TestInboxGetChangesNothing(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	req := e.create(e.agentA, ibTool("s1"))
	q := "?decision=approve&csrf=" + url.QueryEscape(s.csrf) + "&account=" + e.other.ID
	for _, p := range []string{
		"/approvals/" + req.ID + "/decision",
		"/approvals/" + req.ID + "/decision" + q,
		"/signout" + q,
		"/sessions/signout-all" + q,
		"/account" + q,
	} {
		r := e.get(p, e.as(s.id)).want(t, "GET "+p, http.StatusMethodNotAllowed)
		if allow := r.header.Get("Allow"); allow != "POST" {
			t.Errorf("GET %s: Allow %q, want POST", p, allow)
		}
	}
	e.get("/approvals/"+req.ID+q, e.as(s.id)).want(t, "request page with a query", http.StatusOK)
	e.wantStatus("GETs", req.ID, countersign.StatusPending)
	if !e.signedIn(s.id) {
		t.Error("a GET ended the session")
	}
}

// Every page, whatever its status, carries the security headers.
func TestInboxSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	req := e.create(e.agentA, ibTool("s1"))
	pages := map[string]ibResp{
		"GET /":                     e.get("/", e.as(s.id)),
		"GET /signin":               e.get("/signin"),
		"GET /approvals signed out": e.get("/approvals"),
		"GET /approvals":            e.get("/approvals", e.as(s.id)),
		"GET /approvals/{id}":       e.get("/approvals/"+req.ID, e.as(s.id)),
		"GET unknown request":       e.get("/approvals/req_unknown", e.as(s.id)),
		"GET /sessions":             e.get("/sessions", e.as(s.id)),
		"POST /signin wrong":        e.post("/signin", url.Values{"username": {"alice"}, "password": {"wrong"}}, ibFrom(e.nextAddr())),
		"POST forged token":         e.decide(s, req.ID, url.Values{"decision": {"approve"}, "csrf": {"forged"}}),
		"POST foreign origin":       e.decide(s, req.ID, url.Values{"decision": {"approve"}}, ibHeader("Origin", "https://evil.example")),
		"GET wrong host":            e.get("/approvals", e.as(s.id), ibHost("evil.example")),
		"POST respond without text": e.decide(s, req.ID, url.Values{"decision": {"respond"}}),
		"POST decision":             e.decide(s, req.ID, url.Values{"decision": {"approve"}}),
		"POST decided again":        e.decide(s, req.ID, url.Values{"decision": {"deny"}}),
	}
	for what, r := range pages {
		ibWantPageHeaders(t, what, r.header)
	}
	for _, p := range []string{"/static/app.css", "/static/app.js", "/static/webauthn.js"} {
		r := e.get(p).want(t, p, http.StatusOK)
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Content-Security-Policy") != "default-src 'none'" {
			t.Errorf("%s: headers %v", p, r.header)
		}
	}
}

func ibWantPageHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "script-src 'self'", "form-action 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %s", what, csp, want)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*"} {
		if strings.Contains(csp, bad) {
			t.Errorf("%s: CSP %q allows %s", what, csp, bad)
		}
	}
	// Referrer-Policy is same-origin rather than no-referrer: under
	// no-referrer browsers send "Origin: null" with the inbox's own form
	// POSTs, which the Origin check must refuse (internal/e2e shows it in
	// Chromium). same-origin sends no referrer to any other site either.
	for k, v := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"} {
		if got := h.Get(k); got != v {
			t.Errorf("%s: %s %q, want %q", what, k, got, v)
		}
	}
}

// Another account's request is as unknown as one that never existed: the
// same status and the same page, on view and on decision.
func TestInboxOtherAccountNotFound(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	mine, theirs := e.create(e.agentA, ibTool("s1")), e.create(e.agX, ibTool("s1"))
	unknown := countersign.NewID("req_")

	view := func(id string) ibResp {
		return e.get("/approvals/"+id, e.as(s.id)).want(t, "view "+id, http.StatusNotFound)
	}
	same := func(what string, a, b ibResp) {
		t.Helper()
		if a.body != b.body || a.header.Get("Content-Type") != b.header.Get("Content-Type") {
			t.Errorf("%s differs from an unknown request:\n%s\n---\n%s", what, a.body, b.body)
		}
	}
	gone := view(unknown)
	same("another account's request", view(theirs.ID), gone)
	same("another account's reference", view(theirs.Reference), gone)
	same("an unknown reference", view("AAA-AAA"), gone)

	decide := func(id string) ibResp {
		return e.decide(s, id, url.Values{"decision": {"approve"}}).want(t, "decide "+id, http.StatusNotFound)
	}
	same("deciding another account's request", decide(theirs.ID), decide(unknown))
	e.wantStatus("alice deciding bob's request", theirs.ID, countersign.StatusPending)

	inbox := e.get("/approvals", e.as(s.id)).want(t, "inbox", http.StatusOK)
	if !strings.Contains(inbox.body, mine.Reference) || strings.Contains(inbox.body, theirs.Reference) || strings.Contains(inbox.body, theirs.ID) {
		t.Errorf("alice's inbox should list %s and not %s:\n%s", mine.Reference, theirs.Reference, inbox.body)
	}
	// bob, of the other account, sees it.
	bob := e.signIn("bob")
	e.get("/approvals/"+theirs.ID, e.as(bob.id)).want(t, "bob views his request", http.StatusOK)
}

// ibEvil is what an agent could send to fool or attack the human: markup,
// quotes that try to leave an attribute, and ANSI escapes that recolour or
// hide text in a terminal.
const ibEvil = "<script>alert(1)</script> \"double\" 'single' \"><img src=x onerror=alert(1)> \x1b[31mred\x1b[0m"

// ibLayoutScript is the one script tag a page may hold, and
// ibPasskeyScript the passkeys' one.
const (
	ibLayoutScript  = `<script src="/static/app.js" defer></script>`
	ibPasskeyScript = `<script src="/static/webauthn.js" defer></script>`
)

// ibWantEscaped checks that a page shows ibEvil as text: no markup of it,
// no raw ESC byte, the ESC written as \x1b.
func ibWantEscaped(t *testing.T, what, body string) {
	t.Helper()
	if strings.Count(body, ibLayoutScript) != 1 {
		t.Errorf("%s: the layout's script tag is missing", what)
	}
	rest := strings.ToLower(strings.Replace(strings.Replace(body, ibLayoutScript, "", 1), ibPasskeyScript, "", 1))
	for _, bad := range []string{"<script", "<img", "onerror=alert(1)>", "\x1b"} {
		if strings.Contains(rest, bad) {
			t.Errorf("%s: the page holds raw %q:\n%s", what, bad, body)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&#34;double&#34;", "&#39;single&#39;", "&lt;img src=x onerror=alert(1)&gt;", `\x1b[31mred\x1b[0m`} {
		if !strings.Contains(body, want) {
			t.Errorf("%s: the page does not show %q:\n%s", what, want, body)
		}
	}
}

// Whatever an agent sends is shown escaped, on every page that shows it.
func TestInboxEscaping(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	args, err := json.Marshal(map[string]string{"command": ibEvil})
	if err != nil {
		t.Fatal(err)
	}
	in := client.CreateInput{
		Kind: "tool", Action: "Bash " + ibEvil, Arguments: args,
		Preview:     "echo " + ibEvil + "\nsecond line " + ibEvil,
		RiskReasons: []string{"reason " + ibEvil},
		Context:     client.Context{User: ibEvil, Host: ibEvil, Cwd: "/tmp/" + ibEvil, SessionID: "sess " + ibEvil},
	}
	// The escape sequence is refused now (TestInboxShowsHiddenCharacters);
	// requests stored before are shown, escaped like the rest.
	_, _, err = e.agentA.Create(e.ctx, in)
	wantRefused(t, "asking with an escape sequence", err)
	old := func(in client.CreateInput) *countersign.Request {
		return storeOld(t, e.store, e.keyA, e.world.Clock.Now(), countersign.CreateInput{Kind: countersign.Kind(in.Kind), Action: in.Action, Arguments: in.Arguments,
			Preview: in.Preview, RiskReasons: in.RiskReasons,
			Context: countersign.RequestContext{User: in.Context.User, Host: in.Context.Host, Cwd: in.Context.Cwd, SessionID: in.Context.SessionID}})
	}
	denied := old(in)
	in.Arguments = []byte(`{"n":2}`)
	answered := old(in)

	ibWantEscaped(t, "inbox", e.get("/approvals", e.as(s.id)).want(t, "inbox", http.StatusOK).body)
	page := e.get("/approvals/"+denied.ID, e.as(s.id)).want(t, "request page", http.StatusOK).body
	ibWantEscaped(t, "request page", page)
	// The arguments as sent read like the command, not like \u003c.
	const shownArgs = `<details><summary>as sent</summary><pre>{
  &#34;command&#34;: &#34;&lt;script&gt;alert(1)&lt;/script&gt; \&#34;double\&#34; &#39;single&#39; \&#34;&gt;&lt;img src=x onerror=alert(1)&gt; \u001b[31mred\u001b[0m&#34;
}</pre></details>`
	if !strings.Contains(page, shownArgs) {
		t.Errorf("the arguments are not shown as sent:\n%s", page)
	}

	// What the human wrote is shown escaped too.
	e.decide(s, denied.ID, url.Values{"decision": {"deny"}, "text": {ibEvil}}).wantRedirect(t, "deny", "/approvals/"+denied.ID)
	e.decide(s, answered.ID, url.Values{"decision": {"respond"}, "text": {ibEvil}}).wantRedirect(t, "respond", "/approvals/"+answered.ID)
	for _, id := range []string{denied.ID, answered.ID} {
		page := e.get("/approvals/"+id, e.as(s.id)).want(t, "decided request page", http.StatusOK).body
		ibWantEscaped(t, "decided request page", page)
		if strings.Count(page, "&lt;img src=x") < 3 {
			t.Errorf("the decided page does not show the decision's text:\n%s", page)
		}
	}
	ibWantEscaped(t, "inbox history", e.get("/approvals", e.as(s.id)).want(t, "inbox", http.StatusOK).body)
}

// The decision form: approve, deny with a reason, answer, stop, approve
// for a while; bad input and late decisions get a page that says why.
func TestInboxDecisionForm(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	decide := func(id string, form url.Values) {
		t.Helper()
		e.decide(s, id, form).wantRedirect(t, "decide "+form.Get("decision"), "/approvals/"+id)
	}
	decided := func(id string, status countersign.Status, text string) {
		t.Helper()
		r := e.request(id)
		if r.Status != status || r.DecidedBy != "alice" || r.Reason != text {
			t.Errorf("request is %s by %q with %q, want %s by alice with %q", r.Status, r.DecidedBy, r.Reason, status, text)
		}
		page := e.get("/approvals/"+id, e.as(s.id)).want(t, "decided page", http.StatusOK).body
		if strings.Contains(page, `action="/approvals/`+id+`/decision"`) {
			t.Errorf("a decided request still offers the decision forms:\n%s", page)
		}
		if !strings.Contains(page, string(status)+" by alice") {
			t.Errorf("the page does not say %s by alice:\n%s", status, page)
		}
	}

	t.Run("approve", func(t *testing.T) {
		req := e.create(e.agentA, ibTool("s1"))
		page := e.get("/approvals/"+req.ID, e.as(s.id)).want(t, "request page", http.StatusOK).body
		if !strings.Contains(page, "Approve "+req.Reference+" once") {
			t.Errorf("no approve button for %s:\n%s", req.Reference, page)
		}
		decide(req.ID, url.Values{"decision": {"approve"}})
		decided(req.ID, countersign.StatusApproved, "")
	})
	t.Run("deny with a reason", func(t *testing.T) {
		req := e.create(e.agentA, ibTool("s1"))
		decide(req.ID, url.Values{"decision": {"deny"}, "text": {"not on a Friday"}})
		decided(req.ID, countersign.StatusDenied, "not on a Friday")
	})
	t.Run("respond", func(t *testing.T) {
		req := e.create(e.agentA, ibTool("s1"))
		for _, text := range []string{"", "   "} {
			r := e.decide(s, req.ID, url.Values{"decision": {"respond"}, "text": {text}}).want(t, "respond without text", http.StatusBadRequest)
			if !strings.Contains(r.body, `role="alert">text is required.`) {
				t.Errorf("the page does not say the text is missing:\n%s", r.body)
			}
			if !strings.Contains(r.body, `action="/approvals/`+req.ID+`/decision"`) {
				t.Errorf("the page does not offer the forms again:\n%s", r.body)
			}
			e.wantStatus("respond without text", req.ID, countersign.StatusPending)
		}
		decide(req.ID, url.Values{"decision": {"respond"}, "text": {"use git clean -n first"}})
		decided(req.ID, countersign.StatusResponded, "use git clean -n first")
	})
	t.Run("stop", func(t *testing.T) {
		req := e.create(e.agentA, ibTool("s1"))
		decide(req.ID, url.Values{"decision": {"stop"}})
		decided(req.ID, countersign.StatusStopped, "")
	})
	t.Run("bad input", func(t *testing.T) {
		req := e.create(e.agentA, ibTool("s1"))
		for _, c := range []struct {
			form url.Values
			says string
		}{
			{url.Values{"decision": {"maybe"}}, "decision must be one of approve, deny, respond, stop"},
			{url.Values{"decision": {"approve"}, "auto_approve_minutes": {"a while"}}, "Choose how many minutes to approve for."},
			{url.Values{"decision": {"approve"}, "auto_approve_minutes": {"61"}}, "auto_approve_minutes goes only with approve, from 1 to 60"},
			{url.Values{"decision": {"deny"}, "auto_approve_minutes": {"15"}}, "auto_approve_minutes goes only with approve, from 1 to 60"},
		} {
			what := c.form.Encode()
			r := e.decide(s, req.ID, c.form).want(t, what, http.StatusBadRequest)
			if !strings.Contains(r.body, c.says) {
				t.Errorf("%s: the page does not say %q:\n%s", what, c.says, r.body)
			}
			e.wantStatus(what, req.ID, countersign.StatusPending)
		}
		decide(req.ID, url.Values{"decision": {"deny"}})
	})
	t.Run("approve for 15 minutes", func(t *testing.T) {
		req := e.create(e.agentA, ibTool("sess-w"))
		page := e.get("/approvals/"+req.ID, e.as(s.id)).want(t, "request page", http.StatusOK).body
		if !strings.Contains(page, `<option value="15">15 minutes</option>`) {
			t.Fatalf("no 15-minute window offered:\n%s", page)
		}
		// The page says what the window lets through.
		for _, says := range []string{"shell commands (Bash) of the agent key a in the agent session sess-w that:</p>",
			"<li>run no command but rm (each line may hold only these)</li>", "<li>delete only within /src</li>",
			"<li>give no reason to ask at all</li>"} {
			if !strings.Contains(page, says) {
				t.Errorf("the request page does not say %q:\n%s", says, page)
			}
		}
		decide(req.ID, url.Values{"decision": {"approve"}, "auto_approve_minutes": {"15"}})
		decided(req.ID, countersign.StatusApproved, "")
		if until := e.request(req.ID).AutoApproveUntil; until.Before(time.Now().Add(14*time.Minute)) || until.After(time.Now().Add(15*time.Minute)) {
			t.Errorf("window until %v, want about 15 minutes from now", until)
		}
		// The same key, session and tool: approved at once.
		same := e.create(e.agentA, ibTool("sess-w"))
		if same.Status != "approved" || !same.AutoApproved || same.DecidedBy != countersign.DecidedByAutoApprove {
			t.Errorf("a request in the window is %s by %q, want approved by the window", same.Status, same.DecidedBy)
		}
		// Never wider: another key, another session, another tool.
		other := ibTool("sess-w")
		other.Action, other.Scope = "Write", nil
		outside := ibTool("sess-w")
		outside.Scope.Paths = []string{"/home/ada/.ssh"}
		push := ibTool("sess-w")
		push.Arguments, push.Scope.Commands = []byte(`{"command":"git push --force"}`), []string{"git push"}
		for what, r := range map[string]*client.Request{
			"another key":      e.create(e.agentA2, ibTool("sess-w")),
			"another session":  e.create(e.agentA, ibTool("sess-other")),
			"another tool":     e.create(e.agentA, other),
			"a delete outside": e.create(e.agentA, outside),
			"another command":  e.create(e.agentA, push),
		} {
			if r.Status != "pending" {
				t.Errorf("%s: %s, want pending", what, r.Status)
			}
			decide(r.ID, url.Values{"decision": {"deny"}})
		}
	})
	t.Run("already decided", func(t *testing.T) {
		req := e.create(e.agentA, ibTool("s1"))
		decide(req.ID, url.Values{"decision": {"approve"}})
		for _, d := range []string{"deny", "approve"} {
			r := e.decide(s, req.ID, url.Values{"decision": {d}, "text": {"too late"}}).want(t, d+" again", http.StatusConflict)
			if !strings.Contains(r.body, "request is already approved.") {
				t.Errorf("the page does not say it was decided:\n%s", r.body)
			}
		}
		decided(req.ID, countersign.StatusApproved, "")
	})
}

// The event stream needs a session, and rings for the session's account
// only.
func TestInboxEvents(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	e.get("/approvals/events").wantRedirect(t, "events without a session", "/signin?next=%2Fapprovals%2Fevents")
	e.get("/approvals/events", e.as("no-such-session")).wantRedirect(t, "events with a stale cookie", "/signin?next=%2Fapprovals%2Fevents")
	s := e.signIn("alice")

	ctx, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+"/approvals/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = e.public.Host
	e.as(s.id)(req)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// next returns the next line that is not blank or a comment, or ""
	// when none came within d.
	next := func(d time.Duration) string {
		timer := time.NewTimer(d)
		defer timer.Stop()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatal("the event stream ended")
				}
				if l != "" && !strings.HasPrefix(l, ":") {
					return l
				}
			case <-timer.C:
				return ""
			}
		}
	}
	if l := next(5 * time.Second); l != "retry: 3000" {
		t.Fatalf("first line %q, want retry: 3000", l)
	}
	// The stream listens once it is subscribed to the hub.
	testutil.Eventually(t, func() bool { return e.hub.Waiters() >= 1 }, "the event stream subscribing")

	e.create(e.agX, ibTool("s1"))
	// A wait for something not to happen: no signal tells that the ring
	// went elsewhere, so half a second without a line is the check.
	if l := next(500 * time.Millisecond); l != "" {
		t.Fatalf("another account's request rang alice's stream: %q", l)
	}
	e.create(e.agentA, ibTool("s1"))
	if l := next(5 * time.Second); l != "event: changed" {
		t.Fatalf("after a request of acme: %q, want event: changed", l)
	}
	if l := next(time.Second); l != "data: {}" {
		t.Fatalf("event data %q, want {}: nothing about the request travels", l)
	}
}

// An approver of two accounts sees one at a time and switches between
// them; nobody switches into an account they do not belong to.
func TestInboxAccountSwitch(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	acme, other := e.create(e.agentA, ibTool("s1")), e.create(e.agX, ibTool("s1"))
	carol := e.signIn("carol")
	shows := func(s ibSession, want, not *client.Request) {
		t.Helper()
		body := e.get("/approvals", e.as(s.id)).want(t, "inbox", http.StatusOK).body
		if !strings.Contains(body, want.Reference) || strings.Contains(body, not.Reference) {
			t.Errorf("the inbox should list %s and not %s:\n%s", want.Reference, not.Reference, body)
		}
	}
	shows(carol, acme, other)
	e.post("/account", url.Values{"csrf": {carol.csrf}, "account": {e.other.ID}}, e.as(carol.id)).wantRedirect(t, "switch", "/approvals")
	shows(carol, other, acme)
	e.get("/approvals/"+acme.ID, e.as(carol.id)).want(t, "the account left behind", http.StatusNotFound)
	e.decide(carol, other.ID, url.Values{"decision": {"approve"}}).wantRedirect(t, "decide in the new account", "/approvals/"+other.ID)
	e.wantStatus("decide in the new account", other.ID, countersign.StatusApproved)

	alice := e.signIn("alice")
	r := e.post("/account", url.Values{"csrf": {alice.csrf}, "account": {e.other.ID}}, e.as(alice.id)).want(t, "switch into a foreign account", http.StatusForbidden)
	if !strings.Contains(r.body, "You are not a member of that account.") {
		t.Errorf("the page does not say why:\n%s", r.body)
	}
	acme2 := e.create(e.agentA, ibTool("s1"))
	shows(alice, acme2, other)
}

// TestPageShowsTheTierStepUpReads: an MCP call's page names the tier that
// step-up decides on, once, whether the agent's side wrote it as a reason
// or not; a call of unknown tier says so.
func TestPageShowsTheTierStepUpReads(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	alice := e.signIn("alice")
	for _, c := range []struct {
		tier    string
		reasons []string
		want    string
	}{
		{"commit", nil, "tier: commit"},
		{"external", []string{"tier: external"}, "tier: external"},
		{"", nil, "tier: unknown"},
	} {
		in := client.CreateInput{Kind: "mcp", Action: "files_write_" + c.tier, Tier: c.tier, RiskReasons: c.reasons,
			Arguments: []byte(`{"path":"/srv/notes.txt"}`)}
		r := e.create(e.agentA, in)
		page := e.get("/approvals/"+r.ID, e.as(alice.id))
		if n := strings.Count(page.body, c.want); n != 1 {
			t.Errorf("tier %q, reasons %q: the page names %q %d times, want once", c.tier, c.reasons, c.want, n)
		}
	}
}

// TestPagesNameTheCodingAgent: the inbox and the request page name the
// coding agent whose hook asked, and a request of no agent names none.
func TestPagesNameTheCodingAgent(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	alice := e.signIn("alice")
	codex := e.create(e.agentA, client.CreateInput{Kind: "tool", Action: "Bash", Arguments: []byte(`{"command":"make deploy"}`),
		Context: client.Context{SessionID: "s1", Agent: "codex"}})
	if codex.Context.SessionID != "codex:s1" || codex.Context.Agent != "codex" {
		t.Errorf("the created request's context is %+v, want session codex:s1 of agent codex", codex.Context)
	}
	plain := e.create(e.agentA, client.CreateInput{Kind: "tool", Action: "Bash", Arguments: []byte(`{"command":"make test"}`)})
	if n := strings.Count(e.get("/approvals/"+codex.ID, e.as(alice.id)).body, "Codex CLI"); n != 1 {
		t.Errorf("codex's request page names Codex CLI %d times, want once", n)
	}
	if page := e.get("/approvals/"+plain.ID, e.as(alice.id)).body; strings.Contains(page, "Coding agent") {
		t.Errorf("a request of no agent names a coding agent")
	}
	if n := strings.Count(e.get("/approvals", e.as(alice.id)).body, "Codex CLI"); n != 1 {
		t.Errorf("the inbox names Codex CLI %d times, want once", n)
	}
}
