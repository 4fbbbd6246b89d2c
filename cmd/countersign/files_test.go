package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// filesPublic is the public URL both replicas answer as, as behind one
// load balancer; the test sends each request to one replica's address
// with this Host.
const filesPublic = "http://countersign.test"

func filesConfig(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "mcp.toml")
	cfg := fmt.Sprintf(`[files]
purposes = ["receipt"]
[files.accept]
receipt = ["application/pdf"]

[[upstream]]
name = "books"
command = [%q]
[[upstream.files]]
tool = "digest"
arg = "file"
purposes = ["receipt"]
as = "path"
[[upstream.files]]
tool = "digest_inline"
arg = "file"
purposes = ["receipt"]
as = "base64"
`, testutil.FileServer(t))
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// browserClient is a browser's cookie jar and the Host of the public URL,
// sent to one replica or another.
type browserClient struct {
	t      *testing.T
	cookie string
}

func (b *browserClient) do(base, method, path, contentType string, body []byte) (*http.Response, []byte) {
	b.t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Host = strings.TrimPrefix(filesPublic, "http://")
	if method == http.MethodPost {
		req.Header.Set("Origin", filesPublic)
		req.Header.Set("Content-Type", contentType)
	}
	if b.cookie != "" {
		req.Header.Set("Cookie", "countersign_session="+b.cookie)
	}
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, data
}

func mcpSession(t *testing.T, base, key string) *mcp.ClientSession {
	t.Helper()
	// /mcp answers only as the public URL.
	return mcpSessionAt(t, base, key, strings.TrimPrefix(filesPublic, "http://"))
}

