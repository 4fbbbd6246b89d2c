package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/files"
)

// TestDownloadHeaders: a kept file is served to a session of its account
// only, always as a sandboxed attachment, at most five times.
func TestDownloadHeaders(t *testing.T) {
	t.Parallel()
	e := fSetup(t)
	html := []byte("<html><body><script>document.title='pwned'</script></body></html>")
	rec, err := e.files.PutDownload(files.Principal{Account: e.Acme.ID, Key: "key-a"}, "../page\".html", "text/html", append([]byte(nil), html...))
	if err != nil {
		t.Fatal(err)
	}
	e.get("/files/"+rec.ID).wantRedirect(t, "no session", "/signin?next=%2Ffiles%2F"+rec.ID)
	bob := e.signIn("bob")
	foreign := e.get("/files/"+rec.ID, e.as(bob.id)).want(t, "another account", http.StatusNotFound)
	if unknown := e.get("/files/nosuchid", e.as(bob.id)).want(t, "unknown", http.StatusNotFound); unknown.body != foreign.body {
		t.Error("another account's file differs from an unknown one")
	}
	alice := e.signIn("alice")
	for i := range files.LinkDownloads {
		r := e.get("/files/"+rec.ID, e.as(alice.id)).want(t, "download", http.StatusOK)
		if r.body != string(html) {
			t.Fatalf("download %d: %q", i+1, r.body)
		}
		for k, want := range map[string]string{
			"Content-Disposition":     `attachment; filename=page.html`,
			"Content-Security-Policy": "default-src 'none'; sandbox",
			"X-Content-Type-Options":  "nosniff",
			"X-Frame-Options":         "DENY",
			"Content-Type":            "text/html",
		} {
			if got := r.header.Get(k); got != want {
				t.Errorf("%s: %q, want %q", k, got, want)
			}
		}
	}
	e.get("/files/"+rec.ID, e.as(alice.id)).want(t, "a sixth download", http.StatusTooManyRequests)
}

// TestRequestPageFiles: the request of a call that carries an upload
// shows its kind, size and SHA-256, with a download link, to the account.
func TestRequestPageFiles(t *testing.T) {
	t.Parallel()
	e := fSetup(t)
	owner := files.Principal{Account: e.Acme.ID, Key: "key-a"}
	page := e.page(owner)
	up, _ := e.files.BeginUpload(e.Acme.ID, page.ID, int64(len(receipt)), files.MaxUpload)
	rec, err := up.Finish("r.pdf", append([]byte(nil), receipt...))
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"file": "upload:" + rec.ID})
	facts := fmt.Sprintf("\n\nFiles uploaded by the user:\n  file: upload %s, %s, %d bytes, SHA-256 %s", rec.Reference, rec.MIME, rec.Size, rec.SHA256)
	req := e.create(e.agentA, client.CreateInput{Kind: "mcp", Action: "books_attach", Arguments: args, Preview: "attach" + facts})
	alice := e.signIn("alice")
	r := e.get("/approvals/"+req.ID, e.as(alice.id)).want(t, "request page", http.StatusOK)
	for _, want := range []string{rec.Reference, "application/pdf", rec.SHA256, `href="/files/` + rec.ID + `"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the request page lacks %q", want)
		}
	}
	got := e.get("/files/"+rec.ID, e.as(alice.id)).want(t, "download from the request page", http.StatusOK)
	if got.body != string(receipt) {
		t.Fatal("the downloaded file differs")
	}
}

// TestRequestPageFilesOnlyCarried: the request page lists as carried only
// the uploads whose facts the call's preview holds, as the gateway writes
// them for its file arguments; an upload named elsewhere in the arguments
// (a note, another key's upload, an escaped id) is not shown as the call's
// file.
func TestRequestPageFilesOnlyCarried(t *testing.T) {
	t.Parallel()
	e := fSetup(t)
	fill := func(p files.Principal) *files.Record {
		page := e.page(p)
		up, _ := e.files.BeginUpload(p.Account, page.ID, int64(len(receipt)), files.MaxUpload)
		rec, err := up.Finish("r.pdf", append([]byte(nil), receipt...))
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	carried, named := fill(files.Principal{Account: e.Acme.ID, Key: "key-a"}), fill(files.Principal{Account: e.Acme.ID, Key: "key-a2"})
	facts := fmt.Sprintf("\n\nFiles uploaded by the user:\n  file: upload %s, %s, %d bytes, SHA-256 %s", carried.Reference, carried.MIME, carried.Size, carried.SHA256)
	// The note also copies the named upload's facts, as a model could.
	forged := fmt.Sprintf(": upload %s, %s, %d bytes, SHA-256 %s", named.Reference, named.MIME, named.Size, named.SHA256)
	args := []byte(`{"file":"upl\u006fad:` + carried.ID + `","note":"upload:` + named.ID + `","x":"` + forged + `"}`)
	req := e.create(e.agentA, client.CreateInput{Kind: "mcp", Action: "books_attach", Arguments: args, Preview: "attach\n" + string(args) + facts})
	alice := e.signIn("alice")
	r := e.get("/approvals/"+req.ID, e.as(alice.id)).want(t, "request page", http.StatusOK)
	if !strings.Contains(r.body, `href="/files/`+carried.ID+`"`) {
		t.Errorf("the page lacks the carried upload, named with an escape")
	}
	if strings.Contains(r.body, `href="/files/`+named.ID+`"`) {
		t.Errorf("the page shows as carried an upload the call names only in a note")
	}
}

// TestDownloadHead: a HEAD request (a download manager's first look)
// answers the headers without counting one of the link's downloads.
func TestDownloadHead(t *testing.T) {
	t.Parallel()
	e := fSetup(t)
	rec, err := e.files.PutDownload(files.Principal{Account: e.Acme.ID, Key: "key-a"}, "r.pdf", "", append([]byte(nil), receipt...))
	if err != nil {
		t.Fatal(err)
	}
	alice := e.signIn("alice")
	for range files.LinkDownloads + 1 {
		r := e.do(http.MethodHead, "/files/"+rec.ID, nil, e.as(alice.id)).want(t, "HEAD", http.StatusOK)
		if r.header.Get("Content-Disposition") == "" || r.header.Get("Content-Security-Policy") != "default-src 'none'; sandbox" {
			t.Fatalf("HEAD headers %v", r.header)
		}
	}
	for range files.LinkDownloads {
		e.get("/files/"+rec.ID, e.as(alice.id)).want(t, "download after the HEADs", http.StatusOK)
	}
	e.get("/files/"+rec.ID, e.as(alice.id)).want(t, "a sixth download", http.StatusTooManyRequests)
}
