package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// TestAfterTheCall: after a call ran, the hook answers nothing, whatever
// happens: a call it did not mark touches no network, a marked one is
// reported once and its mark removed, and a report that fails is said on
// standard error only.
func TestAfterTheCall(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var hits atomic.Int32
	var body []byte
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		body = make([]byte, r.ContentLength)
		r.Body.Read(body)
		http.Error(rw, `{"error":{"code":"not_found","message":"no such request"}}`, http.StatusNotFound)
	}))
	defer ts.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()

	post := `{"session_id":"s1","cwd":"` + w.project + `","hook_event_name":"PostToolUse","tool_name":"Bash",` +
		`"tool_input":{"command":"touch x"},"tool_use_id":"toolu_9","tool_response":{"stdout":""}}`
	in := &Input{SessionID: "s1", ToolUseID: "toolu_9"}
	run := func(url, input string) (int, string, string) {
		w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = url, "csk_test_never_printed"
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), &Env{Connect: connect, Stdin: strings.NewReader(input), Stdout: &stdout, Stderr: &stderr,
			Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()})
		return code, stdout.String(), stderr.String()
	}
	mark := askedMark(w.getenv, countersign.AgentClaudeCode, "s1", "toolu_9")

	for _, ev := range []string{"PostToolUse", "PostToolUseFailure"} {
		code, out, errs := run(ts.URL, strings.Replace(post, "PostToolUse", ev, 1))
		if code != 0 || out != "" || errs != "" || hits.Load() != 0 {
			t.Errorf("%s of a call not asked: exit %d, stdout %q, stderr %q, %d requests; want nothing at all", ev, code, out, errs, hits.Load())
		}
	}

	markAsked(&Env{Getenv: w.getenv, Stderr: os.Stderr}, Claude, in)
	if fi, err := os.Stat(mark); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the mark of an asked call: %v", err)
	}
	code, out, errs := run(ts.URL, post)
	if code != 0 || out != "" || errs != "" || hits.Load() != 1 || !bytes.Contains(body, []byte(`"call_id":"toolu_9"`)) ||
		!bytes.Contains(body, []byte(`"agent":"claude-code"`)) || !bytes.Contains(body, []byte(`"command":"touch x"`)) {
		t.Errorf("a marked call: exit %d, stdout %q, stderr %q, %d requests, body %s; want one report and nothing said", code, out, errs, hits.Load(), body)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the mark is still there after the report")
	}

	markAsked(&Env{Getenv: w.getenv, Stderr: os.Stderr}, Claude, in)
	code, out, errs = run(gone, post)
	if code != 0 || out != "" || !strings.Contains(errs, "countersign: cannot report what ran to "+gone) || strings.Contains(errs, "csk_test") {
		t.Errorf("a report to a server that is gone: exit %d, stdout %q, stderr %q; want exit 0, the failure on stderr only", code, out, errs)
	}
	markAsked(&Env{Getenv: w.getenv, Stderr: os.Stderr}, Claude, in)
	code, out, errs = run("", post)
	if code != 0 || out != "" || !strings.Contains(errs, "cannot report what ran: no countersign server is configured") {
		t.Errorf("a report with no server configured: exit %d, stdout %q, stderr %q; want exit 0, said on stderr", code, out, errs)
	}
	code, out, errs = run(ts.URL, `{"hook_event_name":"PostToolUse","tool_name":7}`)
	if code != 0 || out != "" || !strings.Contains(errs, "cannot report what ran") {
		t.Errorf("an input not of the documented shape: exit %d, stdout %q, stderr %q; want exit 0, said on stderr", code, out, errs)
	}
}

// TestCodexAfterTheCall: Codex's PostToolUse of a call a human was asked
// about is reported as Codex's, with the call's id and the command as it
// ran (the cover line with it, which the server takes off); one not asked
// is not reported at all.
func TestCodexAfterTheCall(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var hits atomic.Int32
	var body []byte
	ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		body = make([]byte, r.ContentLength)
		r.Body.Read(body)
		http.Error(rw, `{"error":{"code":"not_found","message":"no such request"}}`, http.StatusNotFound)
	}))
	defer ts.Close()
	cmd := "export COUNTERSIGN_APPROVAL=req_0123456789abcdef COUNTERSIGN_SESSION=s1 COUNTERSIGN_AGENT=codex\nrm -r build"
	post, _ := json.Marshal(map[string]any{"session_id": "s1", "turn_id": "t1", "cwd": w.project, "hook_event_name": "PostToolUse",
		"model": "gpt-5", "permission_mode": "bypassPermissions", "tool_name": "Bash", "tool_input": map[string]string{"command": cmd},
		"tool_use_id": "call_7", "tool_response": "done"})
	run := func() int {
		w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = ts.URL, "csk_test_never_printed"
		var stdout, stderr bytes.Buffer
		code := RunProtocol(context.Background(), &Env{Connect: connect, Stdin: bytes.NewReader(post), Stdout: &stdout, Stderr: &stderr,
			Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()}, Codex)
		if stdout.Len() != 0 || stderr.Len() != 0 {
			t.Errorf("Codex's PostToolUse: stdout %q, stderr %q; want nothing", stdout.String(), stderr.String())
		}
		return code
	}
	if code := run(); code != 0 || hits.Load() != 0 {
		t.Errorf("a call not asked: exit %d, %d reports; want none", code, hits.Load())
	}
	markAsked(&Env{Getenv: w.getenv, Stderr: os.Stderr}, Codex, &Input{SessionID: "s1", ToolUseID: "call_7"})
	if code := run(); code != 0 || hits.Load() != 1 {
		t.Fatalf("an asked call: exit %d, %d reports; want one", code, hits.Load())
	}
	var got struct {
		CallID    string `json:"call_id"`
		SessionID string `json:"session_id"`
		Agent     string
		Action    string
		Arguments struct{ Command string }
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("the report %s: %v", body, err)
	}
	if got.CallID != "call_7" || got.SessionID != "s1" || got.Agent != "codex" || got.Action != "Bash" || got.Arguments.Command != cmd {
		t.Errorf("the report is %+v, want Codex's call_7 in s1 with the command as it ran", got)
	}
}
