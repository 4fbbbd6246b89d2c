package approval_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

func approveEdit(args string) countersign.DecisionInput {
	return countersign.DecisionInput{Decision: countersign.DecisionApprove, Edit: &countersign.Edit{Arguments: json.RawMessage(args)}}
}

// refusedEdit fails the test unless the decision d on r is refused with
// code and leaves r and the audit log as they were.
func (e *env) refusedEdit(what string, who countersign.ApproverPrincipal, r *countersign.Request, d countersign.DecisionInput, code string) error {
	e.t.Helper()
	before := e.auditCount()
	_, err := e.svc.Decide(e.ctx, who, r.ID, d)
	wantCode(e.t, what, err, code)
	if e.auditCount() != before {
		e.t.Errorf("%s: a refused edit wrote to the audit log", what)
	}
	got := e.stored(r.ID)
	if got.Status != countersign.StatusPending || got.Original != nil || got.ArgsHash != r.ArgsHash {
		e.t.Errorf("%s: the request changed: %s %+v", what, got.Status, got.Original)
	}
	return err
}

// TestEditBash: an approver edits a Bash command before approving it; the
// approval binds the edited command, keeps the original, and the agent
// consumes the edited arguments; the audit holds both versions.
func TestEditBash(t *testing.T) {
	e := newEnv(t, approval.Config{})
	r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: "Bash",
		Arguments: json.RawMessage(`{"command":"rm -rf /work/proj/build /work/proj/src","description":"clean"}`), Preview: "rm -rf build src",
		RiskReasons: []string{"recursive delete"}, Context: countersign.RequestContext{Cwd: "/work/proj", SessionID: "s1"}})

	edit := `{"command":"rm -rf /work/proj/build","description":"clean"}`
	preview, err := e.svc.Edited(e.ctx, e.alice, r.ID, countersign.Edit{Arguments: json.RawMessage(edit)})
	if err != nil {
		t.Fatalf("Edited: %v", err)
	}
	if e.stored(r.ID).ArgsHash != r.ArgsHash {
		t.Fatal("Edited saved the edit")
	}
	got, err := e.svc.Decide(e.ctx, e.alice, r.ID, approveEdit(edit))
	if err != nil {
		t.Fatalf("approve with an edit: %v", err)
	}
	if got.Status != countersign.StatusApproved || got.Original == nil || got.Original.ArgsHash != r.ArgsHash ||
		got.Original.Preview != "rm -rf build src" || string(got.Original.Arguments) != string(r.Arguments) {
		t.Fatalf("approved: %s, original %+v", got.Status, got.Original)
	}
	if string(got.Arguments) != edit || got.ArgsHash != sha(edit) || got.BindingHash() != preview.BindingHash() || got.BindingHash() == r.BindingHash() {
		t.Fatalf("approved arguments %s, binding %s; the preview's %s", got.Arguments, got.BindingHash(), preview.BindingHash())
	}
	if !slices.Contains(got.RiskReasons, "recursive delete") || !slices.Contains(got.RiskReasons, "edited command: rm deletes files") {
		t.Errorf("risk reasons %q: want the original's and the server's", got.RiskReasons)
	}
	if got.Protected {
		t.Errorf("a delete inside the project is not protected")
	}
	if !strings.Contains(got.Preview, "$ rm -rf /work/proj/build\n") {
		t.Errorf("edited preview:\n%s", got.Preview)
	}
	if got.Scope == nil || !slices.Equal(got.Scope.Paths, []string{"/work/proj/build"}) || !slices.Equal(got.Scope.Commands, []string{"rm"}) {
		t.Errorf("scope %+v, want the edited command's", got.Scope)
	}
	// An agent that does not run edits gets no edited approval: it would
	// run the original.
	_, err = e.svc.Consume(e.ctx, e.keyA, r.ID)
	wantCode(t, "consume by an agent that does not run edits", err, countersign.ECONFLICT)
	if err == nil || !strings.Contains(err.Error(), "edited") {
		t.Fatalf("refusal: %v", err)
	}
	e.wantStatus(r.ID, countersign.StatusApproved)
	c, err := e.svc.Consume(approval.AcceptEdits(e.ctx), e.keyA, r.ID)
	if err != nil || string(c.Arguments) != edit || c.Original == nil {
		t.Fatalf("consume: %+v, %v", c, err)
	}
	entries, _ := e.store.AuditLog(e.ctx, 0, 1000)
	var detail map[string]any
	for _, en := range entries {
		if en.RequestID == r.ID && en.Event == "approved" {
			json.Unmarshal([]byte(en.Detail), &detail)
		}
	}
	if detail["edited"] != true || detail["original_args_hash"] != r.ArgsHash || detail["args_hash"] != sha(edit) ||
		detail["arguments"] != edit || detail["original_arguments"] != string(r.Arguments) {
		t.Errorf("audit detail %v: want both versions", detail)
	}
}

