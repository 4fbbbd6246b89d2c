package e2e_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign"
)

// sizes are the viewports every page is taken at: a phone and a desktop.
var sizes = []struct {
	name string
	w, h int64
}{{"phone", 360, 800}, {"desktop", 1280, 800}}

func viewport(t *testing.T, ctx context.Context, w, h int64) {
	t.Helper()
	do(t, ctx, "set the viewport", 5*time.Second, chromedp.EmulateViewport(w, h))
}

// signInPassword signs alice in with her password.
func signInPassword(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	do(t, ctx, "sign in with the password", 15*time.Second,
		chromedp.Navigate(base+"/signin"),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		press(`form[action="/signin"] button`),
		appears("Waiting for you"),
	)
}

// TestBrowserStepUpReturn: without a passkey, a step-up offer is disabled,
// says why and links once to adding a passkey; after adding one the
// browser is back on the request's page by a redirect (post, redirect,
// get), so a reload submits nothing. A return target that is not one of
// the server's own pages is dropped.
func TestBrowserStepUpReturn(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startPasskeys(t)
	ctx := browser(t, exe)
	virtualAuthenticator(t, ctx)
	alice, err := e.store.ApproverByUsername(t.Context(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	signInPassword(t, ctx, e.URL)
	a := e.create(t, ctx, commitCall("/srv/a"))
	page := "/approvals/" + a.ID
	for _, sz := range sizes {
		viewport(t, ctx, sz.w, sz.h)
		do(t, ctx, "open the step-up request at "+sz.name, 10*time.Second, chromedp.Navigate(e.URL+page), appears("You have no passkey yet"))
		if !eval[bool](t, ctx, `document.querySelector('form[data-webauthn="stepup"] button').disabled`) {
			t.Fatalf("%s: the step-up Approve is enabled without a passkey", sz.name)
		}
		links := eval[[]string](t, ctx, `[...document.querySelectorAll('main a[href^="/passkeys"]')].map(a => a.getAttribute("href"))`)
		if want := "/passkeys?next=" + url.QueryEscape(page); len(links) != 1 || links[0] != want {
			t.Fatalf("%s: links to add a passkey %q, want one to %q", sz.name, links, want)
		}
	}
	viewport(t, ctx, 360, 800)
	do(t, ctx, "follow the link and add a passkey", 20*time.Second,
		press("a.add-passkey"),
		appears("you go back to"),
		chromedp.SendKeys(chromedp.ID("name"), "phone"),
		chromedp.SendKeys(chromedp.ID("current-password"), password),
		press(`form[data-webauthn="register"] button`),
		appears("Approve "+countersign.FormatReference(a.Reference)+" once with your passkey"),
	)
	if at := eval[string](t, ctx, "location.pathname"); at != page {
		t.Fatalf("after adding a passkey the browser is at %q, want %q", at, page)
	}
	nav := `(() => { const n = performance.getEntriesByType("navigation")[0]; return n.type + " " + n.redirectCount; })()`
	if got := eval[string](t, ctx, nav); got != "navigate 1" {
		t.Fatalf("the request page was reached by %q, want a navigation after one redirect", got)
	}
	if eval[bool](t, ctx, `document.querySelector('form[data-webauthn="stepup"] button').disabled`) {
		t.Fatal("the step-up Approve is still disabled with a passkey")
	}
	do(t, ctx, "reload", 10*time.Second, chromedp.Reload(), appears("with your passkey"))
	if got := eval[string](t, ctx, nav); got != "reload 0" {
		t.Fatalf("the reload was %q, want a plain reload of the page", got)
	}
	if keys, err := e.store.Passkeys(t.Context(), alice.ID); err != nil || len(keys) != 1 {
		t.Fatalf("after the reload: %d passkeys (%v), want 1", len(keys), err)
	}

	// Targets elsewhere are not carried: the form then returns to the list.
	for _, next := range []string{"https://evil.example/approvals", "//evil.example/approvals", "/\\evil.example", "/approvals/../signout", "/signout", "javascript:alert(1)"} {
		do(t, ctx, "open the passkeys page with next "+next, 10*time.Second,
			chromedp.Navigate(e.URL+"/passkeys?next="+url.QueryEscape(next)), appears("Your passkeys"))
		if eval[bool](t, ctx, `!!document.querySelector('input[name="next"]') || document.body.innerText.includes("you go back to")`) {
			t.Errorf("next %q was carried into the form", next)
		}
	}
}
