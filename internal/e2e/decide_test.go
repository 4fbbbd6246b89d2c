package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// decideEnv is countersign serve in process under the default step-up
// policy, with the MCP gateway at /mcp in front of the filesystem server
// ("fs": write_file of the write tier, create_directory of the commit
// tier, which needs a passkey) and the file server ("books": digest takes
// an upload, of the write tier), file transfer on, the agent key laptop
// of acme and alice's approver token.
type decideEnv struct {
	URL     string
	store   *sqlite.DB
	account string // acme's id
	key     string // agent key laptop
	token   string // alice's approver token
	root    string // the filesystem server's root
	project string // the directory the agent works in
	home    string
	cs      *mcp.ClientSession
}

func startDecide(t *testing.T) *decideEnv {
	t.Helper()
	npm := npmDir(t)
	e := &decideEnv{root: t.TempDir(), project: t.TempDir(), home: t.TempDir()}
	// The hook asks about the tools of the MCP server github that Claude
	// Code calls.
	hookConfig := filepath.Join(e.home, ".config", "countersign", "config.toml")
	os.MkdirAll(filepath.Dir(hookConfig), 0o700)
	if err := os.WriteFile(hookConfig, []byte("[hook]\nask = [\"mcp__github__*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := testserver.New(t, testserver.At(time.Now()), testserver.WallClock(), testserver.Serve(), testserver.Localhost(),
		testserver.Approval(func(_ *testserver.Server, c *approval.Config) { c.StepUp, c.MaxPending = approval.DefaultStepUp, 10 }),
		testserver.Config(func(s *testserver.Server, c *server.Config) {
			cfg := gateway.NewConfig()
			cfg.Hold = 100 * time.Millisecond
			cfg.Policy.Confirm = gateway.Tiers(gateway.TierWrite, gateway.TierCommit, gateway.TierExternal)
			cfg.Rules = []gateway.TierRule{
				{Match: "fs/write_file", Tier: gateway.TierWrite},
				{Match: "fs/create_directory", Tier: gateway.TierCommit},
				{Match: "books/digest", Tier: gateway.TierWrite},
			}
			cfg.Files = gateway.FilesConfig{Purposes: []string{"receipt"}, Accept: map[string][]string{"receipt": {"application/pdf", "image/*"}}}
			cfg.Upstreams = []gateway.UpstreamConfig{
				{Name: "fs", Command: []string{"node", filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"), e.root}},
				{Name: "books", Command: []string{testutil.FileServer(t)}, Files: []gateway.FileArg{{Tool: "digest", Arg: "file", Purposes: []string{"receipt"}, As: "path"}}},
			}
			serveGateway(t, s, c, cfg, true)
		}))
	e.URL, e.store, e.account = s.URL, s.World.Store, s.Acme.ID
	e.key, e.token = s.Key("acme", "laptop"), s.ApproverToken
	hc := &http.Client{Transport: bearerRT(e.key)}
	var err error
	e.cs, err = mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: e.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cs.Close() })
	return e
}

// callMCP calls a tool through /mcp and returns the request it filed.
func (e *decideEnv) callMCP(t *testing.T, tool string, args map[string]any) *countersign.Request {
	t.Helper()
	res, err := e.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	inbox, _ := res.Meta["countersign/inbox_url"].(string)
	if res.Meta["countersign/status"] != "approval_pending" || inbox == "" {
		t.Fatalf("%s: %q (meta %v), want approval_pending", tool, resultText(res), res.Meta)
	}
	r, err := e.store.Request(t.Context(), path.Base(inbox))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// agentEnv is the environment of the agent-side roles (the hook, the rm
// wrapper) asking this server with the agent key.
func (e *decideEnv) agentEnv() []string {
	return []string{"HOME=" + e.home, "XDG_CONFIG_HOME=" + filepath.Join(e.home, ".config"), "PATH=" + os.Getenv("PATH"),
		"CLAUDE_PROJECT_DIR=" + e.project, "COUNTERSIGN_URL=" + e.URL, "COUNTERSIGN_KEY=" + e.key,
		"CLAUDECODE=1"} // the rm wrapper guards the deletes of an agent
}

// background runs the countersign binary as an agent would, until the
// test ends, and returns the request it filed: the one pending request
// that which picks among those not in seen.
func (e *decideEnv) background(t *testing.T, stdin string, which func(*countersign.Request) bool, args ...string) *countersign.Request {
	t.Helper()
	return e.backgroundIn(t, e.project, stdin, which, args...)
}

// backgroundIn is background in the directory dir.
func (e *decideEnv) backgroundIn(t *testing.T, dir, stdin string, which func(*countersign.Request) bool, args ...string) *countersign.Request {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env, cmd.Dir = e.agentEnv(), dir
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	var found *countersign.Request
	if !testutil.Wait(func() bool {
		list, err := e.store.Requests(t.Context(), countersign.RequestFilter{AccountID: e.account, Status: countersign.StatusPending, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range list {
			if which(r) {
				found = r
				return true
			}
		}
		return false
	}, testutil.EventuallyWithin) {
		t.Fatalf("countersign %s filed no request within %s:\n%s", strings.Join(args, " "), testutil.EventuallyWithin, out.String())
	}
	return found
}

// hookInput is the PermissionRequest event of Claude Code for a tool call.
func (e *decideEnv) hookInput(tool, input string) string {
	return fmt.Sprintf(`{"session_id":"sess-phone","transcript_path":%q,"cwd":%q,"permission_mode":"default",
"hook_event_name":"PermissionRequest","tool_name":%q,"tool_input":%s}`, filepath.Join(e.home, "t.jsonl"), e.project, tool, input)
}

// shoot saves a screenshot of the viewport and of the whole page to
// $COUNTERSIGN_SCREENSHOT_DIR (make screenshots), when it is set.
func shoot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("COUNTERSIGN_SCREENSHOT_DIR")
	if dir == "" {
		return
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	view, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	full, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	for file, b := range map[string][]byte{name + ".png": view, name + "-full.png": full} {
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// box is an element's place on the page, in CSS pixels from the top of
// the document; found is false when no element matches.
type box struct {
	Top, Bottom float64
	Found       bool
}

func boxOf(t *testing.T, ctx context.Context, js string) box {
	t.Helper()
	return eval[box](t, ctx, `(() => { const el = `+js+`;
  if (!el) return {Found: false};
  const r = el.getBoundingClientRect();
  return {Top: r.top + scrollY, Bottom: r.bottom + scrollY, Found: true}; })()`)
}

// midWord returns the words that the page breaks across lines other than
// at a space or separator, in the texts of what will run: the argument
// values, targets, commands and headlines. A word longer than a line
// must break somewhere; a shorter one never needs to.
func midWord(t *testing.T, ctx context.Context) []string {
	t.Helper()
	return eval[[]string](t, ctx, `(() => {
  const seps = " /._-:=&?,@\n";
  const out = [];
  for (const el of document.querySelectorAll("dl.args dd .value, h1.call .target, h1.headline, p.lead code, h1.command code, ul.targets li, pre.command")) {
    let text = "", tops = [];
    const range = document.createRange();
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let n; (n = walker.nextNode());) {
      for (let i = 0; i < n.length; i++) {
        range.setStart(n, i); range.setEnd(n, i + 1);
        const r = range.getClientRects()[0];
        text += n.data[i]; tops.push(r ? r.top : null);
      }
    }
    for (let i = 1; i < text.length; i++) {
      if (tops[i] === null || tops[i-1] === null || tops[i] <= tops[i-1] + 2 || seps.includes(text[i-1])) continue;
      let a = i, b = i;
      while (a > 0 && !seps.includes(text[a-1])) a--;
      while (b < text.length && !seps.includes(text[b])) b++;
      out.push(text.slice(a, b));
    }
  }
  return out;
})()`)
}

// longestLine is more than the characters of a value's line at 360 px.
const longestLine = 24

// TestBrowserDecisionPages: every kind of request, made through its real
// path (the rm wrapper, the Claude Code hook, an MCP call through /mcp,
// with and without an upload, one that needs a passkey, one that offers
// a window), is decided within the first screen of a phone: its page
// shows what will run and the Approve and Deny controls in the first 800
// px at 360 and 1280 px wide; an MCP call leads with its arguments, each
// shown once, before the upstream's description; the command and the
// reasons appear once. After the decision the page says who decided what
// and when and whether the agent used it, and the inbox's Decided rows
// and countersign list say what each request did.
func TestBrowserDecisionPages(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startDecide(t)
	if _, err := countersignBinary(); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t, exe)
	do(t, ctx, "sign in", 15*time.Second,
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(e.URL+"/signin"),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		press(`form[action="/signin"] button`),
		appears("Waiting for you"),
	)

	// An upload for the call that carries one.
	res, err := e.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: gateway.UploadTool, Arguments: map[string]any{"purpose": "receipt"}})
	if err != nil {
		t.Fatal(err)
	}
	m := uploadURL.FindStringSubmatch(resultText(res))
	sc, _ := res.StructuredContent.(map[string]any)
	uploadID, _ := sc["uploadId"].(string)
	if m == nil || uploadID == "" {
		t.Fatalf("upload request: %s", resultText(res))
	}
	receipt := filepath.Join(t.TempDir(), "receipt-2026-march.pdf")
	os.WriteFile(receipt, []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"), 0o600)
	do(t, ctx, "upload the receipt", 15*time.Second,
		chromedp.Navigate(m[1]),
		chromedp.WaitVisible(chromedp.CSS(`input[type="file"]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`input[type="file"]`), []string{receipt}),
		chromedp.Click(chromedp.CSS(`form[enctype] button[type="submit"]`)),
		appears("Received"),
	)

	// The requests, each through its real path.
	build := filepath.Join(e.project, "build")
	for _, d := range []string{"obj/linux_amd64", "cache"} {
		os.MkdirAll(filepath.Join(build, d), 0o755)
		os.WriteFile(filepath.Join(build, d, "main.o"), []byte("object"), 0o644)
	}
	os.MkdirAll(filepath.Join(e.home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(e.home, ".ssh", "id_ed25519"), []byte("key"), 0o600)
	notes := filepath.Join(e.root, "meeting-notes", "quarterly_planning.release_tools.2026_12_07.notes.txt")
	os.MkdirAll(filepath.Dir(notes), 0o755)
	content := "Quarterly planning\n\n- ship the phone inbox\n- review the gateway tiers\n- hire two engineers\n" + strings.Repeat("more notes on the plan\n", 30)
	type page struct {
		name     string
		r        *countersign.Request
		once     []string // texts shown exactly once
		firstArg string   // the value of the first argument, above the description
	}
	pages := []page{
		{name: "rm", r: e.background(t, "", func(r *countersign.Request) bool { return r.Kind == countersign.KindRm && !r.Protected },
			"rm", "-r", "build"), once: []string{"rm -r build", "recursive deletion", filepath.Join(e.project, "build")}},
		{name: "rm-passkey", r: e.backgroundIn(t, e.home, "", func(r *countersign.Request) bool { return r.Kind == countersign.KindRm && r.Protected },
			"rm", "-r", ".ssh"), once: []string{"rm -r .ssh"}},
		{name: "bash", r: e.background(t, e.hookInput("Bash", `{"command":"git clean -fdx && make -C src/internal/release-tools all","description":"Clean and rebuild the release tools"}`),
			func(r *countersign.Request) bool { return r.Action == "Bash" }, "hook", "claude", "--timeout", "120"),
			once: []string{"git clean -fdx && make -C src/internal/release-tools all"}},
		{name: "edit", r: e.background(t, e.hookInput("Edit", fmt.Sprintf(`{"file_path":%q,"old_string":"export PATH=$PATH","new_string":"export PATH=$HOME/bin:$PATH","replace_all":false}`, filepath.Join(e.home, ".bashrc"))),
			func(r *countersign.Request) bool { return r.Action == "Edit" }, "hook", "claude", "--timeout", "120"),
			once: []string{"export PATH=$HOME/bin:$PATH", "export PATH=$PATH"}},
		{name: "write", r: e.background(t, e.hookInput("Write", fmt.Sprintf(`{"file_path":%q,"content":"[release]\nchannel = \"stable\"\nnotify = true\n"}`, filepath.Join(e.home, ".config", "release-tools", "settings.toml"))),
			func(r *countersign.Request) bool { return r.Action == "Write" }, "hook", "claude", "--timeout", "120"),
			once: []string{`channel = "stable"`}},
		{name: "claude-mcp", r: e.background(t, e.hookInput("mcp__github__create_issue", `{"repo":"acme/release-tools","title":"Release 2.4 is blocked","body":"The signing key expired.\nRenew it first."}`),
			func(r *countersign.Request) bool { return r.Action == "mcp__github__create_issue" }, "hook", "claude", "--timeout", "120"),
			once: []string{"acme/release-tools", "Release 2.4 is blocked", "The signing key expired."}},
		{name: "mcp", r: e.callMCP(t, "write_file", map[string]any{"path": notes, "content": content}),
			once: []string{"quarterly_planning.release_tools.2026_12_07.notes.txt", "ship the phone inbox"}, firstArg: "quarterly_planning.release_tools.2026_12_07.notes.txt"},
		{name: "mcp-upload", r: e.callMCP(t, "digest", map[string]any{"file": uploadID}),
			once: []string{"SHA-256"}, firstArg: "SHA-256"},
		{name: "passkey", r: e.callMCP(t, "create_directory", map[string]any{"path": filepath.Join(e.root, "archive", "2026")}),
			once: []string{"archive/2026"}, firstArg: "archive/2026"},
	}
	for _, p := range pages {
		for _, size := range []struct{ w, h int64 }{{360, 800}, {1280, 800}} {
			what := fmt.Sprintf("%s at %dx%d", p.name, size.w, size.h)
			do(t, ctx, what, 15*time.Second,
				chromedp.EmulateViewport(size.w, size.h),
				chromedp.Navigate(e.URL+"/approvals/"+p.r.ID),
				chromedp.WaitVisible(chromedp.CSS("section.decide")),
			)
			approve := boxOf(t, ctx, `document.querySelector('section.decide form.now button.primary')`)
			deny := boxOf(t, ctx, `[...document.querySelectorAll('section.decide form.now button')].find(b => b.textContent.trim() === 'Deny')`)
			if !approve.Found || !deny.Found || approve.Bottom > float64(size.h) || deny.Bottom > float64(size.h) {
				t.Errorf("%s: Approve %+v and Deny %+v are not within the first %d px", what, approve, deny, size.h)
			}
			text := eval[string](t, ctx, "document.body.innerText")
			if strings.Contains(text, `\x`) || strings.Contains(text, `\u`) {
				t.Errorf("%s: the page shows an escape:\n%s", what, text)
			}
			if strings.Contains(text, "What will happen") {
				t.Errorf("%s: the page still says What will happen", what)
			}
			// The window's terms name the reasons a request of the
			// same shape may have: a condition, not the reasons again.
			terms := eval[string](t, ctx, `[...document.querySelectorAll('.window-terms')].map(e => e.innerText).join(' ')`)
			for _, s := range append(p.once, p.r.RiskReasons...) {
				if n := strings.Count(text, s) - strings.Count(terms, s); n != 1 {
					t.Errorf("%s: %q is shown %d times, want once:\n%s", what, s, n, text)
				}
			}
			if p.firstArg != "" {
				arg := boxOf(t, ctx, `[...document.querySelectorAll('dl.args dd')].find(d => d.innerText.includes(`+quote(p.firstArg)+`))`)
				about := boxOf(t, ctx, `document.querySelector('details.about')`)
				if !arg.Found || !about.Found || arg.Bottom > about.Top {
					t.Errorf("%s: the first argument %+v is not above the tool's description %+v", what, arg, about)
				}
				if arg.Bottom > float64(size.h) {
					t.Errorf("%s: the first argument is below the first screen: %+v", what, arg)
				}
			}
			if size.w == 360 {
				fitsPhone(t, ctx, what)
			}
			for _, w := range midWord(t, ctx) {
				if len(w) < longestLine {
					t.Errorf("%s: %q breaks across lines mid-word", what, w)
				}
			}
			shoot(t, ctx, fmt.Sprintf("request-%s-%d", p.name, size.w))
		}
	}
	// The passkey request says why Approve is off; the Bash call offers a
	// window.
	do(t, ctx, "the passkey request", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+pages[8].r.ID), appears("needs your passkey"))
	do(t, ctx, "the window offer", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+pages[2].r.ID), appears("Approve for a while"))

	// The inbox leads each MCP card with its call.
	for _, size := range []struct{ w, h int64 }{{360, 800}, {1280, 800}} {
		do(t, ctx, "the inbox", 10*time.Second, chromedp.EmulateViewport(size.w, size.h), chromedp.Navigate(e.URL+"/approvals"), appears(pages[6].r.Reference[:3]))
		card := eval[string](t, ctx, `[...document.querySelectorAll('#pending li')].find(li => li.innerText.includes('write_file')).innerText`)
		for _, want := range []string{"write_file", "on fs", "path", "quarterly_planning.release_tools.2026_12_07.notes.txt", "content", "Quarterly planning"} {
			if !strings.Contains(card, want) {
				t.Errorf("the inbox card of write_file lacks %q:\n%s", want, card)
			}
		}
		upload := eval[string](t, ctx, `[...document.querySelectorAll('#pending li')].find(li => li.innerText.includes('digest')).innerText`)
		if !strings.Contains(upload, "application/pdf · 48 bytes") {
			t.Errorf("the inbox card of digest does not show its upload:\n%s", upload)
		}
		if strings.Contains(card, "Create a new file") {
			t.Errorf("the inbox card of write_file shows the server's description:\n%s", card)
		}
		if size.w == 360 {
			fitsPhone(t, ctx, "the inbox")
		}
		shoot(t, ctx, fmt.Sprintf("inbox-%d", size.w))
	}

	// Decide: approve the write_file call, deny the others.
	do(t, ctx, "approve write_file", 15*time.Second,
		chromedp.EmulateViewport(360, 800),
		chromedp.Navigate(e.URL+"/approvals/"+pages[6].r.ID),
		press(`section.decide form.now button.primary`),
		appears("Approved by alice at"),
	)
	text := eval[string](t, ctx, "document.body.innerText")
	if !strings.Contains(text, "The agent has not used the approval yet") || strings.Contains(text, "Deny") {
		t.Errorf("the approved page does not say the approval is unused:\n%s", text)
	}
	shoot(t, ctx, "request-mcp-approved-360")
	if res, err := e.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "write_file", Arguments: map[string]any{"path": notes, "content": content}}); err != nil || res.IsError {
		t.Fatalf("the retry of write_file after the approval: %v %v", err, res)
	}
	do(t, ctx, "the used approval", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+pages[6].r.ID), appears("The agent used the approval at"))
	shoot(t, ctx, "request-mcp-consumed-360")
	for _, p := range []page{pages[0], pages[2], pages[7]} {
		do(t, ctx, "deny "+p.name, 15*time.Second,
			chromedp.Navigate(e.URL+"/approvals/"+p.r.ID),
			press(`section.decide form.now button.danger`),
			appears("Denied by alice at"),
		)
	}
	shoot(t, ctx, "request-rm-denied-360")
	do(t, ctx, "the inbox after", 10*time.Second, chromedp.Navigate(e.URL+"/approvals"), appears("Decided"))
	history := eval[string](t, ctx, `document.querySelector('ul.history').innerText`)
	for _, want := range []string{"write_file path=" + notes, "$ git clean -fdx && make -C src/internal/release-tools all", "rm -r build", "digest file=" + uploadID} {
		if !strings.Contains(history, want) {
			t.Errorf("the Decided rows lack %q:\n%s", want, history)
		}
	}
	fitsPhone(t, ctx, "the inbox after")
	shoot(t, ctx, "inbox-decided-360")

	// countersign list says it too.
	cmd := exec.Command(binary(t), "list", "--server", e.URL, "--status", "all")
	cmd.Env = home(t, "COUNTERSIGN_TOKEN="+e.token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("countersign list: %v\n%s", err, out)
	}
	for _, want := range []string{"write_file path=" + e.root, "$ git clean -fdx", "rm -r build", "Edit " + e.home, "Write " + e.home, "github/create_issue repo=acme/release-tools"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("countersign list lacks %q:\n%s", want, out)
		}
	}
}
