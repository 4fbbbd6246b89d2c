package gateway_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// filesHarness is the harness with file transfer on, and the file server
// (testdata/filesrv) as the upstream "books": digest takes its file as a
// path, digest_inline as base64, digest_uri as a data URI, attach (commit
// tier) as a path.
func filesHarness(t *testing.T) (*harness, *files.Store) {
	t.Helper()
	h := &harness{t: t, clock: &testClock{}, keys: map[string]string{}}
	cfg := gateway.NewConfig()
	cfg.Hold = 300 * time.Millisecond
	cfg.Clock = h.clock
	cfg.Files = gateway.FilesConfig{Purposes: []string{"receipt", "einvoice"},
		Accept: map[string][]string{"receipt": {"application/pdf", "image/*"}}, DownloadOver: 1 << 10}
	cfg.Upstreams = []gateway.UpstreamConfig{{Name: "books", Command: []string{testutil.FileServer(t)}, Files: []gateway.FileArg{
		{Tool: "digest", Arg: "file", Purposes: []string{"receipt"}, As: "path"},
		{Tool: "digest_inline", Arg: "file", Purposes: []string{"receipt"}, As: "base64"},
		{Tool: "digest_uri", Arg: "file", Purposes: []string{"receipt", "einvoice"}, As: "datauri"},
		{Tool: "attach", Arg: "file", Purposes: []string{"receipt"}, As: "path"},
	}}}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	fs, err := files.Open(files.Config{Clock: h.clock})
	if err != nil {
		t.Fatal(err)
	}
	h.srv = testserver.New(t, testserver.At(time.Now().UTC()), testserver.Clock(h.clock), testserver.Serve(),
		testserver.Config(func(s *testserver.Server, c *server.Config) {
			h.ctx, h.store, h.svc, h.hub, h.base = s.Ctx, s.World.Store, s.Service, s.Hub, s.URL
			for _, k := range []struct{ account, name string }{{"acme", "agent"}, {"acme", "agent2"}, {"other", "outsider"}} {
				h.keys[k.name] = s.Key(k.account, k.name)
			}
			h.alice = countersign.ApproverPrincipal{Username: "alice", AccountID: s.Acme.ID, Role: countersign.RoleAdmin}
			key, err := h.store.ServerKey(h.ctx, "mcp-request-state", 32)
			if err != nil {
				t.Fatal(err)
			}
			if h.gw, err = confirm.NewForServer(cfg, h.svc, s.Public, key, testLogger(t)); err != nil {
				t.Fatal(err)
			}
			h.gw.UseFiles(fs, s.Public)
			h.gw.Start(h.ctx, 20*time.Second)
			t.Cleanup(h.gw.Close)
			c.MCP, c.Files = h.gw.HTTPHandler(s.Auth.Agent), fs
		}))
	return h, fs
}

var receiptPDF = []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n")

// requestUpload calls the upload tool and returns the upload id it gave.
func requestUpload(t *testing.T, cs *mcp.ClientSession, purpose string) (string, map[string]any) {
	t.Helper()
	res := call(t, cs, gateway.UploadTool, map[string]any{"purpose": purpose})
	if res.IsError {
		t.Fatalf("upload request: %s", textOf(res))
	}
	sc, _ := res.StructuredContent.(map[string]any)
	id, _ := sc["uploadId"].(string)
	if !strings.HasPrefix(id, "upload:") || !strings.Contains(textOf(res), id) {
		t.Fatalf("upload request result: %s %v", textOf(res), sc)
	}
	return id, sc
}

