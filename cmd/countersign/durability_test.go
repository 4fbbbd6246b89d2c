package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil"
)

// TestKill9Durability: a server killed with SIGKILL loses no request and no
// decision; agents that retry their wait against the restarted server get
// the right answer.
func TestKill9Durability(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	s := b.serve()
	fs := s.parseFirstStart()
	token := jsonObject(t, b.mustRun(b.env(), "token", "create", "--data", b.data, "--approver", "admin", "--json"), "id", "token")["token"]

	pending := s.createRequest(fs.key, "pending one")
	approved := s.createRequest(fs.key, "approved one")
	denied := s.createRequest(fs.key, "denied one")
	consumed := s.createRequest(fs.key, "consumed one")
	decide := func(r apiRequest, body, want string) {
		t.Helper()
		got := expectRequest(t, http.StatusOK, "POST", s.URL+"/api/v1/requests/"+r.Reference+"/decision", token, body)
		if got.Status != want || got.ID != r.ID {
			t.Fatalf("decision on %s: %+v, want %s", r.Reference, got, want)
		}
	}
	decide(approved, `{"decision":"approve"}`, "approved")
	decide(denied, `{"decision":"deny","text":"not on a Friday"}`, "denied")
	decide(consumed, `{"decision":"approve"}`, "approved")
	expectRequest(t, http.StatusOK, "POST", s.URL+"/api/v1/requests/"+consumed.ID+"/consume", fs.key, "")

	st := s.stop(syscall.SIGKILL)
	if ws, ok := st.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the server was not killed by SIGKILL: %v", st)
	}

	s2 := b.serve()
	get := func(r apiRequest, wait string) apiRequest {
		t.Helper()
		return expectRequest(t, http.StatusOK, "GET", s2.URL+"/api/v1/requests/"+r.ID+"?wait="+wait, fs.key, "")
	}
	// A pending request is still pending: the retried wait holds, then
	// answers pending.
	start := time.Now()
	if got := get(pending, "1s"); got.Status != "pending" || got.Reference != pending.Reference {
		t.Errorf("pending request after kill -9: %+v", got)
	}
	if held := time.Since(start); held < 900*time.Millisecond {
		t.Errorf("the wait on a pending request returned after %v, want it held about 1 s", held)
	}
	// An approved request is approved at once, and usable exactly once.
	if got := get(approved, "30s"); got.Status != "approved" || got.DecidedBy != "admin" {
		t.Errorf("approved request after kill -9: %+v", got)
	}
	if got := expectRequest(t, http.StatusOK, "POST", s2.URL+"/api/v1/requests/"+approved.ID+"/consume", fs.key, ""); got.Status != "consumed" {
		t.Errorf("consume after kill -9: %+v", got)
	}
	expectError(t, http.StatusConflict, "conflict", "POST", s2.URL+"/api/v1/requests/"+approved.ID+"/consume", fs.key, "")
	if got := get(denied, "30s"); got.Status != "denied" || got.Text != "not on a Friday" {
		t.Errorf("denied request after kill -9: %+v", got)
	}
	expectError(t, http.StatusConflict, "conflict", "POST", s2.URL+"/api/v1/requests/"+denied.ID+"/consume", fs.key, "")
	if got := get(consumed, "30s"); got.Status != "consumed" {
		t.Errorf("consumed request after kill -9: %+v", got)
	}
	expectError(t, http.StatusConflict, "conflict", "POST", s2.URL+"/api/v1/requests/"+consumed.ID+"/consume", fs.key, "")

	// The approver sees every one with its status, and can still decide
	// the pending one.
	approver := b.env("COUNTERSIGN_URL="+s2.URL, "COUNTERSIGN_TOKEN="+token)
	all := b.mustRun(approver, "list", "--status", "all")
	for ref, status := range map[string]string{
		pending.Reference: "pending", approved.Reference: "consumed", denied.Reference: "denied", consumed.Reference: "consumed",
	} {
		if !regexp.MustCompile(`(?m)^` + ref + `\s+` + status + `\s`).MatchString(all) {
			t.Errorf("list --status all lacks %s %s:\n%s", ref, status, all)
		}
	}
	if out := b.mustRun(approver, "approve", pending.Reference); out != pending.Reference+" approved: pending one\n" {
		t.Errorf("approve after restart printed %q", out)
	}
	if got := get(pending, "30s"); got.Status != "approved" {
		t.Errorf("the pending request after its approval: %+v", got)
	}
	s2.stopClean()
	if out := s2.stdout.String(); out != "" {
		t.Errorf("the restart printed on stdout:\n%s", out)
	}
	assertNoSecrets(t, s.stderr.String()+s2.stderr.String(), fs.password, fs.key, token)

	// Nothing the kill interrupted broke the audit chain.
	if out := b.mustRun(b.env(), "audit", "verify", "--data", b.data); !strings.HasPrefix(out, "audit log intact: ") {
		t.Errorf("audit verify after kill -9: %q", out)
	}
}

