package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/files"
)

// TestViewerSeesAndDecidesNothing: a viewer of an account sees its
// requests in the inbox and on their pages, with no decision offered; a
// decision from a viewer's browser or API token is refused with a clear
// error and changes nothing; an approver of the same account decides.
func TestViewerSeesAndDecidesNothing(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	e.World.Approver("vic", "acme")
	if err := e.Admin.SetRole(e.Ctx, "acme", "vic", countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	e.World.Approver("apu", "acme")
	if err := e.Admin.SetRole(e.Ctx, "acme", "apu", countersign.RoleApprover); err != nil {
		t.Fatal(err)
	}
	r := e.create(e.agentA, ibTool("s1"))

	vic := e.signIn("vic")
	inbox := e.get("/approvals", e.as(vic.id)).want(t, "a viewer's inbox", http.StatusOK)
	if !strings.Contains(inbox.body, "View "+r.Reference[:3]) {
		t.Errorf("a viewer's inbox does not offer to view %s:\n%s", r.Reference, inbox.body)
	}
	page := e.get("/approvals/"+r.ID, e.as(vic.id)).want(t, "a viewer's request page", http.StatusOK)
	if strings.Contains(page.body, `name="decision"`) || !strings.Contains(page.body, "You are a viewer of this account") {
		t.Errorf("a viewer's request page offers a decision or does not say why not:\n%s", page.body)
	}
	for _, d := range []string{"approve", "deny", "stop"} {
		got := e.decide(vic, r.ID, url.Values{"decision": {d}})
		if got.status != http.StatusForbidden || !strings.Contains(got.body, "your role in this account is viewer") {
			t.Errorf("a viewer's %s from the browser: status %d, want 403 saying why:\n%s", d, got.status, got.body)
		}
	}
	viewer := client.New(e.URL, e.World.Token("vic", "acme"))
	if list, err := viewer.List(e.Ctx, "pending", 10); err != nil || len(list) != 1 {
		t.Errorf("a viewer's token lists %d pending requests (%v), want 1", len(list), err)
	}
	_, err := viewer.Decide(e.Ctx, r.ID, client.Decision{Decision: "approve"})
	if err == nil || !strings.Contains(errText(err), "viewer") {
		t.Errorf("a viewer's token approving: %v, want forbidden", err)
	}
	e.wantStatus("after a viewer's decisions", r.ID, countersign.StatusPending)

	apu := client.New(e.URL, e.World.Token("apu", "acme"))
	if got, err := apu.Decide(e.Ctx, r.ID, client.Decision{Decision: "approve"}); err != nil || got.Status != "approved" {
		t.Fatalf("an approver approving: %v, %v", got, err)
	}
	// A viewer made approver decides at once, with the same session.
	r2 := e.create(e.agentA, ibTool("s1"))
	if err := e.Admin.SetRole(e.Ctx, "acme", "vic", countersign.RoleApprover); err != nil {
		t.Fatal(err)
	}
	e.decide(vic, r2.ID, url.Values{"decision": {"deny"}}).want(t, "a former viewer's deny", http.StatusSeeOther)
	e.wantStatus("after the former viewer's deny", r2.ID, countersign.StatusDenied)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestViewerUploadsNothing: a viewer sees an upload page of the account
// but is offered no form, and an upload from a viewer's session is
// refused before its body is read, saying why: giving an agent a file is
// acting on its request, as deciding is. The page stays open for an
// approver of the account.
func TestViewerUploadsNothing(t *testing.T) {
	t.Parallel()
	e := fSetup(t)
	e.World.Approver("vic", "acme")
	if err := e.Admin.SetRole(e.Ctx, "acme", "vic", countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	owner := files.Principal{Account: e.Acme.ID, Key: "key-a"}
	page := e.page(owner, "application/pdf")
	vic := e.signIn("vic")
	got := e.get("/uploads/"+page.ID, e.as(vic.id)).want(t, "a viewer's upload page", http.StatusOK)
	if strings.Contains(got.body, `type="file"`) || !strings.Contains(got.body, "You are a viewer of this account") {
		t.Errorf("a viewer's upload page offers the form or does not say why not:\n%s", got.body)
	}
	up := e.uploadFile(vic, page.ID, vic.csrf, "x.pdf", receipt)
	if up.status != http.StatusForbidden || !strings.Contains(up.body, "your role in this account is viewer") {
		t.Errorf("a viewer's upload: status %d, want 403 saying why:\n%s", up.status, up.body)
	}
	if _, err := e.files.Upload(owner, page.ID); countersign.ErrorCode(err) != countersign.ECONFLICT {
		t.Fatalf("after a viewer's upload the page is %v, want still open (conflict)", err)
	}
	alice := e.signIn("alice")
	e.uploadFile(alice, page.ID, alice.csrf, "x.pdf", receipt).wantRedirect(t, "an admin's upload", "/uploads/"+page.ID)
}

// TestViewerBeginsNoStepUp: a viewer's session begins no passkey
// confirmation of an approval it could not make: refused at once, saying
// why, before any passkey prompt.
func TestViewerBeginsNoStepUp(t *testing.T) {
	t.Parallel()
	e := pkSetup(t)
	e.World.Approver("vic", "acme")
	if err := e.Admin.SetRole(e.Ctx, "acme", "vic", countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	vic := e.signIn("vic")
	req := e.create(e.agentA, pkCommit("/srv/v"))
	r := e.post("/approvals/"+req.ID+"/stepup", url.Values{"decision": {"approve"}, "csrf": {vic.csrf}}, e.as(vic.id))
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "your role in this account is viewer") {
		t.Errorf("a viewer's step-up begin: status %d, want 403 saying why:\n%s", r.status, r.body)
	}
}