// TestEditAddsRisk: an edit that adds a destroyer of a protected path to a
// Bash command gains its risk reasons and Protected, and so the step-up:
// without a passkey bound to the edited request it is refused, with one
// bound to the original it is refused, with one bound to the edited
// request it passes.
func TestEditAddsRisk(t *testing.T) {
	e := newEnv(t, approval.Config{StepUp: approval.DefaultStepUp})
	r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: "Bash",
		Arguments: json.RawMessage(`{"command":"ls"}`), Context: countersign.RequestContext{Cwd: "/work/proj"}})
	edit := `{"command":"ls && rm -rf /etc/nginx"}`
	d := approveEdit(edit)
	err := e.refusedEdit("edit without a passkey", e.alice, r, d, countersign.EFORBIDDEN)
	if !errors.Is(err, approval.ErrPasskeyNeeded) {
		t.Fatalf("edit without a passkey: %v", err)
	}
	edited, err := e.svc.Edited(e.ctx, e.alice, r.ID, *d.Edit)
	if err != nil {
		t.Fatal(err)
	}
	if !edited.Protected || !slices.Contains(edited.RiskReasons, "protected path: /etc/nginx") || !slices.Contains(edited.RiskReasons, "edited command: rm deletes files") {
		t.Fatalf("edited: protected %v, reasons %q", edited.Protected, edited.RiskReasons)
	}
	v := &countersign.Verification{Method: "webauthn", CredentialID: "Y3JlZA", PasskeyID: "pk_1", RequestID: r.ID,
		BindingHash: r.BindingHash(), Decision: countersign.DecisionApprove}
	d.Verified = v
	e.refusedEdit("edit with a passkey bound to the original", e.alice, r, d, countersign.EFORBIDDEN)
	good := *v
	good.BindingHash = edited.BindingHash()
	d.Verified = &good
	got, err := e.svc.Decide(e.ctx, e.alice, r.ID, d)
	if err != nil || !got.Protected || got.ArgsHash != sha(edit) {
		t.Fatalf("edit with a passkey bound to it: %+v, %v", got, err)
	}
}

// TestEditRm: an rm request's targets may only be narrowed.
func TestEditRm(t *testing.T) {
	e := newEnv(t, approval.Config{})
	args := `{"args":["-rf","a","b","c"],"bytes":10,"file_count":3,"targets":["/p/a","/p/b","/p/c"]}`
	r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindRm, Action: "rm", Arguments: json.RawMessage(args)})
	for _, tt := range []struct{ name, args string }{
		{"a new target", `{"args":["-rf","a","b","c"],"bytes":10,"file_count":3,"targets":["/p/a","/etc"]}`},
		{"no target", `{"args":["-rf","a","b","c"],"bytes":10,"file_count":3,"targets":[]}`},
		{"a target twice", `{"args":["-rf","a","b","c"],"bytes":10,"file_count":3,"targets":["/p/a","/p/a"]}`},
		{"another field changed", `{"args":["-rf","a","b","c","/"],"bytes":10,"file_count":3,"targets":["/p/a"]}`},
		{"a field added", `{"args":["-rf","a","b","c"],"bytes":10,"file_count":3,"targets":["/p/a"],"x":1}`},
		{"a field removed", `{"args":["-rf","a","b","c"],"bytes":10,"targets":["/p/a"]}`},
		{"not an object", `["/p/a"]`},
		{"not JSON", `{"targets":`},
	} {
		e.refusedEdit("rm edit: "+tt.name, e.alice, r, approveEdit(tt.args), countersign.EINVALID)
	}
	fewer := `{"args":["-rf","a","b","c"],"bytes":10,"file_count":3,"targets":["/p/c","/p/a"]}`
	got, err := e.svc.Decide(e.ctx, e.alice, r.ID, approveEdit(fewer))
	if err != nil {
		t.Fatalf("narrowing edit: %v", err)
	}
	if got.Original == nil || got.Scope == nil || !slices.Equal(got.Scope.Paths, []string{"/p/a", "/p/c"}) {
		t.Fatalf("narrowed: original %+v, scope %+v", got.Original, got.Scope)
	}
	if !strings.Contains(got.Preview, "only 2 of the 3 targets") || !strings.Contains(got.Preview, "Not deleted:\n  /p/b\n") {
		t.Errorf("narrowed preview:\n%s", got.Preview)
	}
}