// TestOneServerPerDataDirectory: a second server on a data directory that
// a running server holds is refused with a message that names the first,
// and changes nothing; administration still works beside the running
// server; once the first is killed with SIGKILL, a new server starts.
func TestOneServerPerDataDirectory(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	s := b.serve()
	s.parseFirstStart()
	keys := b.mustRun(b.env(), "key", "list", "--data", b.data)

	second := b.run(b.env(), "serve", "--addr", "127.0.0.1:0", "--data", b.data)
	want := "another countersign serve (process " + strconv.Itoa(s.cmd.Process.Pid) + ") is using the data directory"
	if second.code == 0 || !strings.Contains(second.stderr, want) {
		t.Fatalf("a second server on the same data directory: exit %d, stderr %q; want a failure that says %q", second.code, second.stderr, want)
	}
	if strings.Contains(second.stderr, "countersign listening") {
		t.Errorf("the refused server listened: %s", second.stderr)
	}
	if holder, err := os.ReadFile(filepath.Join(b.data, "countersign.serve.lock")); err != nil || string(holder) != strconv.Itoa(s.cmd.Process.Pid)+"\n" {
		t.Errorf("the lock after the refused start holds %q (%v), want the first server's pid", holder, err)
	}
	// A copy into the directory the server holds is refused too.
	src := filepath.Join(t.TempDir(), "src")
	b.mustRun(b.env(), "migrate", "--data", src)
	if res := b.run(b.env(), "store", "copy", "--from", src, "--to", b.data); res.code == 0 || !strings.Contains(res.stderr, "another countersign serve") {
		t.Errorf("store copy into a served directory: exit %d, %q", res.code, res.stderr)
	}
	// Commands other than serve work while the server runs.
	b.mustRun(b.env(), "key", "create", "--data", b.data, "--account", "default", "--name", "beside")
	if got := b.mustRun(b.env(), "key", "list", "--data", b.data); got == keys || !strings.Contains(got, "beside") {
		t.Errorf("key list after key create beside a running server:\n%s", got)
	}

	s.stop(syscall.SIGKILL)
	s2 := b.serve()
	if code, body := call(t, "GET", s2.URL+"/healthz", "", ""); code != http.StatusOK {
		t.Errorf("/healthz of the server started after the kill: %d %s", code, body)
	}
}

// TestGracefulShutdown: on SIGTERM a held long poll is answered at once with
// the request's current state, and the server exits 0.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := newBed(t)
	s := b.serve()
	fs := s.parseFirstStart()
	r := s.createRequest(fs.key, "wait for me")

	poll := longPoll(s.URL+"/api/v1/requests/"+r.ID+"?wait=50s", fs.key, 60*time.Second)
	s.waitWaiters(1)

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The bound is a failure bound only: the answer comes at once.
	if p := testutil.Receive(t, poll, "the long poll's answer after SIGTERM"); p.err != nil || p.code != http.StatusOK ||
		!strings.Contains(string(p.body), `"status":"pending"`) || !strings.Contains(string(p.body), r.ID) {
		t.Errorf("the long poll at shutdown answered %d %s (%v), want 200 pending", p.code, p.body, p.err)
	}
	testutil.ReceiveOr(t, s.done, "the server's exit after SIGTERM", func() { t.Logf("stderr: %s", s.stderr) })
	if code := s.state.ExitCode(); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\nstderr: %s", code, s.stderr)
	}
	if !strings.Contains(s.stderr.String(), `msg="countersign stopped"`) {
		t.Errorf("the log lacks the stop line:\n%s", s.stderr)
	}
	assertNoSecrets(t, s.stderr.String(), fs.password, fs.key)
}
