package main

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestAuditVerify: `audit verify` finds the log intact after a run, and
// names the entry when a row was changed or the last row removed.
func TestAuditVerify(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	s := b.serve()
	fs := s.parseFirstStart()
	token := jsonObject(t, b.mustRun(b.env(), "token", "create", "--data", b.data, "--approver", "admin", "--json"), "id", "token")["token"]

	// Seven entries: three creations, an approval, a consumption, a denial
	// and a cancellation.
	a := s.createRequest(fs.key, "approve and use me")
	d := s.createRequest(fs.key, "deny me")
	c := s.createRequest(fs.key, "cancel me")
	expectRequest(t, http.StatusOK, "POST", s.URL+"/api/v1/requests/"+a.ID+"/decision", token, `{"decision":"approve"}`)
	expectRequest(t, http.StatusOK, "POST", s.URL+"/api/v1/requests/"+a.ID+"/consume", fs.key, "")
	expectRequest(t, http.StatusOK, "POST", s.URL+"/api/v1/requests/"+d.ID+"/decision", token, `{"decision":"deny","text":"no"}`)
	expectRequest(t, http.StatusOK, "POST", s.URL+"/api/v1/requests/"+c.ID+"/cancel", fs.key, "")

	// Verification reads beside the running server.
	// The data directory's store is sealed with its key file, so its
	// chain is keyed from the first entry.
	const keyed = "the chain is keyed with the secret key (an HMAC per entry): rewriting it needs the key file\n"
	intact := regexp.MustCompile(`^audit log intact: 7 entries, head 7 [0-9a-f]{64}\n` + regexp.QuoteMeta(keyed) + `$`)
	if out := b.mustRun(b.env(), "audit", "verify", "--data", b.data); !intact.MatchString(out) {
		t.Errorf("audit verify while serving: %q", out)
	}
	s.stopClean()
	if out := b.mustRun(b.env("COUNTERSIGN_DATA="+b.data), "audit", "verify"); !intact.MatchString(out) {
		t.Errorf("audit verify after the run: %q", out)
	}

	db := openDB(t, b.data)
	ctx := context.Background()
	var detail string
	if err := db.QueryRowContext(ctx, `SELECT detail FROM audit_log WHERE seq = 6`).Scan(&detail); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(detail, `"text":"no"`) {
		t.Fatalf("entry 6 is not the denial: %s", detail)
	}

	// Change the reason of the denial: entry 6 was changed.
	mustExec(t, db, `UPDATE audit_log SET detail = ? WHERE seq = 6`, `{"text":"yes"}`)
	res := b.run(b.env(), "audit", "verify", "--data", b.data)
	if res.code != 1 || res.stdout != "entry 6: was changed after it was written\n"+keyed ||
		res.stderr != "countersign audit: the audit log was changed: 1 problems\n" {
		t.Errorf("audit verify after a changed row: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	mustExec(t, db, `UPDATE audit_log SET detail = ? WHERE seq = 6`, detail)
	if out := b.mustRun(b.env(), "audit", "verify", "--data", b.data); !intact.MatchString(out) {
		t.Errorf("audit verify after undoing the change: %q", out)
	}

	// Remove the last entry: the log ends before its recorded head.
	mustExec(t, db, `DELETE FROM audit_log WHERE seq = (SELECT max(seq) FROM audit_log)`)
	res = b.run(b.env(), "audit", "verify", "--data", b.data)
	if res.code != 1 || res.stdout != "entry 6: the log ends at entry 6 but the recorded head is entry 7\n"+keyed ||
		!strings.Contains(res.stderr, "the audit log was changed") {
		t.Errorf("audit verify after removing the last row: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}

	// Remove one in the middle: the gap is named.
	mustExec(t, db, `DELETE FROM audit_log WHERE seq = 3`)
	res = b.run(b.env(), "audit", "verify", "--data", b.data)
	if res.code != 1 || !strings.Contains(res.stdout, "entry 4: entries 3 to 3 are missing\n") ||
		!strings.Contains(res.stdout, "entry 4: does not link to the entry before it\n") {
		t.Errorf("audit verify after removing a middle row: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
}

// openDB opens the data directory's database as an outside tool would.
func openDB(t *testing.T, data string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(data, "countersign.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// mustExec runs one statement that must change exactly one row.
func mustExec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	res, err := db.ExecContext(context.Background(), query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("%s changed %d rows (%v), want 1", query, n, err)
	}
}
