package e2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// filesEnv is countersign serve in process with file transfer on and the
// file server (internal/gateway/testdata/filesrv) as the MCP upstream
// "books", on the shared test world, and an MCP client with the agent key
// laptop of acme.
type filesEnv struct {
	URL string
	cs  *mcp.ClientSession
}

func startFiles(t *testing.T) *filesEnv {
	t.Helper()
	s := testserver.New(t, testserver.At(time.Now()), testserver.WallClock(), testserver.Serve(),
		testserver.Config(func(s *testserver.Server, c *server.Config) {
			cfg := gateway.NewConfig()
			cfg.Files = gateway.FilesConfig{Purposes: []string{"receipt"}, Accept: map[string][]string{"receipt": {"application/pdf", "image/*"}}}
			cfg.Upstreams = []gateway.UpstreamConfig{{Name: "books", Command: []string{testutil.FileServer(t)}, Files: []gateway.FileArg{
				{Tool: "digest", Arg: "file", Purposes: []string{"receipt"}, As: "path"},
				{Tool: "digest_inline", Arg: "file", Purposes: []string{"receipt"}, As: "base64"},
			}}}
			serveGateway(t, s, c, cfg, true)
		}))

	hc := &http.Client{Transport: bearerRT(s.Key("acme", "laptop"))}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: s.URL + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return &filesEnv{URL: s.URL, cs: cs}
}

// serveGateway starts the MCP gateway of cfg on the server's service
// and public URL, with its request state key from the store, serves it at
// /mcp, and closes it when the test ends. withFiles turns file transfer
// on, its files in t.TempDir().
func serveGateway(t *testing.T, s *testserver.Server, c *server.Config, cfg *gateway.Config, withFiles bool) {
	t.Helper()
	stateKey, err := s.Store.ServerKey(t.Context(), "mcp-request-state", 32)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := confirm.NewForServer(cfg, s.Service, s.Public, stateKey, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if withFiles {
		if c.Files, err = files.Open(files.Config{Dir: filepath.Join(t.TempDir(), "files")}); err != nil {
			t.Fatal(err)
		}
		gw.UseFiles(c.Files, s.Public)
	}
	gw.Start(t.Context(), 20*time.Second)
	t.Cleanup(gw.Close)
	c.MCP = gw.HTTPHandler(s.Auth.Agent)
}

type bearerRT string

func (k bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(k))
	return http.DefaultTransport.RoundTrip(r)
}

