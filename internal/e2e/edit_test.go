package e2e_test

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/testutil"
)

// bashAsk is a Bash call of Claude Code as its hook asks about it.
func bashAsk(command string) client.CreateInput {
	args, _ := json.Marshal(map[string]string{"command": command})
	return client.CreateInput{Kind: "tool", Action: "Bash", Arguments: args,
		Preview: "Claude Code wants to run, in /home/dev/app:\n\n$ " + command + "\n",
		Context: client.Context{Cwd: "/home/dev/app", SessionID: "sess-edit", Agent: "claude-code"}}
}

// commandOf is the command of a Bash call's arguments.
func commandOf(t *testing.T, args json.RawMessage) string {
	t.Helper()
	var in struct {
		Command string `json:"command"`
	}
	if err := json.Unmarshal(args, &in); err != nil {
		t.Fatalf("the arguments %s: %v", args, err)
	}
	return in.Command
}

// TestBrowserEditThenApprove: at phone size, an approver opens a Bash
// call, sees Approve and Deny on the first screen and an Edit control,
// edits the command in the form, sees the edited command and its risk
// reasons, approves the edit, and the agent's consume answer over the
// API carries the edited command; the page then says who edited it and
// shows both versions. An MCP call's argument is edited in its field
// the same way. An edit that deletes a protected path needs the
// passkey: the approve form without an assertion is refused, and the
// virtual authenticator's assertion, whose challenge is bound to the
// edited action, lets it through.
func TestBrowserEditThenApprove(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startPasskeys(t)
	e.agent.AcceptEdits = true // the agent runs what is approved, edited or not
	ctx := browser(t, exe)
	virtualAuthenticator(t, ctx)
	do(t, ctx, "sign in", 15*time.Second,
		chromedp.EmulateViewport(360, 800, chromedp.EmulateScale(2)),
		chromedp.Navigate(e.URL+"/signin"),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		press(`form[action="/signin"] button`),
		appears("Waiting for you"),
	)
	do(t, ctx, "add a passkey", 15*time.Second,
		chromedp.Navigate(e.URL+"/passkeys"),
		chromedp.SendKeys(chromedp.ID("name"), "phone"),
		chromedp.SendKeys(chromedp.ID("current-password"), password),
		press(`form[data-webauthn="register"] button`),
		appears("Passkey phone added."),
	)

	// The request's page: Approve and Deny on the first screen, and the
	// way to the edit.
	plain := e.create(t, ctx, bashAsk("ls -la build"))
	do(t, ctx, "open the request", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+plain.ID), chromedp.WaitVisible(chromedp.CSS("section.decide")))
	approve := boxOf(t, ctx, `document.querySelector('section.decide form.now button.primary')`)
	deny := boxOf(t, ctx, `[...document.querySelectorAll('section.decide form.now button')].find(b => b.textContent.trim() === 'Deny')`)
	edit := boxOf(t, ctx, `document.querySelector('section.decide a[href$="/edit"]')`)
	if !approve.Found || !deny.Found || approve.Bottom > 800 || deny.Bottom > 800 || !edit.Found || edit.Top < approve.Bottom {
		t.Fatalf("Approve %+v and Deny %+v are not on the first screen, or the edit %+v is not after them", approve, deny, edit)
	}
	fitsPhone(t, ctx, "the request page")

	// Edit the command and look at it before approving.
	const edited = "ls -la build/out"
	do(t, ctx, "edit the command", 15*time.Second,
		press(`section.decide a[href$="/edit"]`),
		chromedp.WaitVisible(chromedp.ID("edit-command")),
	)
	if v := eval[string](t, ctx, `document.getElementById("edit-command").value`); v != "ls -la build" {
		t.Fatalf("the command field holds %q, want the agent's command", v)
	}
	fitsPhone(t, ctx, "the edit form")
	eval[bool](t, ctx, `document.getElementById("edit-command").value = `+quote(edited)+`; true`)
	do(t, ctx, "show the edit", 15*time.Second,
		press(`form.edit-form button`),
		appears("Approve the edit"),
	)
	preview := eval[string](t, ctx, `document.querySelector('section.edited-preview').innerText`)
	if !strings.Contains(preview, edited) {
		t.Errorf("the preview of the edit does not show the edited command:\n%s", preview)
	}
	if st := e.status(t, plain.ID); st != countersign.StatusPending {
		t.Fatalf("showing the edit made the request %s", st)
	}
	button := boxOf(t, ctx, `document.querySelector('form.approve-edit button')`)
	if !button.Found || button.Bottom > 800 {
		t.Errorf("Approve the edit is not on the first screen: %+v", button)
	}
	fitsPhone(t, ctx, "the preview of the edit")
	shoot(t, ctx, "request-edit-360")
	if n := eval[int](t, ctx, `document.querySelectorAll("form[data-webauthn]").length`); n != 0 {
		t.Errorf("a harmless edit asks for the passkey (%d forms)", n)
	}
	do(t, ctx, "approve the edit", 15*time.Second,
		press(`form.approve-edit button`),
		appears("Edited by alice"),
	)
	page := eval[string](t, ctx, "document.body.innerText")
	for _, want := range []string{"Approved by alice", edited, "As the agent asked", "ls -la build\n"} {
		if !strings.Contains(page, want) {
			t.Errorf("the approved page does not show %q:\n%s", want, page)
		}
	}
	fitsPhone(t, ctx, "the edited request's page")
	shoot(t, ctx, "request-edited-360")
	got, err := e.agent.Consume(t.Context(), plain.ID)
	if err != nil || got.Status != "consumed" {
		t.Fatalf("consume: %+v, %v", got, err)
	}
	if cmd := commandOf(t, got.Arguments); cmd != edited || !got.Edited || got.Original == nil || commandOf(t, got.Original.Arguments) != "ls -la build" {
		t.Errorf("the consume answer runs %q (edited %v, original %+v), want %q and the original", cmd, got.Edited, got.Original, edited)
	}

	// An MCP call's argument, in the form of its arguments.
	call := e.create(t, ctx, client.CreateInput{Kind: "mcp", Action: "files.write", Tier: "write",
		Arguments: []byte(`{"content":"hello","path":"/data/notes.txt"}`), Preview: "write /data/notes.txt"})
	do(t, ctx, "edit the call", 15*time.Second,
		chromedp.Navigate(e.URL+"/approvals/"+call.ID),
		press(`section.decide a[href$="/edit"]`),
		chromedp.WaitVisible(chromedp.ID("edit-f1")),
	)
	if v := eval[string](t, ctx, `document.querySelector('label[for="edit-f1"]').innerText + "=" + document.getElementById("edit-f1").value`); v != "path=/data/notes.txt" {
		t.Fatalf("the field of path in the call's form is %q", v)
	}
	if v := eval[string](t, ctx, `document.querySelector('form.edit-form label').innerText`); v != "path" {
		t.Errorf("the call's form leads with %q, want path, as its page does", v)
	}
	fitsPhone(t, ctx, "the form of a call's arguments")
	shoot(t, ctx, "request-edit-fields-360")
	eval[bool](t, ctx, `document.getElementById("edit-f1").value = "/data/notes-2.txt"; true`)
	do(t, ctx, "show and approve the call's edit", 15*time.Second,
		press(`form.edit-form button`),
		appears("Approve the edit"),
		appears("/data/notes-2.txt"),
		press(`form.approve-edit button`),
		appears("Edited by alice"),
	)
	got, err = e.agent.Consume(t.Context(), call.ID)
	if err != nil || string(got.Arguments) != `{"content":"hello","path":"/data/notes-2.txt"}` {
		t.Fatalf("consume of the edited call: %+v, %v", got, err)
	}

	// An edit that deletes a protected path needs the passkey.
	risky := e.create(t, ctx, bashAsk("echo hi"))
	const destroy = "rm -rf /etc/nginx"
	do(t, ctx, "edit into a delete of /etc", 15*time.Second,
		chromedp.Navigate(e.URL+"/approvals/"+risky.ID+"/edit"),
		chromedp.WaitVisible(chromedp.ID("edit-command")),
	)
	eval[bool](t, ctx, `document.getElementById("edit-command").value = `+quote(destroy)+`; true`)
	do(t, ctx, "show the risky edit", 15*time.Second,
		press(`form.edit-form button`),
		appears("Approve the edit with your passkey"),
		appears("new with the edit"),
	)
	fitsPhone(t, ctx, "the preview of a risky edit")
	shoot(t, ctx, "request-edit-stepup-360")
	// Without an assertion, the same form is refused.
	eval[bool](t, ctx, postJS+"; window.post = post; true")
	refused := evalAsync[string](t, ctx, `(async () => post("`+risky.ID+`", {decision: "approve", edit: document.querySelector('form.approve-edit input[name=edit]').value}))()`)
	if !strings.HasPrefix(refused, "403 ") || !strings.Contains(refused, "needs a passkey") {
		t.Errorf("the edit without a passkey: %q, want 403 saying it needs one", refused)
	}
	if st := e.status(t, risky.ID); st != countersign.StatusPending {
		t.Fatalf("the edit without a passkey made the request %s", st)
	}
	eval[bool](t, ctx, hookJS)
	do(t, ctx, "approve the risky edit", 5*time.Second, press(`form.approve-edit[data-webauthn="stepup"] button`))
	if !testutil.Wait(func() bool { return eval[string](t, ctx, `window.__challenge || ""`) != "" }, testutil.EventuallyWithin) {
		t.Fatalf("the page never asked the authenticator\n%s", state(ctx))
	}
	challenge, nonce := eval[string](t, ctx, `window.__challenge`), e.stepUpNonce(t)
	eval[bool](t, ctx, `window.__release(); true`)
	do(t, ctx, "approved with the passkey", 10*time.Second, appears("Edited by alice"))
	after, err := e.store.Request(t.Context(), risky.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := base64.RawURLEncoding.EncodeToString(identity.StepUpChallenge(nonce, risky.ID, after.BindingHash(), "approve", 0))
	if after.Status != countersign.StatusApproved || challenge != want || after.BindingHash() == risky.BindingHash() {
		t.Errorf("the risky edit: %s; the browser signed %s, want the edited binding's %s", after.Status, challenge, want)
	}
	got, err = e.agent.Consume(t.Context(), risky.ID)
	if err != nil || commandOf(t, got.Arguments) != destroy {
		t.Fatalf("consume of the risky edit: %+v, %v", got, err)
	}
}