// mcpSessionAt opens an MCP session on base/mcp with the agent key,
// sending host as the Host.
func mcpSessionAt(t *testing.T, base, key, host string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: keyRT{key: key, host: host}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
		Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// keyRT sends every request with an agent key and a Host.
type keyRT struct{ key, host string }

func (k keyRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	r.Host = k.host
	return http.DefaultTransport.RoundTrip(r)
}

func toolText(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, *mcp.CallToolResult) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestFileReplicas: two real replicas on PostgreSQL. A page opened through
// one takes its file through the other; the gateway of the other hands
// the upload to its upstream; a link made on one downloads through the
// other. Each replica holds its own bytes under its own key.
func TestFileReplicas(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.SchemaURL(t)
	cfg := filesConfig(t)
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	kb := newBed(t)
	kb.mustRun(kb.env(), "secret-key", "create", keyFile)
	args := []string{"--database-url", dbURL, "--mcp-config", cfg, "--public-url", filesPublic, "--secret-key-file", keyFile}
	a := newBed(t).serve(args...)
	first := a.parseFirstStart()
	b := newBed(t).serve(args...)

	// The model, through replica A, asks for an upload and exports a file.
	csA := mcpSession(t, a.URL, first.key)
	_, res := toolText(t, csA, "countersign_upload_request", map[string]any{"purpose": "receipt"})
	sc, _ := res.StructuredContent.(map[string]any)
	uploadID, _ := sc["uploadId"].(string)
	page, _ := sc["url"].(string)
	if !strings.HasPrefix(page, filesPublic+"/uploads/") {
		t.Fatalf("upload request: %v", sc)
	}
	out, _ := toolText(t, csA, "export", map[string]any{"kind": "pdf"})
	m := regexp.MustCompile(`download (\{[^\n]+\})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("export: %s", out)
	}
	var link map[string]string
	json.Unmarshal([]byte(m[1]), &link)

	// The human, whose requests the balancer sends to replica B.
	br := &browserClient{t: t}
	form := url.Values{"username": {"admin"}, "password": {first.password}, "next": {strings.TrimPrefix(page, filesPublic)}}
	resp, _ := br.do(b.URL, http.MethodPost, "/signin", "application/x-www-form-urlencoded", []byte(form.Encode()))
	for _, c := range resp.Cookies() {
		if c.Name == "countersign_session" {
			br.cookie = c.Value
		}
	}
	if br.cookie == "" {
		t.Fatalf("sign in on B: %d", resp.StatusCode)
	}
	pagePath := strings.TrimPrefix(page, filesPublic)
	resp, body := br.do(b.URL, http.MethodGet, pagePath, "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), sc["reference"].(string)) {
		t.Fatalf("the page through B: %d\n%s", resp.StatusCode, body)
	}
	csrf := csrfRE.FindStringSubmatch(string(body))[1]
	receipt := []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n")
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("csrf", csrf)
	fw, _ := mw.CreateFormFile("file", "receipt.pdf")
	fw.Write(receipt)
	mw.Close()
	resp, body = br.do(b.URL, http.MethodPost, pagePath, mw.FormDataContentType(), mp.Bytes())
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("upload through B: %d\n%s", resp.StatusCode, body)
	}

	// The model's next call goes to B: B's gateway gets the upload from A.
	csB := mcpSession(t, b.URL, first.key)
	sum := sha256.Sum256(receipt)
	for _, tool := range []string{"digest", "digest_inline"} {
		got, _ := toolText(t, csB, tool, map[string]any{"file": uploadID})
		if !strings.Contains(got, "sha256="+hex.EncodeToString(sum[:])) {
			t.Fatalf("%s through B: %s", tool, got)
		}
	}

	// The link made on A downloads through B.
	resp, body = br.do(b.URL, http.MethodGet, strings.TrimPrefix(link["url"], filesPublic), "", nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, receipt) || resp.Header.Get("Content-Security-Policy") != "default-src 'none'; sandbox" {
		t.Fatalf("the link through B: %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	// Without a session, B answers with the sign-in, not the file.
	anon := &browserClient{t: t}
	if resp, _ := anon.do(b.URL, http.MethodGet, strings.TrimPrefix(link["url"], filesPublic), "", nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the link through B without a session: %d", resp.StatusCode)
	}
	// The internal route answers nothing to anyone without the replicas'
	// HMAC, even with the agent's key.
	id := strings.TrimPrefix(uploadID, "upload:")
	if code, _ := call(t, "GET", a.URL+"/internal/uploads/"+id, first.key, ""); code != http.StatusNotFound {
		t.Fatalf("the internal route without the HMAC: %d", code)
	}
}

// TestFilesRestart: a restart voids every upload page, upload and link,
// and empties the folder of the sealed bytes.
func TestFilesRestart(t *testing.T) {
	t.Parallel()
	cfg := filesConfig(t)
	bd := newBed(t)
	s := bd.serve("--mcp-config", cfg, "--public-url", filesPublic)
	first := s.parseFirstStart()
	cs := mcpSession(t, s.URL, first.key)
	_, res := toolText(t, cs, "countersign_upload_request", map[string]any{"purpose": "receipt"})
	sc, _ := res.StructuredContent.(map[string]any)
	uploadID, _ := sc["uploadId"].(string)
	pagePath := strings.TrimPrefix(sc["url"].(string), filesPublic)
	_, res2 := toolText(t, cs, "countersign_upload_request", map[string]any{"purpose": "receipt"})
	sc2, _ := res2.StructuredContent.(map[string]any)
	openPage := strings.TrimPrefix(sc2["url"].(string), filesPublic)
	out, _ := toolText(t, cs, "export", map[string]any{"kind": "pdf"})
	m := regexp.MustCompile(`download (\{[^\n]+\})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("export: %s", out)
	}
	var link map[string]string
	json.Unmarshal([]byte(m[1]), &link)
	linkPath := strings.TrimPrefix(link["url"], filesPublic)

	br := &browserClient{t: t}
	form := url.Values{"username": {"admin"}, "password": {first.password}, "next": {pagePath}}
	resp, _ := br.do(s.URL, http.MethodPost, "/signin", "application/x-www-form-urlencoded", []byte(form.Encode()))
	for _, c := range resp.Cookies() {
		if c.Name == "countersign_session" {
			br.cookie = c.Value
		}
	}
	_, body := br.do(s.URL, http.MethodGet, pagePath, "", nil)
	csrf := csrfRE.FindStringSubmatch(string(body))[1]
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("csrf", csrf)
	fw, _ := mw.CreateFormFile("file", "receipt.pdf")
	fw.Write([]byte("%PDF-1.4\n%%EOF\n"))
	mw.Close()
	if resp, body := br.do(s.URL, http.MethodPost, pagePath, mw.FormDataContentType(), mp.Bytes()); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("upload: %d\n%s", resp.StatusCode, body)
	}
	folder := filepath.Join(bd.data, "files")
	if entries, _ := os.ReadDir(folder); len(entries) != 2 {
		t.Fatalf("before the restart the folder holds %d files, want 2 (the upload and the link)", len(entries))
	}

	s.stopClean()
	s = bd.serve("--mcp-config", cfg, "--public-url", filesPublic)
	if entries, _ := os.ReadDir(folder); len(entries) != 0 {
		t.Fatalf("after the restart the folder holds %d files", len(entries))
	}
	for _, p := range []string{pagePath, openPage, linkPath} {
		if resp, _ := br.do(s.URL, http.MethodGet, p, "", nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("after the restart %s answers %d, want 404", p, resp.StatusCode)
		}
	}
	cs = mcpSession(t, s.URL, first.key)
	if got, _ := toolText(t, cs, "digest", map[string]any{"file": uploadID}); !strings.Contains(got, "no such file") {
		t.Fatalf("the upload after the restart: %s", got)
	}
}
