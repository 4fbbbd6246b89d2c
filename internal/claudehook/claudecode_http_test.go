package claudehook

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// TestClaudeCodeHTTPHookKey runs the real Claude Code with the HTTP hook
// and a key the server refuses: the call is denied, with the reason, and
// does not run. The installed settings hold no key, only the name of the
// variable Claude Code reads it from.
func TestClaudeCodeHTTPHookKey(t *testing.T) {
	t.Parallel()
	r := newClaudeRig(t, rigOptions{http: true})
	settings, err := os.ReadFile(filepath.Join(r.w.home, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(settings), r.srv.agentKey) || !strings.Contains(string(settings), `"Bearer $COUNTERSIGN_KEY"`) {
		t.Errorf("settings.json: %s; want the variable, not the key", settings)
	}
	r.key = "csk_refused_key"
	out, results := r.run(nil, bash("rm -r build"))
	res := oneResult(t, out, results)
	if !res.IsError || !strings.Contains(res.Text, "refused the agent key the HTTP hook sent") || !exists(filepath.Join(r.w.project, "build")) {
		t.Errorf("the model got %+v; want the refusal and build kept", res)
	}
	if n := len(r.srv.requests(t)); n != 0 {
		t.Errorf("%d requests with a refused key", n)
	}
}

// TestClaudeCodeHTTPHookServerDown: when the HTTP hook's server cannot
// be reached, Claude Code blocks the call, since the hook `hook claude
// install --http` wrote says onFailure "block": in default mode, and in
// acceptEdits mode, which would run the delete unasked.
func TestClaudeCodeHTTPHookServerDown(t *testing.T) {
	t.Parallel()
	r := newClaudeRig(t, rigOptions{http: true})
	r.down()
	out, results := r.run(nil, bash("git push --force origin main"))
	if res := oneResult(t, out, results); !res.IsError || !strings.Contains(res.Text, `blocking because onFailure is "block"`) {
		t.Errorf("default mode, server down: the model got %+v; want the call blocked by the failed hook", res)
	}
	out, results = r.run([]string{"--permission-mode", "acceptEdits"}, bash("rm -r build"))
	res := oneResult(t, out, results)
	if !res.IsError || !strings.Contains(res.Text, `blocking because onFailure is "block"`) || !exists(filepath.Join(r.w.project, "build", "x.o")) {
		t.Errorf("acceptEdits, server down: the model got %+v; want the call blocked and build kept", res)
	}
}

// TestClaudeCodeServeHTTPHook runs the whole product: `countersign serve
// --claude-hook`, a key made by `countersign key create`, the HTTP hook
// `hook claude install --http` wrote, and the real Claude Code. The
// server's policy is its user's configuration file: a [hook] rule there
// denies a line, the built-in policy another, and a harmless line runs.
func TestClaudeCodeServeHTTPHook(t *testing.T) {
	t.Parallel()
	r := newClaudeRig(t, rigOptions{http: true, config: "[hook]\ndeny = [\"Bash(touch *)\"]\n"})
	cs := binary(t, "countersign")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env := []string{"HOME=" + r.w.home, "PATH=" + r.path, "COUNTERSIGN_DATA=" + filepath.Join(r.w.root, "data")}
	serve := exec.Command(cs, "serve", "--addr", addr, "--claude-hook", "default")
	serve.Env = env
	var log testutil.LogBuffer
	serve.Stdout, serve.Stderr = &log, &log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		serve.Process.Kill()
		serve.Wait()
	})
	url := "http://" + addr
	if !testutil.Wait(func() bool {
		var resp *http.Response
		if resp, err = http.Get(url + "/healthz"); err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, testutil.EventuallyWithin) {
		t.Fatalf("countersign serve did not come up: %v\n%s", err, log.String())
	}
	run := func(args ...string) string {
		cmd := exec.Command(cs, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("countersign %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	var created struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal([]byte(run("key", "create", "--account", "default", "--name", "claude", "--json")), &created); err != nil || created.Key == "" {
		t.Fatalf("key create: %v", err)
	}
	run("hook", "claude", "install", "--settings", filepath.Join(r.w.home, ".claude", "settings.json"), "--http", "--server", url, "--timeout", "60")
	r.url, r.key = url, created.Key

	out, results := r.run(nil, bash("touch made.txt"), bash("rm -rf /"), bash("ls"))
	if len(results) != 3 {
		t.Fatalf("the model got %+v; Claude Code said %s", results, out)
	}
	if !results[0].IsError || !strings.Contains(results[0].Text, "countersign refused this call: rule deny Bash(touch *)") || exists(filepath.Join(r.w.project, "made.txt")) {
		t.Errorf("the rule's line: the model got %+v; want the rule's refusal and no file", results[0])
	}
	if !results[1].IsError || !strings.Contains(results[1].Text, "countersign refused this call: refusing to delete /") {
		t.Errorf("rm -rf /: the model got %+v; want the policy's refusal", results[1])
	}
	if results[2].IsError || !strings.Contains(results[2].Text, "a.txt") {
		t.Errorf("ls: the model got %+v; want the listing", results[2])
	}
	if strings.Contains(log.String(), created.Key) {
		t.Error("the server logged the agent key")
	}
}
