// Package e2e_test drives the approval inbox in a real headless Chromium
// against the real server: sign in, watch a request appear by itself,
// approve it while the agent long-polls, and check that what an agent sends
// is shown as text.
package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

const password = testutil.Password

// chromium returns the browser to drive, or skips the test without one
// (fails it when COUNTERSIGN_TEST_STRICT=1).
func chromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	testutil.Missing(t, "no Chromium: neither /usr/bin/chromium nor chromium in PATH (apt-get install -y chromium)")
	return ""
}

// env is a real server on the shared test world, with the agent key
// laptop of acme; alice signs in with testutil.Password.
type env struct {
	URL   string
	hub   *approval.Hub
	agent *client.Client
}

func start(t *testing.T) *env {
	t.Helper()
	s := testserver.New(t, testserver.WallClock())
	return &env{URL: s.URL, hub: s.Hub, agent: client.New(s.URL, s.Key("acme", "laptop"))}
}

// waiters waits until the hub holds at least n waits: the page's event
// stream, and the agent's long poll.
func (e *env) waiters(t *testing.T, n int64, what string) {
	t.Helper()
	if !testutil.Wait(func() bool { return e.hub.Waiters() >= n }, testutil.EventuallyWithin) {
		t.Fatalf("%s: the hub has %d waiters, want %d", what, e.hub.Waiters(), n)
	}
}

// shared is the one headless Chromium of the test binary, started by the
// first test that asks for a browser and stopped by TestMain.
var shared struct {
	once    sync.Once
	ctx     context.Context // the browser's first tab
	err     error
	stop    func()
	profile string
}

// browserTests is how many tests there are that run in parallel; unless
// -parallel says otherwise, all of them run at once on any machine. They
// spend their time waiting on Chromium and the server, not on the CPU,
// which the default of one test per core assumes.
const browserTests = 4

