package server_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
)

// editInputs are one request of each form of the edit page.
func editInputs() map[string]client.CreateInput {
	return map[string]client.CreateInput{
		"command": {Kind: "tool", Action: "Bash", Arguments: []byte(`{"command":"rm -rf ./build <b>","description":"clean"}`), Preview: "rm -rf ./build"},
		"targets": {Kind: "rm", Action: "rm -r /srv/a /srv/b", Arguments: []byte(`{"targets":["/srv/a","/srv/<b>"],"affected_paths":["/srv/a","/srv/<b>"],"recursive":true}`), Preview: "rm -r /srv/a /srv/b"},
		"text":    {Kind: "generic", Action: "post", Arguments: []byte(`{"text":"hello <i>world</i>","channel":"ops"}`), Preview: "post hello"},
		"fields":  {Kind: "mcp", Action: "files.write", Arguments: []byte(`{"path":"/srv/f <b>","size":3,"force":false,"note":"one\ntwo","opts":{"mode":"0644"}}`), Preview: "write /srv/f", Tier: "write"},
		"json":    {Kind: "mcp", Action: "files.write", Arguments: []byte(`{"path":"/srv/x","size":3,"force":false}`), Preview: "MCP tool call through countersign\nTool:     files.write\nServer:   fs (its tool \"write\")\nTier:     write\nArguments (40 bytes):\n{}", Tier: "write", RiskReasons: []string{"tier: write"}},
	}
}