// TestEditRefusals: an edit goes only with approve, never with an
// auto-approve window; another account's approver and a viewer cannot
// edit; an edit equal to the original is a plain approval; mcp and
// generic requests take any arguments of their kind.
func TestEditRefusals(t *testing.T) {
	e := newEnv(t, approval.Config{})
	r := e.create(e.keyA, e.toolCall("Bash", "s1"))
	edit := `{"command":"ls"}`
	for _, dec := range []countersign.Decision{countersign.DecisionDeny, countersign.DecisionRespond, countersign.DecisionStop} {
		d := approveEdit(edit)
		d.Decision, d.Text = dec, "x"
		e.refusedEdit("edit with "+string(dec), e.alice, r, d, countersign.EINVALID)
	}
	d := approveEdit(edit)
	d.AutoApproveMinutes = 5
	e.refusedEdit("edit with a window", e.alice, r, d, countersign.EINVALID)
	e.refusedEdit("another account's approver", e.bob, r, approveEdit(edit), countersign.ENOTFOUND)
	if _, err := e.svc.Edited(e.ctx, e.bob, r.ID, countersign.Edit{Arguments: json.RawMessage(edit)}); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("Edited by another account's approver: %v", err)
	}
	e.refusedEdit("a Bash edit without a command", e.alice, r, approveEdit(`{"cmd":"ls"}`), countersign.EINVALID)
	e.refusedEdit("a Bash edit that does not parse", e.alice, r, approveEdit(`{"command":"ls 'unclosed"}`), countersign.EINVALID)
	e.refusedEdit("an empty edit", e.alice, r, approveEdit(``), countersign.EINVALID)

	e.newApprover("vic", "acme")
	if err := e.world.Admin.SetRole(e.ctx, "acme", "vic", countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	vic := e.approver(e.world.Token("vic", "acme"))
	e.refusedEdit("a viewer", vic, r, approveEdit(edit), countersign.EFORBIDDEN)
	if _, err := e.svc.Edited(e.ctx, vic, r.ID, countersign.Edit{Arguments: json.RawMessage(edit)}); countersign.ErrorCode(err) != countersign.EFORBIDDEN {
		t.Errorf("Edited by a viewer: %v", err)
	}

	// The same arguments, written otherwise: a plain approval.
	same := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: "Bash", Arguments: json.RawMessage(`{"command":"ls","n":1}`)})
	got, err := e.svc.Decide(e.ctx, e.alice, same.ID, approveEdit(`{ "n": 1, "command": "ls" }`))
	if err != nil || got.Original != nil || got.ArgsHash != same.ArgsHash {
		t.Fatalf("an edit equal to the original: %+v, %v", got, err)
	}
	// A decided request cannot be edited.
	_, err = e.svc.Decide(e.ctx, e.alice, same.ID, approveEdit(`{"command":"pwd"}`))
	wantCode(t, "edit of a decided request", err, countersign.ECONFLICT)

	m := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindMCP, Action: "files.write", Tier: countersign.TierWrite,
		Arguments: json.RawMessage(`{"path":"a","text":"x"}`)})
	e.refusedEdit("mcp arguments that are no object", e.alice, m, approveEdit(`"x"`), countersign.EINVALID)
	got, err = e.svc.Decide(e.ctx, e.alice, m.ID, approveEdit(`{"path":"a","text":"y"}`))
	if err != nil || got.Tier != countersign.TierWrite || got.Original == nil || !strings.Contains(got.Preview, `"y"`) {
		t.Fatalf("mcp edit: %+v, %v", got, err)
	}
	g := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindGeneric, Action: "post", Arguments: json.RawMessage(`{"text":"hello"}`)})
	got, err = e.svc.Decide(e.ctx, e.alice, g.ID, approveEdit(`{"text":"hello, world"}`))
	if err != nil || string(got.Arguments) != `{"text":"hello, world"}` {
		t.Fatalf("generic edit: %+v, %v", got, err)
	}
}

