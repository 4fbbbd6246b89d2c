package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// mailbox stands in for the approver's e-mail: it makes the one-time
// approve link of every new request, as the e-mail channel does, and keeps
// its token for the test to open.
type mailbox struct {
	mu     sync.Mutex
	tokens map[string]string // request id → approve token
}

func (m *mailbox) Announce(_ context.Context, r *countersign.Request) ([]countersign.OutboxItem, []countersign.Link, error) {
	tokens, links := approval.NewLinks(approval.LinkApprove)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tokens[r.ID] = tokens[approval.LinkApprove]
	return nil, links, nil
}

func (m *mailbox) FollowUp(context.Context, *countersign.Request) ([]countersign.OutboxItem, error) {
	return nil, nil
}

func (m *mailbox) token(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.tokens[id]
}

// stepUpEnv is countersign serve in process under the default step-up
// policy, at http://localhost:PORT, with the MCP gateway at /mcp in front
// of @modelcontextprotocol/server-filesystem (write_file is commit by its
// annotations, create_directory external by a rule), the agent keys
// laptop (for /mcp) and stdio (for countersign mcp) of acme, and alice's
// API token.
type stepUpEnv struct {
	URL      string
	store    *sqlite.DB
	mail     *mailbox
	laptop   string // agent key
	stdio    string // agent key
	token    string // alice's approver token
	root     string // the filesystem server's root
	upstream string // its command line
}

// npmDir returns the gateway's npm test peers, or skips (fails under
// COUNTERSIGN_TEST_STRICT=1) without node or the packages.
func npmDir(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("..", "gateway", "testdata", "npm"))
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-filesystem", "package.json"))
	if nodeErr != nil || modErr != nil {
		testutil.Missing(t, "node or the npm test peers are missing; run: npm ci --prefix internal/gateway/testdata/npm")
	}
	return dir
}

// stepUpRules gives create_directory, which the filesystem server marks
// neither destructive nor open world, the external tier.
var stepUpRules = []gateway.TierRule{{Match: "fs/create_directory", Tier: gateway.TierExternal}}

func startStepUp(t *testing.T) *stepUpEnv {
	t.Helper()
	npm := npmDir(t)
	e := &stepUpEnv{mail: &mailbox{tokens: map[string]string{}}, root: t.TempDir()}
	e.upstream = "node " + filepath.Join(npm, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js") + " " + e.root
	// Localhost: an IP address is no relying party id.
	s := testserver.New(t, testserver.At(time.Now()), testserver.WallClock(), testserver.Serve(), testserver.Localhost(),
		testserver.Approval(func(_ *testserver.Server, c *approval.Config) { c.StepUp, c.Notifier = approval.DefaultStepUp, e.mail }),
		testserver.Config(func(s *testserver.Server, c *server.Config) {
			cfg := gateway.NewConfig()
			cfg.Hold = 100 * time.Millisecond
			cfg.Rules = stepUpRules
			words, err := gateway.SplitCommand(e.upstream)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Upstreams = []gateway.UpstreamConfig{{Name: "fs", Command: words}}
			serveGateway(t, s, c, cfg, false)
		}))
	e.URL, e.store = s.URL, s.World.Store
	e.laptop, e.stdio, e.token = s.Key("acme", "laptop"), s.Key("acme", "stdio"), s.ApproverToken
	return e
}

// binDir holds the countersign binary the tests build; TestMain removes
// it.
var binDir string

// countersignBinary builds the countersign binary once for the package.
var countersignBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "countersign-e2e-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	out := filepath.Join(dir, "countersign")
	if b, err := testutil.GoBuild("go", "", out, []string{"CGO_ENABLED=0"}, "github.com/countersign/countersign/cmd/countersign"); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return out, nil
})