// TestInboxEditForm: the edit page offers, per kind, the command as a
// text field, the targets as ticked boxes, the text, or the arguments as
// JSON, every value escaped; the request's page links to it; a viewer,
// another account and a decided request get no form.
func TestInboxEditForm(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	alice := e.signIn("alice")
	ins := editInputs()
	want := map[string][]string{
		"command": {`name="command"`, "\nrm -rf ./build &lt;b&gt;</textarea>"},
		"targets": {`type="checkbox" name="keep" value="0" checked`, `type="checkbox" name="keep" value="1" checked`, "/srv/&lt;b&gt;"},
		"text":    {`name="text"`, "\nhello &lt;i&gt;world&lt;/i&gt;</textarea>"},
		"json":    {`name="arguments"`, "The arguments of the call, as JSON", html.EscapeString("\"path\": \"/srv/x\""), `name="as" value="json"`},
		"fields": {`<select id="edit-f0" name="f0"><option value="true">true</option><option value="false" selected>false</option></select>`,
			`name="f1" rows="4" spellcheck="false" autocapitalize="off">` + "\none\ntwo</textarea>", `name="f2" rows="3"`, html.EscapeString(`"mode": "0644"`),
			`name="f3" type="text" value="/srv/f &lt;b&gt;"`, `name="f4" type="text" inputmode="decimal" value="3"`, "?as=json"},
	}
	// The JSON form, on asking, where fields would do.
	path := map[string]string{"json": "/edit?as=json"}
	ids := map[string]string{}
	for mode, in := range ins {
		r := e.create(e.agentA, in)
		ids[mode] = r.ID
		page := e.get("/approvals/"+r.ID, e.as(alice.id)).want(t, mode+": the request's page", http.StatusOK)
		if !strings.Contains(page.body, `href="/approvals/`+r.ID+`/edit"`) {
			t.Errorf("%s: the request's page does not link to its edit:\n%s", mode, page.body)
		}
		edit := e.get("/approvals/"+r.ID+cmp.Or(path[mode], "/edit"), e.as(alice.id)).want(t, mode+": the edit page", http.StatusOK)
		for _, w := range want[mode] {
			if !strings.Contains(edit.body, w) {
				t.Errorf("%s: the edit page lacks %q:\n%s", mode, w, edit.body)
			}
		}
		if strings.Contains(edit.body, "maxlength") {
			// A browser refuses to send a field it was given longer than
			// its maxlength once edited; the server bounds the edit.
			t.Errorf("%s: the edit form bounds a field with maxlength:\n%s", mode, edit.body)
		}
		if strings.Contains(edit.body, "build <b>") || strings.Contains(edit.body, "/srv/<b>") || strings.Contains(edit.body, "<i>") {
			t.Errorf("%s: the edit page holds the agent's markup unescaped:\n%s", mode, edit.body)
		}
	}

	// A viewer, another account: no form.
	e.World.Approver("vic", "acme")
	if err := e.Admin.SetRole(e.Ctx, "acme", "vic", countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	vic := e.signIn("vic")
	got := e.get("/approvals/"+ids["command"]+"/edit", e.as(vic.id)).want(t, "a viewer's edit page", http.StatusForbidden)
	if !strings.Contains(got.body, "viewer") {
		t.Errorf("a viewer's edit page does not say why:\n%s", got.body)
	}
	if page := e.get("/approvals/"+ids["command"], e.as(vic.id)); strings.Contains(page.body, "/edit\"") {
		t.Errorf("a viewer's request page links to an edit:\n%s", page.body)
	}
	bob := e.signIn("bob")
	e.get("/approvals/"+ids["command"]+"/edit", e.as(bob.id)).want(t, "another account's edit page", http.StatusNotFound)
	e.post("/approvals/"+ids["command"]+"/edit", url.Values{"csrf": {bob.csrf}, "command": {"ls"}}, e.as(bob.id)).
		want(t, "another account's edit", http.StatusNotFound)

	// A decided request's edit page leads to its page.
	e.decide(alice, ids["text"], url.Values{"decision": {"deny"}}).wantRedirect(t, "deny", "/approvals/"+ids["text"])
	e.get("/approvals/"+ids["text"]+"/edit", e.as(alice.id)).wantRedirect(t, "a decided request's edit page", "/approvals/"+ids["text"])
}

// TestInboxEditBadInputs: every bad edit, refused by the form's reading
// or by the service, gets a clear error on the edit page, keeps what the
// approver typed, and changes nothing.
func TestInboxEditBadInputs(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	alice := e.signIn("alice")
	ins := editInputs()
	reqs := map[string]*client.Request{}
	for mode, in := range ins {
		reqs[mode] = e.create(e.agentA, in)
	}
	before := map[string]*countersign.Request{}
	for mode, r := range reqs {
		before[mode] = e.request(r.ID)
	}
	cases := []struct {
		name, mode string
		form       url.Values
		says       string
	}{
		{"an empty command", "command", url.Values{"command": {" \r\n "}}, "The command is empty"},
		{"no command", "command", url.Values{}, "The command is empty"},
		{"a command that is no Bash", "command", url.Values{"command": {`echo "unclosed`}}, "the edited command does not parse as Bash"},
		{"JSON that is no object", "json", url.Values{"as": {"json"}, "arguments": {`["/srv/x"]`}}, "edit.arguments must be a JSON object"},
		{"no target kept", "targets", url.Values{}, "Keep at least one target ticked"},
		{"a target of another place", "targets", url.Values{"keep": {"2"}}, "a target the delete does not have"},
		{"a negative target", "targets", url.Values{"keep": {"0", "-1"}}, "a target the delete does not have"},
		{"a target by its path", "targets", url.Values{"keep": {"/etc"}}, "a target the delete does not have"},
		{"an empty text", "text", url.Values{"text": {""}}, "The text is empty"},
		{"JSON cut short", "json", url.Values{"as": {"json"}, "arguments": {`{"path": "/srv/<y>"`}}, "The arguments are not JSON"},
		{"two JSON values", "json", url.Values{"as": {"json"}, "arguments": {`{} {}`}}, "there is more after the first value"},
		{"too large", "json", url.Values{"as": {"json"}, "arguments": {`{"a":"` + strings.Repeat("x", 13<<10) + `"}`}}, "at most 12288 can be approved here"},
		{"a number of letters", "fields", fieldsForm("f4", "three"), "size must be a number"},
		{"a number of two", "fields", fieldsForm("f4", "3 4"), "size must be a number"},
		{"a number as text", "fields", fieldsForm("f4", `"3"`), "size must be a number"},
		{"a bool of neither", "fields", fieldsForm("f0", "maybe"), "force must be true or false"},
		{"a bool left out", "fields", fieldsForm("f0", ""), "force must be true or false"},
		{"JSON of a field", "fields", fieldsForm("f2", `{"mode":`), "opts: not JSON"},
	}
	for _, c := range cases {
		form := url.Values{"csrf": {alice.csrf}}
		for k, v := range c.form {
			form[k] = v
		}
		id := reqs[c.mode].ID
		got := e.post("/approvals/"+id+"/edit", form, e.as(alice.id)).want(t, c.name, http.StatusBadRequest)
		if !strings.Contains(got.body, `class="error"`) || !strings.Contains(html.UnescapeString(got.body), c.says) {
			t.Errorf("%s: the page does not say %q:\n%s", c.name, c.says, got.body)
		}
		if strings.Contains(got.body, "Approve the edit") {
			t.Errorf("%s: a refused edit is offered for approval:\n%s", c.name, got.body)
		}
		if c.name == "JSON cut short" && !strings.Contains(got.body, `&#34;/srv/&lt;y&gt;&#34;`) {
			t.Errorf("%s: the form does not keep what was typed, escaped:\n%s", c.name, got.body)
		}
	}

	// The approve form's edit field, when it is not what the server
	// wrote: refused, and nothing changes.
	for _, c := range []struct {
		name string
		form url.Values
		code int
	}{
		{"edit not JSON", url.Values{"decision": {"approve"}, "edit": {`{"command":`}}, http.StatusBadRequest},
		{"edit with deny", url.Values{"decision": {"deny"}, "edit": {`{"command":"ls"}`}}, http.StatusBadRequest},
		{"edit with a window", url.Values{"decision": {"approve"}, "auto_approve_minutes": {"5"}, "edit": {`{"command":"ls"}`}}, http.StatusBadRequest},
		{"edit without the token", url.Values{"decision": {"approve"}, "edit": {`{"command":"ls"}`}, "csrf": {"x"}}, http.StatusForbidden},
	} {
		got := e.decide(alice, reqs["command"].ID, c.form)
		if got.status != c.code {
			t.Errorf("%s: status %d, want %d:\n%s", c.name, got.status, c.code, got.body)
		}
	}
	// The CSRF token guards the edit form too.
	e.post("/approvals/"+reqs["command"].ID+"/edit", url.Values{"command": {"ls"}}, e.as(alice.id)).want(t, "an edit without the token", http.StatusForbidden)

	for mode, r := range reqs {
		after := e.request(r.ID)
		if after.Status != countersign.StatusPending || after.ArgsHash != before[mode].ArgsHash || after.Original != nil {
			t.Errorf("%s: after the bad edits the request is %s with hash %s (was %s), original %v", mode, after.Status, after.ArgsHash, before[mode].ArgsHash, after.Original)
		}
	}
}

var editField = regexp.MustCompile(`name="edit" value="([^"]*)"`)

// TestInboxEditApprove: per form, the edit is shown before it is
// approved (nothing changes yet), the approve form carries it, and the
// approval keeps the original: the request's page says who edited it and
// shows both versions, and the Decided row is marked.
func TestInboxEditApprove(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	alice := e.signIn("alice")
	ins := editInputs()
	cases := []struct {
		mode  string
		form  url.Values
		want  string // in the edited arguments
		shown string // on the preview
	}{
		{"command", url.Values{"command": {"ls -la ./build\r\necho done"}}, `"command":"ls -la ./build\necho done"`, "echo done"},
		{"targets", url.Values{"keep": {"1"}}, `"targets":["/srv/<b>"]`, "Delete only 1 target of the 2 the command names"},
		{"text", url.Values{"text": {"hello team"}}, `"text":"hello team"`, "hello team"},
		{"json", url.Values{"as": {"json"}, "arguments": {"{\"path\": \"/srv/y\", \"size\": 4, \"force\": false, \"mode\": \"0600\"}"}}, `"mode":"0600","path":"/srv/y"`, "on the MCP server <b>fs</b>"},
		{"fields", fieldsForm("f3", "/srv/g"), `{"force":true,"note":"one\ntwo","opts":{"mode":"0600"},"path":"/srv/g","size":4.5}`, "/srv/g"},
	}
	for _, c := range cases {
		r := e.create(e.agentA, ins[c.mode])
		before := e.request(r.ID)
		form := url.Values{"csrf": {alice.csrf}}
		for k, v := range c.form {
			form[k] = v
		}
		page := e.post("/approvals/"+r.ID+"/edit", form, e.as(alice.id)).want(t, c.mode+": show the edit", http.StatusOK)
		m := editField.FindStringSubmatch(page.body)
		if m == nil || !strings.Contains(page.body, "Approve the edit") || !strings.Contains(page.body, c.shown) {
			t.Fatalf("%s: the preview does not offer the edit or show %q:\n%s", c.mode, c.shown, page.body)
		}
		if c.form.Has("as") && !strings.Contains(page.body, `name="as" value="json"`) {
			t.Errorf("%s: the form to change the edit is not the JSON form again:\n%s", c.mode, page.body)
		}
		if got := e.request(r.ID); got.Status != countersign.StatusPending || got.ArgsHash != before.ArgsHash {
			t.Fatalf("%s: showing the edit changed the request: %s %s", c.mode, got.Status, got.ArgsHash)
		}
		edit := html.UnescapeString(m[1])
		if !strings.Contains(plainJSON(t, edit), c.want) {
			t.Errorf("%s: the approve form carries %s, want %s in it", c.mode, edit, c.want)
		}
		e.decide(alice, r.ID, url.Values{"decision": {"approve"}, "edit": {edit}}).wantRedirect(t, c.mode+": approve the edit", "/approvals/"+r.ID)
		after := e.request(r.ID)
		if after.Status != countersign.StatusApproved || after.Original == nil || after.Original.ArgsHash != before.ArgsHash ||
			!strings.Contains(string(after.Arguments), c.want) {
			t.Fatalf("%s: after the edit the request is %s with %s (original %+v)", c.mode, after.Status, after.Arguments, after.Original)
		}
		shown := e.get("/approvals/"+r.ID, e.as(alice.id)).want(t, c.mode+": the edited request's page", http.StatusOK)
		if !strings.Contains(shown.body, "Edited by alice") || !strings.Contains(shown.body, "As the agent asked") || !strings.Contains(shown.body, c.shown) {
			t.Errorf("%s: the edited request's page does not show who edited it and both versions:\n%s", c.mode, shown.body)
		}
	}
	inbox := e.get("/approvals", e.as(alice.id)).want(t, "the inbox", http.StatusOK)
	if n := strings.Count(inbox.body, `class="status status-edited"`); n != len(cases) {
		t.Errorf("the Decided rows mark %d requests edited, want %d:\n%s", n, len(cases), inbox.body)
	}
}

// plainJSON is JSON written again without escaping <, > and &.
func plainJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return strings.TrimSpace(b.String())
}