// TestEditQuorum: on a request that needs two votes, an edit is the
// editor's vote for the edited action and leaves the request pending; the
// vote cast for the action before it counts for nothing, and its approver
// votes again on the edited one, which approves it as edited. An
// approver the rule does not route it to cannot edit it.
func TestEditQuorum(t *testing.T) {
	e, carol, dave := teamEnv(t, "")
	r := e.create(e.keyA, e.toolCall("deploy-prod", ""))
	approve := countersign.DecisionInput{Decision: countersign.DecisionApprove}
	if got, err := e.svc.Decide(e.ctx, e.alice, r.ID, approve); err != nil || got.Status != countersign.StatusPending {
		t.Fatalf("alice's vote: %+v, %v", got, err)
	}
	e.refusedEdit("dave's edit", dave, r, approveEdit(`{"n":99}`), countersign.EFORBIDDEN)
	got, err := e.svc.Decide(e.ctx, carol, r.ID, approveEdit(`{"n":99}`))
	if err != nil || got.Status != countersign.StatusPending || got.Original == nil || string(got.Arguments) != `{"n":99}` {
		t.Fatalf("carol's edit: %+v, %v", got, err)
	}
	team, err := e.svc.TeamOf(e.ctx, e.alice, e.stored(r.ID))
	if err != nil || len(team.Votes) != 1 || team.Votes[0].Username != "carol" {
		t.Fatalf("votes after the edit: %+v, %v; want carol's alone", team, err)
	}
	if _, err := e.svc.Consume(e.ctx, e.keyA, r.ID); countersign.ErrorCode(err) != countersign.ECONFLICT {
		t.Fatalf("consume after the edit: %v, want ECONFLICT", err)
	}
	// alice votes for the edited action she was shown.
	got, err = e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, Binding: e.stored(r.ID).BindingHash()})
	if err != nil || got.Status != countersign.StatusApproved || string(got.Arguments) != `{"n":99}` {
		t.Fatalf("alice's vote on the edit: %+v, %v", got, err)
	}
	c, err := e.svc.Consume(approval.AcceptEdits(e.ctx), e.keyA, r.ID)
	if err != nil || string(c.Arguments) != `{"n":99}` {
		t.Fatalf("consume: %+v, %v", c, err)
	}
	if ev := strings.Join(e.events(r.ID), " "); ev != "created voted voted voted approved consumed" {
		t.Errorf("events %s", ev)
	}
}

// TestEditBashHiddenDeletes: an edited Bash command that deletes through a
// command the server's delete walk does not follow (a wrapper, another
// shell or interpreter, a substitution, a coprocess, a trap, find -exec)
// is judged protected, as a delete the server cannot follow, and so needs
// the step-up; a write to a protected path through any redirection says so.
func TestEditBashHiddenDeletes(t *testing.T) {
	e := newEnv(t, approval.Config{StepUp: approval.DefaultStepUp})
	r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: "Bash",
		Arguments: json.RawMessage(`{"command":"ls"}`), Context: countersign.RequestContext{Cwd: "/work/proj"}})
	for _, line := range []string{
		`command rm -rf /etc`, `nice rm -rf /etc`, `stdbuf -o0 rm -rf /etc`, `busybox rm -rf /etc`, `setsid rm -rf /etc`,
		`watch rm -rf /etc`, `chroot / rm -rf /etc`, `ionice -c3 rm -rf /etc`, `taskset 1 rm -rf /etc`, `builtin rm -rf /etc`,
		`{command,rm,-rf,/etc}`, `ksh -c 'rm -rf /etc'`, `fish -c 'rm -rf /etc'`, `php -r 'unlink("/etc/passwd");'`,
		`awk 'BEGIN{system("rm -rf /etc")}'`, `find /etc -exec rm -rf {} +`, `coproc rm -rf /etc`, `echo $(rm -rf /etc)`,
		`cat <(rm -rf /etc)`, `trap 'rm -rf /etc' EXIT`, `parallel rm ::: /etc`, `echo $(echo a) $(echo $(rm -rf /etc))`,
		"shopt -s expand_aliases\nalias ll='rm -rf /etc'\nll", `enable -f /tmp/x.so ls; ls`, `hash -p /tmp/x ls; ls`,
	} {
		args, _ := json.Marshal(map[string]string{"command": line})
		got, err := e.svc.Edited(e.ctx, e.alice, r.ID, countersign.Edit{Arguments: args})
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		if !got.Protected || len(got.RiskReasons) == 0 {
			t.Errorf("%s: protected %v, reasons %q; want a delete the server cannot follow", line, got.Protected, got.RiskReasons)
		}
		if !e.svc.NeedsStepUp(got, countersign.DecisionInput{Decision: countersign.DecisionApprove}) {
			t.Errorf("%s: approving the edit needs no passkey", line)
		}
	}
	for _, line := range []string{`echo x >& /etc/passwd`, `echo x 1<>/etc/passwd`, `echo x &>/etc/passwd`} {
		args, _ := json.Marshal(map[string]string{"command": line})
		got, err := e.svc.Edited(e.ctx, e.alice, r.ID, countersign.Edit{Arguments: args})
		if err != nil || !got.Protected || !slices.Contains(got.RiskReasons, "protected path: /etc/passwd") {
			t.Errorf("%s: %v; want a write to a protected path", line, edits(got, err))
		}
	}
	// A harmless edit stays harmless, and \rm is rm.
	for line, want := range map[string]bool{`ls -la`: false, `echo "$(git rev-parse HEAD)" > out.txt`: false, `echo x 2>&1`: false, `\rm -rf /work/proj/build`: false} {
		args, _ := json.Marshal(map[string]string{"command": line})
		got, err := e.svc.Edited(e.ctx, e.alice, r.ID, countersign.Edit{Arguments: args})
		if err != nil || got.Protected != want {
			t.Errorf("%s: %v; want protected %v", line, edits(got, err), want)
		}
	}
	args, _ := json.Marshal(map[string]string{"command": `\rm -rf /work/proj/build`})
	if got, err := e.svc.Edited(e.ctx, e.alice, r.ID, countersign.Edit{Arguments: args}); err != nil || !slices.Contains(got.RiskReasons, "edited command: rm deletes files") {
		t.Errorf(`\rm: %v; want rm's reason`, edits(got, err))
	}
}

