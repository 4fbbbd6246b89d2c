package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
)

// enrol signs the approver in with the password in the browser's tab and
// adds a passkey of the tab's virtual authenticator.
func enrol(t *testing.T, ctx context.Context, base, username string) {
	t.Helper()
	do(t, ctx, username+" signs in with the password", 15*time.Second,
		chromedp.Navigate(base+"/signin"),
		chromedp.SendKeys(chromedp.ID("username"), username),
		chromedp.SendKeys(chromedp.ID("password"), password),
		press(`form[action="/signin"] button`),
		appears("Waiting for you"),
	)
	do(t, ctx, username+" adds a passkey", 15*time.Second,
		chromedp.Navigate(base+"/passkeys"),
		chromedp.SendKeys(chromedp.ID("name"), "laptop"),
		chromedp.SendKeys(chromedp.ID("current-password"), password),
		press(`form[data-webauthn="register"] button`),
		appears("Passkey laptop added."),
	)
}

// TestBrowserQuorum: an MCP commit call that a team rule gives to two
// approvers of a group, and that needs a passkey: alice approves in her
// browser with her passkey, which leaves the request pending, the agent
// waiting and the page saying "1 of 2 approvals: alice"; carol, in another
// browser with another authenticator, sees that and approves with her own
// passkey, which approves it and ends the agent's wait. Each vote is in
// the log with its own passkey; dave, outside the group, sees the request
// read-only.
func TestBrowserQuorum(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startPasskeys(t, func(w *testutil.World, c *approval.Config) {
		w.Approver("carol", "acme")
		w.Approver("dave", "acme")
		c.Teams = &approval.Teams{Rules: []approval.TeamRule{{AccountID: w.Acme.ID, Kind: countersign.KindMCP, Tier: countersign.TierCommit,
			Approvers: []string{"alice", "carol"}, Route: "group:sre", Quorum: 2}}}
	})
	aliceTab, carolTab, daveTab := browser(t, exe), browser(t, exe), browser(t, exe)
	virtualAuthenticator(t, aliceTab)
	virtualAuthenticator(t, carolTab)
	enrol(t, aliceTab, e.URL, "alice")
	enrol(t, carolTab, e.URL, "carol")
	signIn := func(ctx context.Context, username string) {
		do(t, ctx, username+" signs in", 15*time.Second,
			chromedp.Navigate(e.URL+"/signin"),
			chromedp.SendKeys(chromedp.ID("username"), username),
			chromedp.SendKeys(chromedp.ID("password"), password),
			press(`form[action="/signin"] button`),
			appears("Waiting for you"),
		)
	}
	signIn(daveTab, "dave")
	// Off the live inbox, whose reload on the new request would abort the
	// next navigation.
	do(t, daveTab, "dave leaves the inbox", 10*time.Second, chromedp.Navigate(e.URL+"/passkeys"), appears("Your passkeys"))

	r := e.create(t, aliceTab, commitCall("/srv/release"))
	type waited struct {
		r   *client.Request
		err error
	}
	agentWait := make(chan waited, 1)
	go func() {
		got, err := e.agent.Wait(context.WithoutCancel(t.Context()), r.ID, 60*time.Second)
		agentWait <- waited{got, err}
	}()
	e.waiters(t, 1, "the agent's long poll")

	do(t, daveTab, "dave opens the request", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+r.ID),
		appears("routed to group:sre: you see it but do not decide it"))
	if n := eval[int](t, daveTab, `document.querySelectorAll("form[action$='/decision']").length`); n != 0 {
		t.Fatalf("dave's page offers %d decision forms, want none", n)
	}

	do(t, aliceTab, "alice opens the request", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+r.ID), appears("0 of 2 approvals"))
	do(t, aliceTab, "alice approves with her passkey", 20*time.Second, press(`form[data-webauthn="stepup"] button`), appears("1 of 2 approvals: alice"))
	if st := e.status(t, r.ID); st != countersign.StatusPending {
		t.Fatalf("after alice's vote the request is %s, want pending", st)
	}
	select {
	case got := <-agentWait:
		t.Fatalf("the agent's wait ended after one vote: %+v", got)
	default:
	}

	do(t, carolTab, "carol opens the request", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+r.ID), appears("1 of 2 approvals: alice"))
	do(t, carolTab, "carol approves with her passkey", 20*time.Second, press(`form[data-webauthn="stepup"] button`), appears("by alice, carol"))
	select {
	case got := <-agentWait:
		if got.err != nil || got.r.Status != string(countersign.StatusApproved) {
			t.Fatalf("the agent's wait: %+v", got)
		}
	case <-time.After(testutil.EventuallyWithin):
		t.Fatal("the agent's wait did not end at the second vote")
	}

	entries, err := e.store.AuditLog(t.Context(), 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var votes []string
	creds := map[string]bool{}
	for _, en := range entries {
		if en.RequestID != r.ID || (en.Event != "voted" && en.Event != "approved") {
			continue
		}
		votes = append(votes, en.Event+" "+en.Actor)
		if en.Event == "voted" {
			if !strings.Contains(en.Detail, `"verified":"webauthn"`) || !strings.Contains(en.Detail, `"binding_hash":"`+r.BindingHash()+`"`) {
				t.Errorf("vote entry %s", en.Detail)
			}
			creds[en.Detail[strings.Index(en.Detail, `"credential_id"`):]] = true
		}
	}
	if strings.Join(votes, "; ") != "voted approver:alice; voted approver:carol; approved approver:carol" || len(creds) != 2 {
		t.Fatalf("audit: %v, %d passkeys", votes, len(creds))
	}
}