func (e *filesEnv) call(t *testing.T, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := e.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

var (
	digestOut = regexp.MustCompile(`sha256=([0-9a-f]{64}) via=(\w+)`)
	uploadURL = regexp.MustCompile(`open (http://\S+/uploads/\S+) in`)
)

// TestBrowserFiles: a model asks for an upload, the human signs in and
// uploads through the page's file input in Chromium, the model's next
// calls pass the upload to the upstream as a path and inline; an
// upstream's embedded resource becomes a link the browser downloads, with
// exactly the headers of a kept file.
func TestBrowserFiles(t *testing.T) {
	t.Parallel()
	exe := chromium(t)
	e := startFiles(t)
	ctx := browser(t, exe)

	res := e.call(t, gateway.UploadTool, map[string]any{"purpose": "receipt"})
	m := uploadURL.FindStringSubmatch(resultText(res))
	sc, _ := res.StructuredContent.(map[string]any)
	uploadID, _ := sc["uploadId"].(string)
	if m == nil || uploadID == "" {
		t.Fatalf("upload request: %s", resultText(res))
	}
	page := m[1]

	receipt := filepath.Join(t.TempDir(), "receipt.pdf")
	body := []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n")
	os.WriteFile(receipt, body, 0o600)
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])

	// The page sends a browser without a session to sign in, and back.
	do(t, ctx, "open the upload page", 10*time.Second,
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`)),
		appears("Upload a file for your agent"),
	)
	if loc := eval[string](t, ctx, "location.href"); loc != page {
		t.Fatalf("after sign-in the browser is at %q, want %q", loc, page)
	}
	viewport(t, ctx, 360, 800)
	do(t, ctx, "reload at a phone's size", 10*time.Second, chromedp.Reload(), appears("Upload a file for your agent"))
	fitsPhone(t, ctx, "the upload page")
	shoot(t, ctx, "countersign-upload-360")
	// Who asked, and the page's expiry apart from the file's.
	if got := eval[string](t, ctx, `document.querySelector(".asked-by").textContent`); !strings.HasPrefix(got, "Asked by the agent key laptop.") {
		t.Errorf("the upload page says %q of who asked", got)
	}
	if got := eval[string](t, ctx, `[...document.querySelectorAll(".facts dt")].map(d => d.textContent + ": " + d.nextElementSibling.textContent).join("|")`); !strings.Contains(got, "This page: open until ") ||
		!strings.Contains(got, "The file: kept 30 minutes after you upload it, then removed") {
		t.Errorf("the upload page's expiries: %q", got)
	}
	do(t, ctx, "upload the file", 10*time.Second,
		chromedp.SetUploadFiles(chromedp.CSS(`input[type="file"]`), []string{receipt}),
		chromedp.Click(chromedp.CSS(`form[enctype] button[type="submit"]`)),
		appears("Received"),
	)
	if got := eval[string](t, ctx, `document.querySelector(".file-sha256").textContent`); got != want {
		t.Fatalf("the page shows SHA-256 %q, want %q", got, want)
	}
	fitsPhone(t, ctx, "the upload page after the upload")
	shoot(t, ctx, "countersign-uploaded-360")
	received := eval[string](t, ctx, `[".file-name", ".file-size", ".received .file-expiry"].map(c => document.querySelector(c).textContent).join("|")`)
	if name, size, _ := strings.Cut(received, "|"); name != "receipt.pdf" || !strings.HasPrefix(size, fmt.Sprintf("%d bytes|", len(body))) || !strings.HasSuffix(received, ", then removed") {
		t.Errorf("the page shows the received file as %q", received)
	}

	for tool, via := range map[string]string{"digest": "path", "digest_inline": "base64"} {
		m := digestOut.FindStringSubmatch(resultText(e.call(t, tool, map[string]any{"file": uploadID})))
		if m == nil || m[1] != want || m[2] != via {
			t.Fatalf("%s: %v", tool, m)
		}
	}

	// An upstream's embedded resource: a link for the model.
	out := resultText(e.call(t, "export", map[string]any{"kind": "html"}))
	rest, ok := strings.CutPrefix(out, "exporteddownload ")
	if !ok {
		t.Fatalf("export: %s", out)
	}
	line, _, _ := strings.Cut(rest, "\n")
	var link map[string]string
	if err := json.Unmarshal([]byte(line), &link); err != nil || !strings.HasPrefix(link["url"], e.URL+"/files/") {
		t.Fatalf("link %q: %v", line, err)
	}
	// The headers, as the browser receives them.
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	headers, err := chromedp.Run(hctx, chromedp.Evaluate[map[string]string](`fetch(`+quote(link["url"])+`).then(r => Object.fromEntries(r.headers))`, chromedp.EvalAwaitPromise))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"content-disposition":     "attachment; filename=page.html",
		"content-security-policy": "default-src 'none'; sandbox",
		"x-content-type-options":  "nosniff",
		"x-frame-options":         "DENY",
		"content-type":            "text/html",
	} {
		if headers[k] != want {
			t.Errorf("%s: %q, want %q", k, headers[k], want)
		}
	}
	// And the download itself: saved as a file, never rendered.
	dir := t.TempDir()
	do(t, ctx, "allow downloads", 5*time.Second, func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := cdp.Call(ctx, tg, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir, BrowserContextID: chromedp.FromContext(ctx).BrowserContextID})
		return chromedp.Void{}, err
	})
	// A navigation to an attachment ends in a download, which the browser
	// reports as an aborted page load.
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := chromedp.Do(nctx, chromedp.Navigate(link["url"])); err != nil && !strings.Contains(err.Error(), "ERR_ABORTED") {
		t.Fatalf("download: %v", err)
	}
	cancel()
	// Chromium may hold the name with an empty file before it moves the
	// finished download there: an empty file is not the download yet.
	var saved []byte
	testutil.Wait(func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "page.html"))
		saved = b
		return err == nil && len(b) > 0
	}, testutil.EventuallyWithin)
	if !strings.Contains(string(saved), "<script>") {
		t.Fatalf("the download was not saved as page.html in %s", dir)
	}
	if title := eval[string](t, ctx, "document.title"); title == "pwned" {
		t.Fatal("the downloaded HTML ran on the server's origin")
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
