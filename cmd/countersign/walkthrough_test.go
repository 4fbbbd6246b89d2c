package main

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil"
)

// readmeRequest is the agent's request of docs/api.md's curl walk-through.
const readmeRequest = `{"kind":"rm","action":"rm -rf /var/www/old","arguments":{"targets":["/var/www/old"]},
       "risk_reasons":["recursive deletion (-r/-R)","protected path: /var/www"],
       "context":{"user":"deploy","host":"prod-01","cwd":"/home/deploy"}}`

// TestReadmeWalkthrough follows "Five minutes with curl" with the real
// binary as server and as the approver's terminal client.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	s := b.serve()
	fs := s.parseFirstStart()

	// Administration on the data directory while the server runs: by flag
	// for the key, by COUNTERSIGN_DATA for the token.
	keyOut := jsonObject(t, b.mustRun(b.env(), "key", "create", "--data", b.data, "--account", "default", "--name", "laptop", "--json"), "id", "key")
	key := keyOut["key"]
	if !agentKeyRE.MatchString(key) || !strings.HasPrefix(keyOut["id"], "key_") {
		t.Fatalf("key create --json printed %v", keyOut)
	}
	tokOut := jsonObject(t, b.mustRun(b.env("COUNTERSIGN_DATA="+b.data), "token", "create", "--approver", "admin", "--json"), "id", "token")
	token := tokOut["token"]
	if !tokenRE.MatchString(token) || !strings.HasPrefix(tokOut["id"], "tok_") {
		t.Fatalf("token create --json printed %v", tokOut)
	}
	approver := b.env("COUNTERSIGN_URL="+s.URL, "COUNTERSIGN_TOKEN="+token)

	// The agent asks.
	r := expectRequest(t, http.StatusCreated, "POST", s.URL+"/api/v1/requests", key, readmeRequest)
	if r.Status != "pending" || !referenceRE.MatchString(r.Reference) || r.Key != "laptop" || r.Kind != "rm" {
		t.Fatalf("created %+v", r)
	}
	if want := s.URL + "/approvals/" + r.ID; r.InboxURL != want {
		t.Errorf("inbox_url %q, want %q", r.InboxURL, want)
	}

	// The approver sees it.
	list := b.mustRun(approver, "list")
	if !regexp.MustCompile(`(?m)^REF\s+STATUS\s+KIND\s+TIER\s+KEY\s+EXPIRES\s+ACTION$`).MatchString(list) ||
		!regexp.MustCompile(`(?m)^`+r.Reference+`\s+pending\s+rm\s+-\s+laptop\s+\S+\s+rm -rf /var/www/old$`).MatchString(list) {
		t.Errorf("countersign list:\n%s", list)
	}

	// The agent waits; the approver approves; the wait returns approved.
	poll := longPoll(s.URL+"/api/v1/requests/"+r.ID+"?wait=30s", key, 40*time.Second)
	s.waitWaiters(1)
	if out := b.mustRun(approver, "approve", r.Reference); out != r.Reference+" approved: rm -rf /var/www/old\n" {
		t.Errorf("countersign approve printed %q", out)
	}
	if p := testutil.Receive(t, poll, "the long poll's return after the approval"); p.err != nil || p.code != http.StatusOK ||
		!strings.Contains(string(p.body), `"status":"approved"`) || !strings.Contains(string(p.body), `"decided_by":"admin"`) {
		t.Fatalf("the long poll answered %d %s (%v), want approved by admin", p.code, p.body, p.err)
	}

	// The agent uses the approval once; a second use is refused.
	if c := expectRequest(t, http.StatusOK, "POST", s.URL+"/api/v1/requests/"+r.ID+"/consume", key, ""); c.Status != "consumed" {
		t.Errorf("consume answered status %q", c.Status)
	}
	expectError(t, http.StatusConflict, "conflict", "POST", s.URL+"/api/v1/requests/"+r.ID+"/consume", key, "")
	// Another key of the same account does not even see it.
	expectError(t, http.StatusNotFound, "not_found", "GET", s.URL+"/api/v1/requests/"+r.ID, fs.key, "")

	all := b.mustRun(approver, "list", "--status", "all")
	if !regexp.MustCompile(`(?m)^` + r.Reference + `\s+consumed\s+rm\s+-\s+laptop\s+-\s+rm -rf /var/www/old$`).MatchString(all) {
		t.Errorf("countersign list --status all:\n%s", all)
	}
	if pending := b.mustRun(approver, "list"); pending != "no requests\n" {
		t.Errorf("countersign list after consumption:\n%s", pending)
	}

	// Deny another one, with the flag after the reference as in docs/api.md.
	r2 := expectRequest(t, http.StatusCreated, "POST", s.URL+"/api/v1/requests", key,
		`{"kind":"tool","action":"Bash","arguments":{"command":"git push --force"}}`)
	if out := b.mustRun(approver, "deny", r2.Reference, "--reason", "x"); out != r2.Reference+" denied: Bash\n" {
		t.Errorf("countersign deny printed %q", out)
	}
	got := expectRequest(t, http.StatusOK, "GET", s.URL+"/api/v1/requests/"+r2.ID+"?wait=5s", key, "")
	if got.Status != "denied" || got.Text != "x" || got.DecidedBy != "admin" {
		t.Errorf("the denied request is %+v, want denied by admin with text x", got)
	}
	// The first decision wins: a later approve fails with a message.
	late := b.run(approver, "approve", r2.Reference)
	if late.code != 1 || late.stdout != "" || !strings.HasPrefix(late.stderr, "countersign approve: ") {
		t.Errorf("approve after deny: exit %d, stdout %q, stderr %q; want exit 1 with a message", late.code, late.stdout, late.stderr)
	}
	expectError(t, http.StatusConflict, "conflict", "POST", s.URL+"/api/v1/requests/"+r2.ID+"/consume", key, "")

	// Credentials are never accepted in the wrong place.
	expectError(t, http.StatusForbidden, "forbidden", "POST", s.URL+"/api/v1/requests/"+r.ID+"/decision", key, `{"decision":"approve"}`)
	expectError(t, http.StatusForbidden, "forbidden", "GET", s.URL+"/api/v1/requests/"+r.ID, token, "")
	expectError(t, http.StatusUnauthorized, "unauthorized", "GET", s.URL+"/api/v1/requests", "cst_"+strings.Repeat("a", 52), "")

	// A wrong token is an error of the command, not a crash.
	bad := b.run(b.env("COUNTERSIGN_URL="+s.URL, "COUNTERSIGN_TOKEN=cst_nope"), "list")
	if bad.code != 1 || !strings.Contains(bad.stderr, "unknown or revoked") {
		t.Errorf("list with a bad token: exit %d, stderr %q", bad.code, bad.stderr)
	}

	s.stopClean()
	assertNoSecrets(t, s.stderr.String(), fs.password, fs.key, key, token)
}

// TestApproverUnreachable: the terminal client says which server it could
// not reach and how to fix it.
func TestApproverUnreachable(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	res := b.run(b.env("COUNTERSIGN_URL=http://127.0.0.1:1", "COUNTERSIGN_TOKEN=cst_x"), "approve", "K7F-2QX")
	if res.code != 1 || !strings.Contains(res.stderr, "cannot reach the countersign server at http://127.0.0.1:1") ||
		!strings.Contains(res.stderr, "COUNTERSIGN_URL") {
		t.Errorf("approve against nothing: exit %d, stderr %q", res.code, res.stderr)
	}
}