// TestInboxEditQuorum: on a request that needs two approvals, an edit
// approved by one approver is their vote for the edited action: the
// request stays pending with the edit, its page says who edited it and
// shows both versions, offers no second edit, and the second approver's
// vote approves the edit.
func TestInboxEditQuorum(t *testing.T) {
	t.Parallel()
	e := ibSetupWith(t, approval.Config{Teams: &approval.Teams{Rules: []approval.TeamRule{{Kind: countersign.KindTool, Tool: "Bash",
		Approvers: []string{"alice", "carol"}, Quorum: 2}}}})
	alice, carol := e.signIn("alice"), e.signIn("carol")
	r := e.create(e.agentA, editInputs()["command"])
	page := e.post("/approvals/"+r.ID+"/edit", url.Values{"csrf": {alice.csrf}, "command": {"ls ./build"}}, e.as(alice.id)).want(t, "show the edit", http.StatusOK)
	if !strings.Contains(page.body, "one of the 2 the request needs") {
		t.Errorf("the preview of the edit does not say the approval is a vote:\n%s", page.body)
	}
	m := editField.FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("no approve form:\n%s", page.body)
	}
	e.decide(alice, r.ID, url.Values{"decision": {"approve"}, "edit": {html.UnescapeString(m[1])}}).wantRedirect(t, "alice approves the edit", "/approvals/"+r.ID)
	if got := e.request(r.ID); got.Status != countersign.StatusPending || got.Original == nil || !strings.Contains(string(got.Arguments), "ls ./build") {
		t.Fatalf("after alice's edit the request is %s with %s", got.Status, got.Arguments)
	}
	shown := e.get("/approvals/"+r.ID, e.as(carol.id)).want(t, "carol's page", http.StatusOK)
	for _, want := range []string{"Edited by alice before approving: the approvals are for this edit", "1 of 2 approvals: alice", "As the agent asked", "ls ./build"} {
		if !strings.Contains(shown.body, want) {
			t.Errorf("carol's page lacks %q:\n%s", want, shown.body)
		}
	}
	if strings.Contains(shown.body, `/edit"`) {
		t.Errorf("an edited request offers another edit:\n%s", shown.body)
	}
	if inbox := e.get("/approvals", e.as(carol.id)); !strings.Contains(inbox.body, `<span class="status status-edited">edited by alice</span>`) {
		t.Errorf("the inbox card of the edited request does not say alice edited it:\n%s", inbox.body)
	}
	if again := e.post("/approvals/"+r.ID+"/edit", url.Values{"csrf": {carol.csrf}, "command": {"ls"}}, e.as(carol.id)).want(t, "a second edit", http.StatusBadRequest); !strings.Contains(again.body, "edited already") {
		t.Errorf("a second edit does not say why it is refused:\n%s", again.body)
	}
	// carol approves from the page that showed her the edit: its form
	// names the edited action.
	e.decide(carol, r.ID, formOf(t, shown.body, "approve")).wantRedirect(t, "carol approves", "/approvals/"+r.ID)
	got := e.request(r.ID)
	if got.Status != countersign.StatusApproved || !strings.Contains(string(got.Arguments), "ls ./build") {
		t.Fatalf("after carol's vote the request is %s with %s", got.Status, got.Arguments)
	}
	if shown := e.get("/approvals/"+r.ID, e.as(carol.id)); !strings.Contains(shown.body, "Edited by alice before approving: this edit is what was approved") {
		t.Errorf("the approved page does not say alice edited it:\n%s", shown.body)
	}
}

// fieldsForm is the fields form of the "fields" request, filled, with
// one field set to v ("" leaves it out).
func fieldsForm(field, v string) url.Values {
	f := url.Values{"f0": {"true"}, "f1": {"one\r\ntwo"}, "f2": {`{"mode": "0600"}`}, "f3": {"/srv/f"}, "f4": {"4.5"}}
	if v == "" {
		f.Del(field)
	} else {
		f.Set(field, v)
	}
	return f
}