// binary returns the countersign binary, built by the first test that
// asks.
func binary(t *testing.T) string {
	t.Helper()
	bin, err := countersignBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// home is a process environment with a home of its own, so that no
// user's approver.toml or settings leak in, plus extra.
func home(t *testing.T, extra ...string) []string {
	dir := t.TempDir()
	return append([]string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, ".config"), "PATH=" + os.Getenv("PATH")}, extra...)
}

// connect opens the two MCP sessions at once (each starts a filesystem
// server): with /mcp as the agent key laptop, and with `countersign mcp`
// asking this server with the agent key stdio, in front of its own
// filesystem server, over its stdin and stdout.
func (e *stepUpEnv) connect(t *testing.T) map[string]*mcp.ClientSession {
	t.Helper()
	config := filepath.Join(t.TempDir(), "mcp.toml")
	toml := fmt.Sprintf("hold = \"100ms\"\n\n[[upstream]]\nname = %q\ncommand = %q\n", "fs", e.upstream)
	for _, r := range stepUpRules {
		toml += fmt.Sprintf("\n[[tier]]\nmatch = %q\ntier = %q\n", r.Match, r.Tier)
	}
	if err := os.WriteFile(config, []byte(toml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "mcp", "--config", config)
	cmd.Env = home(t, "COUNTERSIGN_URL="+e.URL, "COUNTERSIGN_KEY="+e.stdio)
	cmd.Stderr = io.Discard
	transports := map[string]mcp.Transport{
		"/mcp":            &mcp.StreamableClientTransport{Endpoint: e.URL + "/mcp", HTTPClient: &http.Client{Transport: bearerRT(e.laptop)}},
		"countersign mcp": &mcp.CommandTransport{Command: cmd},
	}
	out := map[string]*mcp.ClientSession{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed []error
	for via, tr := range transports {
		wg.Go(func() {
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(t.Context(), tr, nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, fmt.Errorf("connect through %s: %w", via, err))
				return
			}
			t.Cleanup(func() { cs.Close() })
			out[via] = cs
		})
	}
	wg.Wait()
	if err := errors.Join(failed...); err != nil {
		t.Fatal(err)
	}
	return out
}

// ask calls a tool that needs a human and returns the request it filed.
func (e *stepUpEnv) ask(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *countersign.Request {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	inbox, _ := res.Meta["countersign/inbox_url"].(string)
	if res.Meta["countersign/status"] != "approval_pending" || inbox == "" {
		t.Fatalf("%s: %q (meta %v), want approval_pending with the inbox URL", tool, resultText(res), res.Meta)
	}
	r, err := e.store.Request(t.Context(), path.Base(inbox))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// approveFromTerminal runs `countersign approve REF` with alice's token and
// returns its exit error and output.
func (e *stepUpEnv) approveFromTerminal(t *testing.T, ref string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary(t), "approve", "--server", e.URL, ref)
	cmd.Env = home(t, "COUNTERSIGN_TOKEN="+e.token)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// approveByLink posts the request's e-mailed approve link, as its page's
// button does, and returns the status and the page.
func (e *stepUpEnv) approveByLink(t *testing.T, id string) (int, string) {
	t.Helper()
	token := e.mail.token(id)
	if token == "" {
		t.Fatalf("no e-mail link for %s", id)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/links/"+token, strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.URL)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestMCPCallsNeedPasskey: commit and external calls, through the gateway
// of countersign serve at /mcp and through `countersign mcp` asking the
// server over the API, are approved only with a passkey: from the
// terminal, with an approver token over the API, with the e-mailed link
// and with a plain click in the inbox each is refused with a message that
// a passkey is needed, and the request stays pending; the passkey
// approves it, and the call's retry runs.
func TestMCPCallsNeedPasskey(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startStepUp(t)
	if _, err := countersignBinary(); err != nil {
		t.Fatal(err)
	}
	sessions := e.connect(t)
	ctx := browser(t, exe)
	virtualAuthenticator(t, ctx)
	do(t, ctx, "sign in", 15*time.Second,
		chromedp.Navigate(e.URL+"/signin"),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		press(`form[action="/signin"] button`),
		appears("Waiting for you"),
	)
	do(t, ctx, "add a passkey", 15*time.Second,
		chromedp.Navigate(e.URL+"/passkeys"),
		chromedp.SendKeys(chromedp.ID("name"), "laptop"),
		chromedp.SendKeys(chromedp.ID("current-password"), password),
		press(`form[data-webauthn="register"] button`),
		appears("Passkey laptop added."),
	)
	api := client.New(e.URL, e.token)

	for _, via := range []string{"/mcp", "countersign mcp"} {
		cs := sessions[via]
		slug := strings.ReplaceAll(strings.TrimPrefix(via, "/"), " ", "-")
		for _, c := range []struct {
			tool, tier string
			args       map[string]any
			ran        func() bool
		}{
			{"write_file", "commit", map[string]any{"path": filepath.Join(e.root, slug+".txt"), "content": "approved with a passkey"},
				func() bool { _, err := os.Stat(filepath.Join(e.root, slug+".txt")); return err == nil }},
			{"create_directory", "external", map[string]any{"path": filepath.Join(e.root, slug+"-dir")},
				func() bool { _, err := os.Stat(filepath.Join(e.root, slug+"-dir")); return err == nil }},
		} {
			what := via + " " + c.tool + " (" + c.tier + ")"
			r := e.ask(t, cs, c.tool, c.args)
			ref := countersign.FormatReference(r.Reference)

			out, err := e.approveFromTerminal(t, ref)
			if err == nil || !strings.Contains(out, "needs a passkey") {
				t.Fatalf("%s: countersign approve %s without a passkey: %v\n%s", what, ref, err, out)
			}
			_, err = api.Decide(t.Context(), r.ID, client.Decision{Decision: "approve"})
			var apiErr *client.Error
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden || !strings.Contains(apiErr.Message, "needs a passkey") {
				t.Fatalf("%s: approve with the approver token: %v, want 403 saying a passkey is needed", what, err)
			}
			if status, page := e.approveByLink(t, r.ID); status != http.StatusForbidden || !strings.Contains(page, "needs a passkey") {
				t.Fatalf("%s: approve by the e-mailed link: %d, want 403 saying a passkey is needed\n%s", what, status, page)
			}
			do(t, ctx, what+": open its page", 10*time.Second, chromedp.Navigate(e.URL+"/approvals/"+r.ID), appears("needs your passkey"))
			if !strings.Contains(eval[string](t, ctx, `document.body.innerText`), "tier: "+c.tier) {
				t.Errorf("%s: the page does not show the reason tier: %s\n%s", what, c.tier, state(ctx))
			}
			eval[bool](t, ctx, postJS+"; window.post = post; true")
			if got := evalAsync[string](t, ctx, `post("`+r.ID+`", {decision: "approve"})`); !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "needs a passkey") {
				t.Fatalf("%s: a plain click on approve: %q, want 403 saying a passkey is needed", what, got)
			}
			if st := e.status(t, r.ID); st != countersign.StatusPending || c.ran() {
				t.Fatalf("%s: after the refusals the request is %s (ran: %v)", what, st, c.ran())
			}

			do(t, ctx, what+": approve with the passkey", 15*time.Second,
				chromedp.Navigate(e.URL+"/approvals/"+r.ID),
				press(`form[data-webauthn="stepup"] button`),
				appears("by alice"),
			)
			if st := e.status(t, r.ID); st != countersign.StatusApproved {
				t.Fatalf("%s: after the passkey the request is %s", what, st)
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
			if err != nil || res.IsError || !c.ran() {
				t.Fatalf("%s: the retry after the approval: %v, %q (ran: %v)", what, err, resultText(res), c.ran())
			}
		}
	}
}

func (e *stepUpEnv) status(t *testing.T, id string) countersign.Status {
	t.Helper()
	r, err := e.store.Request(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}
