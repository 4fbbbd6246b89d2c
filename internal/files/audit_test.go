package files

import (
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// auditedStore is a file store whose audit entries go to a real SQLite
// store holding the account of p.
func auditedStore(t *testing.T) (*Store, *sqlite.DB, Principal, *testutil.LogBuffer) {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	acc := &countersign.Account{ID: countersign.NewID("acc_"), Name: "acme", CreatedAt: time.Now()}
	if err := db.CreateAccount(t.Context(), acc); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.LogBuffer{}
	s, err := Open(Config{Audit: db, Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return s, db, Principal{Account: acc.ID, Key: "key_a"}, logs
}

// TestAuditEntries: each fact is one entry of the record's account with
// exactly its fields, never the id or the name.
func TestAuditEntries(t *testing.T) {
	s, db, p, _ := auditedStore(t)
	ctx := t.Context()
	up := upload(t, s, p, "secret-plan.pdf", pdf)
	dl, err := s.PutDownload(p, "invoice.pdf", "application/pdf", pdf)
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{s.AuditUploaded(ctx, up, "alice"), s.AuditUsed(ctx, up, "key_a"),
		s.AuditKept(ctx, dl, "key_a"), s.AuditDownloaded(ctx, dl, "alice")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	entries, err := db.AuditLog(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	facts := `"kind":"application/pdf","size":` + strconv.Itoa(len(pdf)) + `,"sha256":"` + up.SHA256 + `"}`
	want := []string{
		"file_uploaded approver:alice " + `{"reference":"` + up.Reference + `",` + facts,
		"file_used key:key_a " + `{"reference":"` + up.Reference + `","sha256":"` + up.SHA256 + `"}`,
		"file_kept key:key_a " + `{"reference":"` + dl.Reference + `",` + facts,
		"file_downloaded approver:alice " + `{"reference":"` + dl.Reference + `"}`,
	}
	if len(entries) != len(want) {
		t.Fatalf("%d entries, want %d", len(entries), len(want))
	}
	for i, e := range entries {
		if got := e.Event + " " + e.Actor + " " + e.Detail; got != want[i] || e.AccountID != p.Account || e.RequestID != "" {
			t.Errorf("entry %d: %s (account %s, request %q)\nwant %s", i+1, got, e.AccountID, e.RequestID, want[i])
		}
		for _, secret := range []string{up.ID, dl.ID, "secret-plan", "invoice"} {
			if strings.Contains(e.Detail+e.Actor+e.Event, secret) {
				t.Errorf("entry %d holds %q", i+1, secret)
			}
		}
	}
}

// TestAuditFailsClosed: an upload or a kept file whose entry cannot be
// written is not kept; the error names the reference only.
func TestAuditFailsClosed(t *testing.T) {
	s, db, p, logs := auditedStore(t)
	ctx := t.Context()
	up := upload(t, s, p, "secret-plan.pdf", pdf)
	dl, err := s.PutDownload(p, "invoice.pdf", "application/pdf", pdf)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	wantCode(t, "AuditUploaded without a store", s.AuditUploaded(ctx, up, "alice"), countersign.EINTERNAL)
	wantCode(t, "AuditKept without a store", s.AuditKept(ctx, dl, "key_a"), countersign.EINTERNAL)
	for _, rec := range []*Record{up, dl} {
		_, err := s.Lookup(p.Account, rec.ID)
		wantCode(t, "a record the audit log does not hold", err, countersign.ENOTFOUND)
	}
	if s.usage(p.Account).records != 0 || s.usage(p.Account).bytes != 0 {
		t.Errorf("the dropped records still take room: %+v", *s.usage(p.Account))
	}
	if !strings.Contains(logs.String(), "not written to the audit log") || strings.Contains(logs.String(), "secret-plan") {
		t.Errorf("the log:\n%s", logs)
	}
}
