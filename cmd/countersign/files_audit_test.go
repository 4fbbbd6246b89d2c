package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// TestFilesAudit: file transfer writes its facts to the audit log, and
// only those ADR 0008 allows. A page's upload (reference, kind, size,
// SHA-256; the approver), each tool call that gets the upload (reference,
// SHA-256; the key), an upstream's file kept for download (reference,
// kind, size, SHA-256; the key) and its download (reference; the
// approver) are one entry each; no entry, and no line of the server's
// logs, holds a record's id or a file's name; `audit verify` still finds
// the chain intact.
func TestFilesAudit(t *testing.T) {
	t.Parallel()
	cfg := filesConfig(t)
	bd := newBed(t)
	s := bd.serve("--mcp-config", cfg, "--public-url", filesPublic)
	first := s.parseFirstStart()
	cs := mcpSession(t, s.URL, first.key)

	// The model asks for an upload and exports a file (invoice.pdf).
	_, res := toolText(t, cs, "countersign_upload_request", map[string]any{"purpose": "receipt"})
	sc, _ := res.StructuredContent.(map[string]any)
	uploadArg, _ := sc["uploadId"].(string)
	uploadRef, _ := sc["reference"].(string)
	pagePath := strings.TrimPrefix(fmt.Sprint(sc["url"]), filesPublic)
	out, _ := toolText(t, cs, "export", map[string]any{"kind": "pdf"})
	m := regexp.MustCompile(`download (\{[^\n]+\})`).FindStringSubmatch(out)
	if m == nil || uploadArg == "" || uploadRef == "" {
		t.Fatalf("upload request %v, export %s", sc, out)
	}
	var link map[string]string
	json.Unmarshal([]byte(m[1]), &link)
	linkPath := strings.TrimPrefix(link["url"], filesPublic)
	uploadID := strings.TrimPrefix(uploadArg, "upload:")
	linkID := strings.TrimPrefix(linkPath, "/files/")

	// The human uploads secret-plan.pdf and downloads the link.
	br := &browserClient{t: t}
	form := url.Values{"username": {first.approver}, "password": {first.password}, "next": {pagePath}}
	resp, _ := br.do(s.URL, http.MethodPost, "/signin", "application/x-www-form-urlencoded", []byte(form.Encode()))
	for _, c := range resp.Cookies() {
		if c.Name == "countersign_session" {
			br.cookie = c.Value
		}
	}
	_, body := br.do(s.URL, http.MethodGet, pagePath, "", nil)
	csrf := csrfRE.FindStringSubmatch(string(body))
	if br.cookie == "" || csrf == nil {
		t.Fatalf("sign in and open the page: %d\n%s", resp.StatusCode, body)
	}
	receipt := []byte("%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n% the plan\n")
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("csrf", csrf[1])
	fw, _ := mw.CreateFormFile("file", "secret-plan.pdf")
	fw.Write(receipt)
	mw.Close()
	if resp, body := br.do(s.URL, http.MethodPost, pagePath, mw.FormDataContentType(), mp.Bytes()); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("upload: %d\n%s", resp.StatusCode, body)
	}
	sum := sha256.Sum256(receipt)
	receiptSum := hex.EncodeToString(sum[:])
	// Two calls get the upload: as a path (whose last element is the
	// file's name) and inline.
	for _, tool := range []string{"digest", "digest_inline"} {
		if got, _ := toolText(t, cs, tool, map[string]any{"file": uploadArg}); !strings.Contains(got, "sha256="+receiptSum) {
			t.Fatalf("%s: %s", tool, got)
		}
	}
	resp, kept := br.do(s.URL, http.MethodGet, linkPath, "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("download: %d", resp.StatusCode)
	}
	keptSum := sha256.Sum256(kept)

	// Verification reads beside the running server, and after it.
	intact := regexp.MustCompile(`^audit log intact: 5 entries, head 5 [0-9a-f]{64}\n`)
	if got := bd.mustRun(bd.env(), "audit", "verify", "--data", bd.data); !intact.MatchString(got) {
		t.Errorf("audit verify while serving: %q", got)
	}
	s.stopClean()
	if got := bd.mustRun(bd.env(), "audit", "verify", "--data", bd.data); !intact.MatchString(got) {
		t.Errorf("audit verify after the run: %q", got)
	}

	db := openDB(t, bd.data)
	var keyID, accountID string
	if err := db.QueryRow(`SELECT id, account_id FROM agent_keys`).Scan(&keyID, &accountID); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT account_id, request_id, event, actor, detail FROM audit_log ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var account, request, event, actor, detail string
		if err := rows.Scan(&account, &request, &event, &actor, &detail); err != nil {
			t.Fatal(err)
		}
		got = append(got, strings.Join([]string{account, request, event, actor, detail}, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	entry := func(event, actor, detail string) string {
		return strings.Join([]string{accountID, "", event, actor, detail}, " | ")
	}
	pdf := fmt.Sprintf(`"kind":"application/pdf","size":%d,"sha256":"%s"`, len(kept), hex.EncodeToString(keptSum[:]))
	want := []string{
		entry("file_kept", "key:"+keyID, `{"reference":"`+link["reference"]+`",`+pdf+`}`),
		entry("file_uploaded", "approver:"+first.approver, fmt.Sprintf(`{"reference":"%s","kind":"application/pdf","size":%d,"sha256":"%s"}`, uploadRef, len(receipt), receiptSum)),
		entry("file_used", "key:"+keyID, `{"reference":"`+uploadRef+`","sha256":"`+receiptSum+`"}`),
		entry("file_used", "key:"+keyID, `{"reference":"`+uploadRef+`","sha256":"`+receiptSum+`"}`),
		entry("file_downloaded", "approver:"+first.approver, `{"reference":"`+link["reference"]+`"}`),
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Neither an id nor a name, in the log or the server's output.
	logs := s.stdout.String() + s.stderr.String()
	if !strings.Contains(logs, uploadRef) {
		t.Fatalf("the server's logs do not name the upload %s: the check below would prove nothing\n%s", uploadRef, logs)
	}
	audit := strings.Join(got, "\n")
	for _, secret := range []string{"secret-plan", "invoice.pdf", uploadID, linkID} {
		if strings.Contains(audit, secret) {
			t.Errorf("the audit log holds %q", secret)
		}
		if strings.Contains(logs, secret) {
			t.Errorf("the server's logs hold %q", secret)
		}
	}
}
