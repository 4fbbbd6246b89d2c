package server_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// TestFilesAuditFailsClosed: when the audit log cannot take an entry (its
// store is gone), an upload is refused and not kept, and a download
// serves no byte.
func TestFilesAuditFailsClosed(t *testing.T) {
	t.Parallel()
	broken, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "audit.db"))
	if err != nil {
		t.Fatal(err)
	}
	broken.Close()
	fs, err := files.Open(files.Config{Dir: filepath.Join(t.TempDir(), "files"), Audit: broken})
	if err != nil {
		t.Fatal(err)
	}
	e := &fEnv{ibEnv: ibSetup(t, func(c *server.Config) { c.Files = fs }), files: fs}
	owner := files.Principal{Account: e.Acme.ID, Key: "key-a"}
	alice := e.signIn("alice")

	page := e.page(owner)
	r := e.uploadFile(alice, page.ID, alice.csrf, "secret-plan.pdf", receipt).want(t, "an upload the audit log refuses", http.StatusInternalServerError)
	if strings.Contains(r.body, "secret-plan") {
		t.Errorf("the answer names the file:\n%s", r.body)
	}
	if _, err := fs.Upload(owner, page.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the unaudited upload: %v, want it gone (not_found)", err)
	}

	kept, err := fs.PutDownload(owner, "invoice.pdf", "application/pdf", append([]byte(nil), receipt...))
	if err != nil {
		t.Fatal(err)
	}
	r = e.get("/files/"+kept.ID, e.as(alice.id)).want(t, "a download the audit log refuses", http.StatusInternalServerError)
	if strings.Contains(r.body, "%PDF") {
		t.Errorf("the refused download served the file:\n%s", r.body)
	}
}