func TestMain(m *testing.M) {
	testutil.WaitingParallel(browserTests)
	code := m.Run()
	if shared.stop != nil {
		shared.stop() // waits for the browser to exit
	}
	if shared.profile != "" {
		os.RemoveAll(shared.profile)
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// startShared starts the shared Chromium with a fresh profile.
func startShared(exe string) {
	shared.profile, shared.err = os.MkdirTemp("", "countersign-e2e-chromium-")
	if shared.err != nil {
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(shared.profile),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	shared.ctx = ctx
	shared.stop = func() {
		cancelCtx()
		cancelAlloc()
	}
	// The browser lives as long as the context of its first run.
	shared.err = chromedp.Do(ctx)
}

// browser opens a tab in a browser context of its own (no cookies,
// storage or downloads shared with another test) in the shared headless
// Chromium. Everything it does ends within the test's budget; the tab and
// its browser context are gone when the test ends.
func browser(t *testing.T, exe string) context.Context {
	t.Helper()
	shared.once.Do(func() { startShared(exe) })
	if shared.err != nil {
		t.Fatalf("start Chromium: %v", shared.err)
	}
	tab, cancelTab := chromedp.NewContext(shared.ctx, chromedp.WithNewBrowserContext())
	ctx, cancelBudget := context.WithTimeout(tab, patience*45*time.Second)
	t.Cleanup(func() {
		cancelBudget()
		cancelTab() // waits for the tab to close
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}

// patience multiplies the bounds of a test's browser and of its steps:
// they catch a browser that hangs, not a slow one, and Chromium on two
// cores shared with a busy test run takes seconds for a page.
const patience = 3

// do runs browser steps with a timeout of their own (times patience).
func do(t *testing.T, ctx context.Context, what string, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, patience*d)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, state(ctx))
	}
}

// state describes where the browser is, for a failure message.
func state(ctx context.Context) string {
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Evaluate[string](`location.href + "\n" + (document.body ? document.body.innerText : "")`))
	if err != nil {
		return "(the page cannot be read: " + err.Error() + ")"
	}
	return "the page at " + s
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// appears waits until the page's visible text holds s. The page itself
// watches its document for changes and answers as soon as the text is
// there, or after half a second without it, when the test asks again. It
// rides out navigations (a click that submits a form, the page's own
// reload on an event), which end the page's watch with an error.
func appears(s string) chromedp.Action[chromedp.Void] {
	q, _ := json.Marshal(s)
	expr := fmt.Sprintf(`new Promise(resolve => {
  const has = () => !!document.body && document.body.innerText.includes(%s);
  if (has()) return resolve(true);
  const seen = new MutationObserver(() => { if (has()) done(true); });
  const timer = setTimeout(() => done(has()), 500);
  const done = ok => { seen.disconnect(); clearTimeout(timer); resolve(ok); };
  seen.observe(document, {childList: true, subtree: true, characterData: true, attributes: true});
})`, q)
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		var last error
		seen := false
		// Seen, or the context done: either stops the wait. An error
		// is a document on its way out: the next check asks the next
		// one.
		if !testutil.Wait(func() bool {
			ok, err := chromedp.Evaluate[bool](expr, chromedp.EvalAwaitPromise)(ctx, tg)
			if err != nil {
				last = err
			}
			seen = err == nil && ok
			return seen || ctx.Err() != nil
		}, 10*time.Second) {
			return chromedp.Void{}, fmt.Errorf("%q did not appear within 10 s (last error: %v)", s, last)
		}
		if !seen {
			return chromedp.Void{}, ctx.Err()
		}
		return chromedp.Void{}, nil
	}
}

// fitsPhone checks a page at 360 px: no sideways scrolling, and nothing an
// agent sends, however long a word, runs out of its box.
func fitsPhone(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	if w := eval[int](t, ctx, "document.documentElement.scrollWidth"); w > 360 {
		t.Errorf("%s is %d px wide at a 360 px viewport: it scrolls sideways", what, w)
	}
	over := eval[[]string](t, ctx, `[...document.querySelectorAll("main *")]
		.filter(el => el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX === "visible")
		.map(el => el.tagName + "." + el.className + ": " + el.textContent.slice(0, 40))`)
	if len(over) > 0 {
		t.Errorf("in %s at 360 px these overflow their box: %q", what, over)
	}
}

func TestBrowserInbox(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := start(t)
	ctx := browser(t, exe)
	agentCtx, cancelAgent := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancelAgent()

	// Signed out, the inbox sends the browser to the sign-in form.
	do(t, ctx, "open the inbox", 10*time.Second,
		chromedp.Navigate(e.URL+"/approvals"),
		chromedp.WaitVisible(chromedp.ID("username")),
	)
	if loc := eval[string](t, ctx, "location.pathname + location.search"); loc != "/signin?next=%2Fapprovals" {
		t.Fatalf("signed out, the inbox went to %q", loc)
	}
	do(t, ctx, "sign in", 10*time.Second,
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		appears("Waiting for you"),
	)
	if loc := eval[string](t, ctx, "location.pathname"); loc != "/approvals" {
		t.Fatalf("after sign-in the browser is at %q", loc)
	}

	// An agent asks; the open inbox shows it without the test reloading.
	e.waiters(t, 1, "the inbox's event stream")
	type created struct {
		r   *client.Request
		err error
	}
	ch := make(chan created, 1)
	go func() {
		r, _, err := e.agent.Create(agentCtx, client.CreateInput{
			Kind: "tool", Action: "Bash", Arguments: []byte(`{"command":"rm -rf ./build"}`),
			Preview: "rm -rf ./build", RiskReasons: []string{"recursive delete"},
			Context: client.Context{User: "dev", Host: "laptop", Cwd: "/home/dev/app", SessionID: "sess-1"},
		})
		ch <- created{r, err}
	}()
	var req *client.Request
	select {
	case c := <-ch:
		if c.err != nil {
			t.Fatalf("the agent could not ask: %v", c.err)
		}
		req = c.r
	case <-agentCtx.Done():
		t.Fatal("the agent's request never returned")
	}
	do(t, ctx, "the request appears by itself", 10*time.Second, appears(req.Reference))

	// The agent long-polls while the human reviews and approves.
	type waited struct {
		r   *client.Request
		err error
	}
	wch := make(chan waited, 1)
	go func() {
		r, err := e.agent.Wait(agentCtx, req.ID, 30*time.Second)
		wch <- waited{r, err}
	}()
	e.waiters(t, 2, "the agent's long poll and the inbox's event stream")
	do(t, ctx, "review and approve", 10*time.Second,
		chromedp.Click(chromedp.CSS(`a[href="/approvals/`+req.ID+`"]`)),
		chromedp.WaitVisible(chromedp.CSS("section.decide")),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Approve `+req.Reference+` once"]`)),
		appears("approved by alice"),
	)
	if w := testutil.Receive(t, wch, "the agent's long poll's return after the approval"); w.err != nil || w.r.Status != "approved" || w.r.DecidedBy != "alice" {
		t.Fatalf("the agent's wait returned %+v, %v; want approved by alice", w.r, w.err)
	}
	if r, err := e.agent.Consume(agentCtx, req.ID); err != nil || r.Status != "consumed" {
		t.Fatalf("consume: %+v, %v", r, err)
	}

	// The page says in words what a window lets through, and the window
	// it opens lets through that and nothing else.
	scoped := func(command string, commands, paths []string, reasons ...string) client.CreateInput {
		args, _ := json.Marshal(map[string]string{"command": command})
		return client.CreateInput{Kind: "tool", Action: "Bash", Arguments: args, Preview: command, RiskReasons: reasons,
			Context: client.Context{Cwd: "/home/dev/app", SessionID: "sess-w"},
			Scope:   &client.Scope{Commands: commands, Paths: paths}}
	}
	win, _, err := e.agent.Create(agentCtx, scoped("rm -r build", []string{"rm"}, []string{"/home/dev/app/build"}, "recursive deletion (-r/-R)"))
	if err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "open the request of rm -r build", 10*time.Second,
		chromedp.Navigate(e.URL+"/approvals/"+win.ID), chromedp.WaitVisible(chromedp.CSS("section.decide")))
	text := eval[string](t, ctx, "document.querySelector('section.decide').innerText")
	for _, says := range []string{"shell commands (Bash) of the agent key laptop in the agent session sess-w that:",
		"run no command but rm", "delete only within /home/dev/app/build", "give no reason to ask but: recursive deletion (-r/-R)",
		"anything whose effect is known only when it runs, is asked as usual"} {
		if !strings.Contains(text, says) {
			t.Errorf("the decision page does not say %q:\n%s", says, text)
		}
	}
	do(t, ctx, "approve for 5 minutes", 10*time.Second,
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Approve for a while"]`)),
		appears("approved by alice"),
	)
	for _, c := range []struct {
		what string
		in   client.CreateInput
		auto bool
	}{
		{"rm -r build/sub", scoped("rm -r build/sub", []string{"rm"}, []string{"/home/dev/app/build/sub"}, "recursive deletion (-r/-R)"), true},
		{"git push --force", scoped("git push --force", []string{"git push"}, nil, "git push --force replaces the history of the remote branch"), false},
		{"rm -rf ~/.ssh", scoped("rm -rf ~/.ssh", []string{"rm"}, []string{"/home/dev/.ssh"}, "recursive deletion (-r/-R)", "forced deletion (-f)"), false},
	} {
		r, _, err := e.agent.Create(agentCtx, c.in)
		if err != nil || r.AutoApproved != c.auto {
			t.Errorf("%s in the window: %+v, %v; auto-approved want %v", c.what, r, err, c.auto)
		}
	}

	// What an agent sends is shown as text, never run as markup.
	// A terminal escape in what a human reads is refused outright, so
	// that nothing reaches the page that could hide or recolour the rest.
	const evil = `echo "<script>window.__pwned=1</script>" '"><img src=x onerror="window.__pwned=2">'`
	var refused *client.Error
	if _, _, err := e.agent.Create(agentCtx, client.CreateInput{Kind: "tool", Action: evil + " \x1b[31mred\x1b[0m"}); !errors.As(err, &refused) || refused.Status != 400 {
		t.Errorf("an action with a terminal escape: %v, want 400", err)
	}
	xss, _, err := e.agent.Create(agentCtx, client.CreateInput{
		Kind: "tool", Action: evil, Preview: evil, RiskReasons: []string{"<script>window.__pwned=3</script>"},
		Context: client.Context{Cwd: "/tmp/<script>window.__pwned=4</script>", SessionID: "sess-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := e.agent.Create(agentCtx, client.CreateInput{
		Kind: "rm", Action: "rm -r /home/dev/app/node_modules", Preview: "rm -r /home/dev/app/node_modules\n  12,408 files, 312 MB",
		RiskReasons: []string{"recursive delete", "more than 1,000 files"},
		Context:     client.Context{User: "dev", Host: "laptop", Cwd: "/home/dev/app"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"/approvals", "/approvals/" + xss.ID} {
		do(t, ctx, "open "+page, 10*time.Second, chromedp.Navigate(e.URL+page), appears(xss.Reference))
		if v := eval[string](t, ctx, "typeof window.__pwned"); v != "undefined" {
			t.Errorf("%s: window.__pwned is %s: the agent's markup ran", page, v)
		}
		text := eval[string](t, ctx, "document.body.innerText")
		for _, want := range []string{"<script>window.__pwned=1</script>", `"><img src=x onerror="window.__pwned=2">`} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: the visible text lacks %q:\n%s", page, want, text)
			}
		}
		if n := eval[int](t, ctx, "document.querySelectorAll('main script, main img').length"); n != 0 {
			t.Errorf("%s: the page holds %d script or img elements", page, n)
		}
	}

	// The inbox at phone width, with two requests waiting.
	var shot []byte
	do(t, ctx, "phone-width inbox", 15*time.Second,
		chromedp.EmulateViewport(360, 740, chromedp.EmulateScale(2)),
		chromedp.Navigate(e.URL+"/approvals"),
		appears(xss.Reference),
		appears(other.Reference),
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			var err error
			shot, err = chromedp.CaptureScreenshot()(ctx, tg)
			return err
		}),
	)
	fitsPhone(t, ctx, "the inbox")
	save(t, "countersign-inbox-360.png", shot)

	do(t, ctx, "phone-width request page", 10*time.Second,
		chromedp.Navigate(e.URL+"/approvals/"+xss.ID), appears("Stop the agent's session"))
	fitsPhone(t, ctx, "the request page")
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	shot, err = chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	save(t, "countersign-request-360.png", shot)
}

// save writes a screenshot to $COUNTERSIGN_SCREENSHOT_DIR, or the
// temporary directory, and logs where.
func save(t *testing.T, name string, png []byte) {
	t.Helper()
	dir := os.Getenv("COUNTERSIGN_SCREENSHOT_DIR")
	if dir == "" {
		dir = os.TempDir()
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot at 360 px: %s", path)
}
