package main

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestAdminWhileServing: administration writes the data directory while
// the server runs (SQLite WAL), and the server sees every change at once.
func TestAdminWhileServing(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	s := b.serve()
	fs := s.parseFirstStart()
	env := b.env("COUNTERSIGN_DATA=" + b.data)

	key := jsonObject(t, b.mustRun(env, "key", "create", "--name", "ci", "--json"), "id", "key")
	r := s.createRequest(key["key"], "build the release")
	if r.Key != "ci" {
		t.Errorf("a request of the new key names key %q", r.Key)
	}
	list := b.mustRun(env, "key", "list")
	if !regexp.MustCompile(`(?m)^ci\s+` + key["id"] + `\s+csk_\S+\s+.*\bactive$`).MatchString(list) {
		t.Errorf("key list before the revocation:\n%s", list)
	}

	if out := b.mustRun(env, "key", "revoke", "ci"); out != "revoked agent key ci\n" {
		t.Errorf("key revoke printed %q", out)
	}
	// The revoked key is refused at once, for every route.
	expectError(t, http.StatusUnauthorized, "unauthorized", "GET", s.URL+"/api/v1/requests/"+r.ID, key["key"], "")
	expectError(t, http.StatusUnauthorized, "unauthorized", "POST", s.URL+"/api/v1/requests", key["key"],
		`{"kind":"generic","action":"another"}`)
	// The other key is untouched.
	s.createRequest(fs.key, "still works")

	list = b.mustRun(env, "key", "list")
	if !regexp.MustCompile(`(?m)^ci\s+`+key["id"]+`\s+csk_\S+\s+.*\brevoked \d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`).MatchString(list) ||
		!regexp.MustCompile(`(?m)^default\s+key_\S+\s+csk_\S+\s+.*\bactive$`).MatchString(list) {
		t.Errorf("key list after the revocation:\n%s", list)
	}
	var keys []struct {
		ID      string `json:"id"`
		Name    string `json:"name"`
		Revoked bool   `json:"revoked"`
	}
	if err := json.Unmarshal([]byte(b.mustRun(env, "key", "list", "--json")), &keys); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].Name != "ci" || !keys[0].Revoked || keys[1].Name != "default" || keys[1].Revoked {
		t.Errorf("key list --json: %+v", keys)
	}
	if res := b.run(env, "key", "revoke", "ci"); res.code != 1 || res.stderr != "countersign key: agent key is already revoked\n" {
		t.Errorf("revoking twice: exit %d, stderr %q", res.code, res.stderr)
	}
	if res := b.run(env, "key", "revoke", "nobody"); res.code != 1 || res.stderr != "countersign key: agent key not found\n" {
		t.Errorf("revoking an unknown key: exit %d, stderr %q", res.code, res.stderr)
	}

	// Accounts: a bad name is refused with a message that says what a
	// name may be.
	res := b.run(env, "account", "create", "Bad Name")
	if res.code != 1 || res.stdout != "" || !strings.HasPrefix(res.stderr, "countersign account: account name must be 1 to 63 characters of a-z, 0-9") {
		t.Errorf("account create with a bad name: exit %d, stdout %q, stderr %q", res.code, res.stdout, res.stderr)
	}
	if out := b.mustRun(env, "account", "create", "team-b"); !regexp.MustCompile(`^created account team-b \(acc_\S+\)\n$`).MatchString(out) {
		t.Errorf("account create printed %q", out)
	}
	if res := b.run(env, "account", "create", "team-b"); res.code != 1 || res.stderr == "" {
		t.Errorf("creating an account twice: exit %d, stderr %q", res.code, res.stderr)
	}
	if out := b.mustRun(env, "account", "list"); !regexp.MustCompile(`(?m)^default\tacc_\S+\nteam-b\tacc_\S+\n$`).MatchString(out) &&
		!regexp.MustCompile(`(?m)^team-b\tacc_\S+\ndefault\tacc_\S+\n$`).MatchString(out) {
		t.Errorf("account list:\n%s", out)
	}
	// A key of another account works at once and sees nothing of default.
	other := jsonObject(t, b.mustRun(env, "key", "create", "--account", "team-b", "--name", "bot", "--json"), "id", "key")
	expectError(t, http.StatusNotFound, "not_found", "GET", s.URL+"/api/v1/requests/"+r.ID, other["key"], "")
	s.createRequest(other["key"], "team b asks")

	s.stopClean()
	assertNoSecrets(t, s.stderr.String(), fs.password, fs.key, key["key"], other["key"])
}

// TestUsageErrors: a command called wrongly exits 2 with a message on
// stderr and nothing on stdout.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	tests := []struct {
		args []string
		want string // on stderr
	}{
		{nil, "usage: countersign <command> [flags]"},
		{[]string{"frobnicate"}, `countersign: unknown command "frobnicate"`},
		{[]string{"key"}, "countersign key: usage: name one of: create, list, revoke"},
		{[]string{"key", "delete"}, `countersign key: usage: unknown subcommand "delete"`},
		{[]string{"key", "create", "--data", "DATA"}, "countersign key: usage: countersign key create --account A --name N [--json]"},
		{[]string{"key", "create", "--name"}, "flag needs an argument: -name"},
		{[]string{"key", "revoke", "--data", "DATA"}, "countersign key: usage: countersign key revoke"},
		{[]string{"account", "create", "--data", "DATA"}, "countersign account: usage: countersign account create NAME"},
		{[]string{"approver", "create", "--data", "DATA"}, "countersign approver: usage: countersign approver create"},
		{[]string{"token", "create", "--data", "DATA"}, "countersign token: usage: countersign token create --approver U"},
		{[]string{"audit"}, "countersign audit: usage: name one of: verify"},
		{[]string{"serve", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"serve", "--request-ttl", "forever"}, `request TTL "forever" must be a duration from 10s to 24h`},
		{[]string{"serve", "extra"}, `countersign serve: usage: unexpected argument "extra"`},
		{[]string{"approve"}, "countersign approve: usage: countersign approve REFERENCE"},
		{[]string{"approve", "K7F-2QX"}, "no approver token: pass --token, set COUNTERSIGN_TOKEN"},
		{[]string{"deny", "A", "B"}, "countersign deny: usage: countersign deny REFERENCE"},
		{[]string{"list", "--limit", "many"}, `invalid value "many" for flag -limit`},
	}
	for _, tt := range tests {
		args := make([]string, len(tt.args))
		for i, a := range tt.args {
			args[i] = strings.ReplaceAll(a, "DATA", b.data)
		}
		res := b.run(b.env(), args...)
		if res.code != 2 || res.stdout != "" || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("countersign %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, res.code, res.stdout, res.stderr, tt.want)
		}
	}
	// A usage error changes nothing: the data directory was never created.
	if _, err := os.Stat(b.data); !os.IsNotExist(err) {
		t.Errorf("a usage error created the data directory %s (stat: %v)", b.data, err)
	}
	// Help is not an error.
	if res := b.run(b.env(), "help"); res.code != 0 || !strings.Contains(res.stderr, "serve") {
		t.Errorf("countersign help: exit %d, stderr %q", res.code, res.stderr)
	}
	if res := b.run(b.env(), "key", "create", "-h"); res.code != 0 || !strings.Contains(res.stderr, "-name") {
		t.Errorf("countersign key create -h: exit %d, stderr %q", res.code, res.stderr)
	}
}