// edits says what Edited answered, for a test's failure.
func edits(r *countersign.Request, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("protected %v, reasons %q", r.Protected, r.RiskReasons)
}

// TestEditQuorumStaleVote: on a request that needs two votes, an approver
// who read the action before another approver's edit cannot vote for the
// edited action without seeing it: an approval naming the binding it saw
// is refused once the action changed, and one naming none is refused on
// an edited request; naming the edited binding, it counts.
func TestEditQuorumStaleVote(t *testing.T) {
	e, carol, _ := teamEnv(t, "")
	r := e.create(e.keyA, e.toolCall("deploy-prod", ""))
	seen := r.BindingHash() // alice's page, read before the edit
	got, err := e.svc.Decide(e.ctx, carol, r.ID, approveEdit(`{"n":99}`))
	if err != nil || got.Status != countersign.StatusPending || got.Original == nil {
		t.Fatalf("carol's edit: %+v, %v", got, err)
	}
	edited := got.BindingHash()
	for what, d := range map[string]countersign.DecisionInput{
		"a vote for the action alice saw": {Decision: countersign.DecisionApprove, Binding: seen},
		"a vote naming no action":         {Decision: countersign.DecisionApprove},
	} {
		before := e.auditCount()
		_, err := e.svc.Decide(e.ctx, e.alice, r.ID, d)
		wantCode(t, what, err, countersign.ECONFLICT)
		if st := e.stored(r.ID); st.Status != countersign.StatusPending || e.auditCount() != before {
			t.Fatalf("%s changed the request: %s", what, st.Status)
		}
	}
	got, err = e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, Binding: edited})
	if err != nil || got.Status != countersign.StatusApproved || string(got.Arguments) != `{"n":99}` {
		t.Fatalf("alice's vote on the edit she saw: %+v, %v", got, err)
	}
	// Without an edit, an approval naming another binding is refused too.
	r2 := e.create(e.keyA, e.toolCall("Bash", ""))
	_, err = e.svc.Decide(e.ctx, e.alice, r2.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, Binding: edited})
	wantCode(t, "an approval naming another action", err, countersign.ECONFLICT)
	if got, err := e.svc.Decide(e.ctx, e.alice, r2.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, Binding: r2.BindingHash()}); err != nil || got.Status != countersign.StatusApproved {
		t.Fatalf("an approval naming its action: %+v, %v", got, err)
	}
}