// fill uploads data to the page, as its form would.
func fill(t *testing.T, fs *files.Store, account, uploadID string, data []byte) *files.Record {
	t.Helper()
	id := strings.TrimPrefix(uploadID, "upload:")
	up, err := fs.BeginUpload(account, id, int64(len(data)), files.MaxUpload)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := up.Finish("receipt.pdf", append([]byte(nil), data...))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

var digestLine = regexp.MustCompile(`sha256=([0-9a-f]{64}) via=(\w+) perm=(\d*) path=(.*)`)

func TestFileArguments(t *testing.T) {
	t.Parallel()
	h, fs := filesHarness(t)
	cs := h.connect(clientOpts{})
	if !slices.Contains(toolNames(t, cs), gateway.UploadTool) {
		t.Fatalf("tools: %v", toolNames(t, cs))
	}
	uploadID, sc := requestUpload(t, cs, "receipt")
	if u, _ := sc["url"].(string); !strings.HasPrefix(u, h.base+"/uploads/") || sc["reference"] == "" || sc["expiresAt"] == "" {
		t.Fatalf("structured: %v", sc)
	}
	res := call(t, cs, gateway.UploadTool, map[string]any{"purpose": "tax"})
	if !res.IsError || !strings.Contains(textOf(res), "receipt, einvoice") {
		t.Fatalf("an unknown purpose: %s", textOf(res))
	}
	// Before the upload: the model is told to wait for the user.
	res = call(t, cs, "digest", map[string]any{"file": uploadID})
	if !res.IsError || !strings.Contains(textOf(res), "nothing has been uploaded") {
		t.Fatalf("before the upload: %s", textOf(res))
	}
	acme := h.alice.AccountID
	fill(t, fs, acme, uploadID, receiptPDF)
	sum := sha256.Sum256(receiptPDF)
	want := hex.EncodeToString(sum[:])

	// As a path, in a private folder removed when the call ends.
	m := digestLine.FindStringSubmatch(textOf(call(t, cs, "digest", map[string]any{"file": uploadID})))
	if m == nil || m[1] != want || m[2] != "path" || m[3] != "700" {
		t.Fatalf("digest as a path: %v", m)
	}
	if _, err := os.Stat(m[4]); !os.IsNotExist(err) {
		t.Fatalf("the copy %s is still there after the call: %v", m[4], err)
	}
	// Inline, as base64 and as a data URI.
	for tool, via := range map[string]string{"digest_inline": "base64", "digest_uri": "datauri"} {
		m := digestLine.FindStringSubmatch(textOf(call(t, cs, tool, map[string]any{"file": uploadID})))
		if m == nil || m[1] != want || m[2] != via {
			t.Fatalf("%s: %v", tool, m)
		}
	}
	// A plain path stays a plain path; ./upload:… is one.
	for _, plain := range []string{"./upload:" + strings.TrimPrefix(uploadID, "upload:"), "notes.txt"} {
		if got := textOf(call(t, cs, "digest_inline", map[string]any{"file": plain})); got != "plain="+plain {
			t.Fatalf("plain %q: %s", plain, got)
		}
	}

	// Another key of the same account, another account: the answer for an
	// unknown id, word for word.
	unknownText := textOf(call(t, cs, "digest", map[string]any{"file": "upload:nosuchid"}))
	for _, key := range []string{"agent2", "outsider"} {
		other := h.connect(clientOpts{key: key})
		got := textOf(call(t, other, "digest", map[string]any{"file": uploadID}))
		if got != strings.ReplaceAll(unknownText, "upload:nosuchid", uploadID) || !strings.Contains(got, "no such file") {
			t.Fatalf("%s: %q, unknown: %q", key, got, unknownText)
		}
	}
	// A purpose the argument does not take.
	einvoice, _ := requestUpload(t, cs, "einvoice")
	fill(t, fs, acme, einvoice, []byte("<?xml version=\"1.0\"?><Invoice/>"))
	if res := call(t, cs, "digest", map[string]any{"file": einvoice}); !res.IsError || !strings.Contains(textOf(res), "takes a file for receipt") {
		t.Fatalf("wrong purpose: %s", textOf(res))
	}
	if m := digestLine.FindStringSubmatch(textOf(call(t, cs, "digest_uri", map[string]any{"file": einvoice}))); m == nil || m[2] != "datauri" {
		t.Fatalf("einvoice as a data URI: %v", m)
	}
}

// TestToolsListStable: the tool list is the same whatever uploads exist,
// and an upstream's tool cannot take the gateway's own tool's name.
func TestToolsListStable(t *testing.T) {
	t.Parallel()
	h, fs := filesHarness(t)
	cs := h.connect(clientOpts{})
	before := toolNames(t, cs)
	id, _ := requestUpload(t, cs, "receipt")
	fill(t, fs, h.alice.AccountID, id, receiptPDF)
	if after := toolNames(t, cs); !slices.Equal(before, after) {
		t.Fatalf("tools changed: %v, then %v", before, after)
	}
	want := []string{"attach", "countersign_upload_request", "digest", "digest_inline", "digest_uri", "export"}
	if !slices.Equal(before, want) {
		t.Fatalf("tools %v, want %v", before, want)
	}
}

// TestUploadApproval: a commit call with an upload shows the file's kind,
// size and SHA-256 to the human, and the binding covers them.
func TestUploadApproval(t *testing.T) {
	t.Parallel()
	h, fs := filesHarness(t)
	cs := h.connect(clientOpts{})
	id, _ := requestUpload(t, cs, "receipt")
	rec := fill(t, fs, h.alice.AccountID, id, receiptPDF)
	args := map[string]any{"file": id, "note": "voucher 7"}
	wantStatus(t, call(t, cs, "attach", args), "approval_pending")
	req := h.pending("attach")
	for _, want := range []string{rec.Reference, "application/pdf", "SHA-256 " + rec.SHA256, fmt.Sprintf("%d bytes", len(receiptPDF))} {
		if !strings.Contains(req.Preview, want) {
			t.Fatalf("the preview lacks %q:\n%s", want, req.Preview)
		}
	}
	// Another file, same other arguments: another call, which the approval
	// does not cover.
	id2, _ := requestUpload(t, cs, "receipt")
	fill(t, fs, h.alice.AccountID, id2, append(append([]byte(nil), receiptPDF...), "% other\n"...))
	h.decide(req.ID, countersign.DecisionApprove)
	wantStatus(t, call(t, cs, "attach", map[string]any{"file": id2, "note": "voucher 7"}), "approval_pending")
	res := call(t, cs, "attach", args)
	if m := digestLine.FindStringSubmatch(textOf(res)); m == nil || m[1] != rec.SHA256 {
		t.Fatalf("the approved call: %s", textOf(res))
	}
}

// TestDownloadLinks: a result's embedded blob becomes a link of the
// caller's account; the model never sees the bytes.
func TestDownloadLinks(t *testing.T) {
	t.Parallel()
	h, fs := filesHarness(t)
	cs := h.connect(clientOpts{})
	res := call(t, cs, "export", map[string]any{"kind": "pdf"})
	link := downloadOf(t, res)
	if !strings.HasPrefix(link["url"], h.base+"/files/") || link["reference"] == "" || link["expiresAt"] == "" {
		t.Fatalf("link %v", link)
	}
	for _, c := range res.Content {
		if _, ok := c.(*mcp.EmbeddedResource); ok {
			t.Fatal("the embedded resource reached the model")
		}
	}
	id := strings.TrimPrefix(link["url"], h.base+"/files/")
	rec, r, err := fs.Fetch(h.alice.AccountID, id)
	var data []byte
	if err == nil {
		data, _ = io.ReadAll(r)
		r.Close()
	}
	if err != nil || rec.MIME != "application/pdf" || string(data) != string(receiptPDF) || rec.Name != "invoice.pdf" {
		t.Fatalf("kept: %v %+v", err, rec)
	}
	// Beyond the account's space: said, not kept, nothing evicted. (The
	// SDK's stdio frames end at 16 MiB: 11 MiB of base64 pass.)
	downloadOf(t, call(t, cs, "export", map[string]any{"kind": "zeros", "size": 11 << 20}))
	res = call(t, cs, "export", map[string]any{"kind": "zeros", "size": 11 << 20})
	if got := textOf(res); !strings.Contains(got, "download_failed") || !strings.Contains(got, "MiB") {
		t.Fatalf("too large: %s", got)
	}
}

// downloadOf returns the download link of a result.
func downloadOf(t *testing.T, res *mcp.CallToolResult) map[string]string {
	t.Helper()
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			if rest, ok := strings.CutPrefix(tc.Text, "download "); ok {
				line, _, _ := strings.Cut(rest, "\n")
				var m map[string]string
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatal(err)
				}
				return m
			}
		}
	}
	t.Fatalf("no download link in %s", textOf(res))
	return nil
}

// TestUploadRequestLimits: the sixth open page of an account is refused
// with what to do, through the tool; another account is not affected.
func TestUploadRequestLimits(t *testing.T) {
	t.Parallel()
	h, _ := filesHarness(t)
	cs := h.connect(clientOpts{})
	cs2 := h.connect(clientOpts{key: "agent2"})
	for range files.MaxPages - 1 {
		requestUpload(t, cs, "receipt")
	}
	requestUpload(t, cs2, "receipt")
	res := call(t, cs, gateway.UploadTool, map[string]any{"purpose": "receipt"})
	if !res.IsError || !strings.Contains(textOf(res), "upload pages open already") {
		t.Fatalf("the sixth page: %s", textOf(res))
	}
	requestUpload(t, h.connect(clientOpts{key: "outsider"}), "receipt")
}
