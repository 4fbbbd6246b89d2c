package e2e_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
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
		// It looks disabled too: not the colour of an Approve that works.
		look := `getComputedStyle(document.querySelector('form[data-webauthn="stepup"] button')).backgroundColor`
		if got := eval[string](t, ctx, look); got != "rgb(227, 230, 234)" {
			t.Fatalf("%s: the disabled Approve is coloured %s, not grey", sz.name, got)
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

// headerJS measures the page's header: its content's height, and the
// height of one line of its text.
const headerJS = `(() => {
  const h = document.querySelector("header.top"), cs = getComputedStyle(h);
  const content = h.clientHeight - parseFloat(cs.paddingTop) - parseFloat(cs.paddingBottom);
  const line = document.querySelector("header.top .brand").getBoundingClientRect().height;
  return [content, line, document.documentElement.scrollWidth];
})()`

// TestBrowserHeaderOneRow: on a 360 px phone and on a desktop, the header
// of every page is one row: its content is one line high, and nothing
// scrolls sideways. Its menu opens over the page and leads to each place.
func TestBrowserHeaderOneRow(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startPasskeys(t)
	ctx := browser(t, exe)
	signInPassword(t, ctx, e.URL)
	r := e.create(t, ctx, commitCall("/srv/header"))
	pages := []string{"/approvals", "/approvals/" + r.ID, "/grants", "/passkeys", "/sessions"}
	for _, sz := range sizes {
		viewport(t, ctx, sz.w, sz.h)
		for _, p := range pages {
			do(t, ctx, "open "+p, 10*time.Second, chromedp.Navigate(e.URL+p), chromedp.WaitVisible("header.top summary"))
			m := eval[[]float64](t, ctx, headerJS)
			if m[0] > m[1]+1 {
				t.Errorf("%s at %s: the header's content is %.0f px high, one line is %.0f px: it wraps", p, sz.name, m[0], m[1])
			}
			if m[2] > float64(sz.w) {
				t.Errorf("%s at %s: the page is %.0f px wide", p, sz.name, m[2])
			}
		}
	}
	viewport(t, ctx, 360, 800)
	do(t, ctx, "open the menu", 10*time.Second, chromedp.Navigate(e.URL+"/approvals"), press("header.top summary"),
		chromedp.WaitVisible(`header.top a[href="/passkeys"]`))
	links := eval[[]string](t, ctx, `[...document.querySelectorAll("header.top .menu-items a")].filter(a => a.offsetParent).map(a => a.getAttribute("href"))`)
	if strings.Join(links, " ") != "/grants /sessions /passkeys" {
		t.Errorf("the open menu shows the links %q", links)
	}
	if m := eval[[]float64](t, ctx, headerJS); m[0] > m[1]+1 {
		t.Errorf("the open menu pushes the header to %.0f px", m[0])
	}
	shoot(t, ctx, "countersign-menu-360")
	do(t, ctx, "go to the passkeys", 10*time.Second, press(`header.top a[href="/passkeys"]`), appears("Your passkeys"))
}

// TestBrowserWrongHost: the page for a wrong Host (421) is styled, its
// stylesheet being served under any Host, and links to the same page at
// the right address.
func TestBrowserWrongHost(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startPasskeys(t) // public: http://localhost:PORT
	ctx := browser(t, exe)
	wrong := strings.Replace(e.URL, "localhost", "127.0.0.1", 1)
	for _, sz := range sizes {
		viewport(t, ctx, sz.w, sz.h)
		do(t, ctx, "open the inbox at a wrong host", 10*time.Second,
			chromedp.Navigate(wrong+"/approvals?status=pending"), appears("This server answers only as"))
		bg := eval[string](t, ctx, `getComputedStyle(document.documentElement).backgroundColor`)
		card := eval[string](t, ctx, `getComputedStyle(document.querySelector(".card")).borderTopLeftRadius`)
		if bg != "rgb(246, 247, 249)" || card == "0px" {
			t.Fatalf("%s: the 421 page is not styled: background %s, card radius %s", sz.name, bg, card)
		}
		if href := eval[string](t, ctx, `document.getElementById("right-address").href`); href != e.URL+"/approvals?status=pending" {
			t.Fatalf("%s: the 421 page links to %q, want %q", sz.name, href, e.URL+"/approvals?status=pending")
		}
		if sz.w == 360 {
			fitsPhone(t, ctx, "the 421 page")
			shoot(t, ctx, "countersign-421-360")
		}
	}
	do(t, ctx, "follow the link", 10*time.Second, press("#right-address"), chromedp.WaitVisible(chromedp.ID("username")))
	if at := eval[string](t, ctx, "location.origin"); at != e.URL {
		t.Fatalf("the link led to %s, want %s", at, e.URL)
	}
}

// bottomJS is the bottom of an element's box, from the top of the page.
func bottomJS(sel string) string {
	return `(() => { const el = document.querySelector(` + "`" + sel + "`" + `); return el ? el.getBoundingClientRect().bottom + scrollY : -1; })()`
}

// TestBrowserConsentFirstScreen: the sign-in on the way to a consent says
// which client asks to connect to which server; on the consent page the
// Allow control is within the first 800 px, on a phone and a desktop; once
// allowed, the connection is one card.
func TestBrowserConsentFirstScreen(t *testing.T) { consentScreens(t, false) }

// TestBrowserConsentFirstScreenPasskey: with a passkey too, both Allow
// controls are within the first 800 px.
func TestBrowserConsentFirstScreenPasskey(t *testing.T) { consentScreens(t, true) }

func consentScreens(t *testing.T, passkey bool) {
	t.Parallel()
	exe := chromium(t)
	e := startPasskeys(t)
	ctx := browser(t, exe)
	virtualAuthenticator(t, ctx)
	client, callback, _ := consentClient(t, e)
	authorize := e.URL + "/oauth/authorize?" + url.Values{"response_type": {"code"}, "client_id": {client}, "redirect_uri": {callback},
		"state": {"s1"}, "code_challenge": {identity.S256(strings.Repeat("v", 43))}, "code_challenge_method": {"S256"},
		"resource": {e.URL + "/mcp"}}.Encode()
	cb, _ := url.Parse(callback)
	public, _ := url.Parse(e.URL)

	viewport(t, ctx, 360, 800)
	if !passkey {
		do(t, ctx, "open the consent without a session", 10*time.Second, chromedp.Navigate(authorize), chromedp.WaitVisible(chromedp.ID("username")))
		want := "Agent's client asks to connect to " + public.Host + " as an agent of your account, and then to return you to " + cb.Host
		if got := eval[string](t, ctx, `(document.querySelector(".connect") || {}).innerText || ""`); !strings.HasPrefix(got, want) {
			t.Fatalf("the sign-in page says %q, want it to start %q", got, want)
		}
		shoot(t, ctx, "countersign-signin-consent-360")
		do(t, ctx, "a plain sign-in says nothing of a connection", 10*time.Second, chromedp.Navigate(e.URL+"/signin"), chromedp.WaitVisible(chromedp.ID("username")))
		if eval[bool](t, ctx, `!!document.querySelector(".connect")`) {
			t.Fatal("the plain sign-in page names a connection")
		}
	}
	do(t, ctx, "sign in on the way", 15*time.Second,
		chromedp.Navigate(authorize),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		press(`form[action="/signin"] button`),
		appears("Allowing needs your password again"),
	)
	check := func(with string, controls ...string) {
		t.Helper()
		for _, sz := range sizes {
			viewport(t, ctx, sz.w, sz.h)
			do(t, ctx, "open the consent page", 10*time.Second, chromedp.Navigate(authorize), appears("Tools it may use"))
			for _, c := range controls {
				if b := eval[float64](t, ctx, bottomJS(c)); b < 0 || b > 800 {
					t.Errorf("%s at %s: %s ends at %.0f px, below the first 800", with, sz.name, c, b)
				}
			}
			if sz.w == 360 {
				fitsPhone(t, ctx, "the consent page "+with)
				shoot(t, ctx, "countersign-consent-"+with+"-360")
			}
		}
	}
	if passkey {
		do(t, ctx, "add a passkey", 15*time.Second,
			chromedp.Navigate(e.URL+"/passkeys"),
			chromedp.SendKeys(chromedp.ID("name"), "laptop"),
			chromedp.SendKeys(chromedp.ID("current-password"), password),
			press(`form[data-webauthn="register"] button`),
			appears("Passkey laptop added."),
		)
		check("passkey", "#allow-password", "#allow-passkey")
		return
	}
	check("password", "#allow-password")

	// Allowed, the connection is one card on a phone, with its Revoke.
	do(t, ctx, "allow with the password", 15*time.Second,
		chromedp.Navigate(authorize), appears("Tools it may use"),
		chromedp.SendKeys(chromedp.ID("consent-password"), password),
		press("#allow-password"), appears("callback reached"))
	for _, sz := range sizes {
		viewport(t, ctx, sz.w, sz.h)
		do(t, ctx, "open the connections", 10*time.Second, chromedp.Navigate(e.URL+"/grants"), appears("Agent's client"))
		cards := eval[[]string](t, ctx, `[...document.querySelectorAll("li.grant")].map(c => [...c.querySelectorAll("dt")].map(d => d.textContent).join(",") + "|" + (c.querySelector("button.danger") || {}).textContent)`)
		if len(cards) != 1 || cards[0] != "Allowed by,Tiers,Allowed,Last used|Revoke" {
			t.Errorf("%s: the connections page shows %q", sz.name, cards)
		}
		if sz.w == 360 {
			fitsPhone(t, ctx, "the connections page")
			shoot(t, ctx, "countersign-grants-360")
		}
	}
}
