package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstStart: `countersign serve` with no setup creates the data
// directory, prints the account, approver, password and agent key once on
// stdout, never in the log, and a second start prints nothing.
func TestFirstStart(t *testing.T) {
	t.Parallel()
	b := newBed(t)

	s := b.serve()
	fs := s.parseFirstStart()
	out := s.stdout.String()
	for _, want := range []string{
		`Created the account "default"`,
		"These are shown once and stored only as hashes.",
		"countersign token create --approver admin",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("first start stdout lacks %q:\n%s", want, out)
		}
	}
	st, err := os.Stat(b.data)
	if err != nil {
		t.Fatalf("the first start did not create the data directory: %v", err)
	}
	if perm := st.Mode().Perm(); perm != 0o700 {
		t.Errorf("data directory mode %v, want 0700", perm)
	}
	if _, err := os.Stat(filepath.Join(b.data, "countersign.db")); err != nil {
		t.Errorf("no database in the data directory: %v", err)
	}

	// The printed key is a real credential of the account "default".
	r := s.createRequest(fs.key, "deploy to staging")
	if r.Key != "default" {
		t.Errorf("request of the first key names key %q, want %q", r.Key, "default")
	}
	code, body := call(t, "GET", s.URL+"/healthz", "", "")
	if code != http.StatusOK || !strings.Contains(string(body), `"status":"ok"`) {
		t.Errorf("GET /healthz: %d %s", code, body)
	}
	s.stopClean()
	if got := s.stdout.String(); got != out {
		t.Errorf("stdout grew after the first-start message:\n%s", got)
	}
	assertNoSecrets(t, s.stderr.String(), fs.password, fs.key)

	// A second start finds the account and prints no secret; the key and
	// the pending request survived.
	s2 := b.serve()
	again := expectRequest(t, http.StatusOK, "POST", s2.URL+"/api/v1/requests", fs.key,
		`{"kind":"generic","action":"deploy to staging","context":{"user":"test","host":"ci"}}`)
	if again.ID != r.ID || again.Status != "pending" {
		t.Errorf("the identical request after a restart is %+v, want the pending %s", again, r.ID)
	}
	s2.stopClean()
	if got := s2.stdout.String(); got != "" {
		t.Errorf("the second start printed on stdout:\n%s", got)
	}
	assertNoSecrets(t, s2.stderr.String(), fs.password, fs.key)
	if !strings.Contains(s2.stderr.String(), `msg="countersign stopped"`) {
		t.Errorf("the log lacks the stop line:\n%s", s2.stderr)
	}
}