// TestEditOpaqueTool: an edit of a coding agent's tool whose input the
// server cannot read (a patch, a PowerShell command, a tool it does not
// know) is judged protected, as what it cannot follow; an edit of a file
// tool outside protected paths, or of an MCP server's tool through the
// hook, is not.
func TestEditOpaqueTool(t *testing.T) {
	e := newEnv(t, approval.Config{StepUp: approval.DefaultStepUp})
	for tool, edit := range map[string]string{
		"apply_patch":        `{"command":"*** Begin Patch\n*** Delete File: /etc/passwd\n*** End Patch"}`,
		"powershell":         `{"command":"Remove-Item -Recurse -Force C:\\Windows"}`,
		"str_replace_editor": `{"command":"create","path":"/etc/cron.d/x","file_text":"x"}`,
		"SomeNewTool":        `{"anything":"rm -rf /etc"}`,
	} {
		r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: tool, Arguments: json.RawMessage(`{"command":"x"}`)})
		got, err := e.svc.Edited(e.ctx, e.alice, r.ID, countersign.Edit{Arguments: json.RawMessage(edit)})
		if err != nil || !got.Protected || len(got.RiskReasons) == 0 {
			t.Errorf("%s: %v; want protected, with a reason", tool, edits(got, err))
		}
		e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionDeny}) // within the pending limit
	}
	for tool, edit := range map[string]string{
		"Write":            `{"file_path":"/work/proj/a.txt","content":"y"}`,
		"Read":             `{"file_path":"/work/proj/a.txt"}`,
		"mcp__files__read": `{"path":"b"}`,
	} {
		r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: tool, Arguments: json.RawMessage(`{"file_path":"/work/proj/b.txt","path":"a"}`)})
		got, err := e.svc.Edited(e.ctx, e.alice, r.ID, countersign.Edit{Arguments: json.RawMessage(edit)})
		if err != nil || got.Protected {
			t.Errorf("%s: %v; want not protected", tool, edits(got, err))
		}
		e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionDeny})
	}
}

// TestEditProtectedCase: on the case-insensitive file systems of macOS
// and Windows, /ETC is /etc and ~/.SSH is ~/.ssh: an edit naming a
// protected path in other letters is protected too.
func TestEditProtectedCase(t *testing.T) {
	e := newEnv(t, approval.Config{})
	r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: "Bash",
		Arguments: json.RawMessage(`{"command":"ls"}`), Context: countersign.RequestContext{Cwd: "/work/proj"}})
	for _, line := range []string{`rm -rf /ETC`, `rm -rf /Etc/hosts`, `rm -rf /users/alice`, `rm -rf /Users/alice/.SSH`, `echo x > /USR/bin/ls`} {
		args, _ := json.Marshal(map[string]string{"command": line})
		got, err := e.svc.Edited(e.ctx, e.alice, r.ID, countersign.Edit{Arguments: args})
		if err != nil || !got.Protected {
			t.Errorf("%s: %v; want protected", line, edits(got, err))
		}
	}
}

// TestEditKeepsTheRule: an edit that would put a request of a two-person
// rule under another rule (here the protected rule before it, which one
// approver satisfies) is refused, as preview and as decision, and nothing
// changes; an edit that stays under the rule is the editor's vote.
func TestEditKeepsTheRule(t *testing.T) {
	e := newEnv(t, approval.Config{})
	carol := e.newApprover("carol", "acme")
	f, err := teamsFile(t, `[[rule]]
account = "acme"
protected = true
approvers = ["alice", "carol"]

[[rule]]
account = "acme"
tool = "Bash"
approvers = ["alice", "carol"]
quorum = 2
`)
	if err != nil {
		t.Fatal(err)
	}
	teams, err := f.Resolve(e.ctx, e.store)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = approval.New(e.store, e.clock, e.hub, approval.Config{Teams: teams}, nil, nil)
	r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindTool, Action: "Bash", Arguments: json.RawMessage(`{"command":"ls /tmp/x"}`)})
	protected := approveEdit(`{"command":"rm -rf /etc/x"}`)
	if _, err := e.svc.Edited(e.ctx, e.alice, r.ID, *protected.Edit); countersign.ErrorCode(err) != countersign.EINVALID || !strings.Contains(err.Error(), "another team rule") {
		t.Fatalf("preview of an edit under another rule: %v", err)
	}
	e.refusedEdit("an edit under another rule", e.alice, r, protected, countersign.EINVALID)
	got, err := e.svc.Decide(e.ctx, carol, r.ID, approveEdit(`{"command":"ls /tmp/y"}`))
	if err != nil || got.Status != countersign.StatusPending || string(got.Arguments) != `{"command":"ls /tmp/y"}` {
		t.Fatalf("an edit under the same rule: %+v, %v; want carol's vote, pending", got, err)
	}
}
