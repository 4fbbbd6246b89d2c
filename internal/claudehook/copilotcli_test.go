package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/server"
)

// copilotDir is the npm folder holding the real GitHub Copilot CLI, pinned
// by its lock file: npm ci --prefix internal/claudehook/testdata/npm-copilot.
const copilotDir = "testdata/npm-copilot"

// copilotCache is where Copilot unpacks the program its binary carries
// (XDG_CACHE_HOME): shared by the tests, inside node_modules, so that each
// scratch home does not hold another copy.
var copilotCache struct {
	once sync.Once
	dir  string
	err  error
}

// copilotCLI returns the real Copilot CLI and its cache directory, or ends
// the test.
func copilotCLI(t testing.TB) (string, string) {
	t.Helper()
	bin := realCLI(t, "GitHub Copilot CLI", copilotDir, "copilot")
	// The first run unpacks the program; the parallel tests wait for it.
	copilotCache.once.Do(func() {
		copilotCache.dir = filepath.Join(filepath.Dir(filepath.Dir(bin)), ".cache")
		cmd := exec.Command(bin, "--version")
		cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "XDG_CACHE_HOME=" + copilotCache.dir, "COPILOT_AUTO_UPDATE=false"}
		if out, err := cmd.CombinedOutput(); err != nil {
			copilotCache.err = fmt.Errorf("copilot --version: %v\n%s", err, out)
		}
	})
	if copilotCache.err != nil {
		t.Fatal(copilotCache.err)
	}
	return bin, copilotCache.dir
}

// copilotRig is the real Copilot CLI in a scratch home, its hook installed
// by the product in the user's hooks file, run offline against the
// scripted model (its Anthropic provider) and the real server; the rm
// wrapper is first in its shells' PATH. It shares the Claude Code rig's
// human and checks.
type copilotRig struct {
	*claudeRig
	cache   string
	capture string // where a capturing hook appends the inputs it gets
}

// newCopilotRig makes the rig; install are more flags for `hook copilot
// install`.
func newCopilotRig(t testing.TB, config string, install ...string) *copilotRig {
	t.Helper()
	bin, cache := copilotCLI(t)
	cs := binary(t, "countersign")
	w := newWorld(t)
	w.writeConfig(config)
	r := &copilotRig{claudeRig: &claudeRig{t: t, bin: bin, w: w, exited: make(chan struct{})}, cache: cache}
	r.srv = newTestServerWith(t, func(*server.Config) {})
	r.key, r.url = r.srv.agentKey, r.srv.URL
	wrapDir := filepath.Join(w.root, "bin")
	if err := os.MkdirAll(wrapDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cs, filepath.Join(wrapDir, "rm")); err != nil {
		t.Fatal(err)
	}
	r.path = wrapDir + ":" + os.Getenv("PATH")
	// Copilot's shells take their environment from a login shell, whose
	// profile puts the wrapper first, as a user's would.
	w.file(".bash_profile", "export PATH="+wrapDir+":$PATH\n")

	// The product writes the hooks file, as a user installs the hook: it
	// runs countersign-agent, beside countersign, which hands a call that
	// needs asking to countersign. A shorter timeout than the default
	// ends a call asked by mistake in a minute.
	args := append([]string{"hook", "copilot", "install", "--timeout", "60"}, install...)
	cmd := exec.Command(cs, args...)
	cmd.Env = []string{"HOME=" + w.home, "PATH=" + r.path}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("countersign %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if data, _ := os.ReadFile(filepath.Join(w.home, ".copilot", "hooks", "countersign.json")); !strings.Contains(string(data), filepath.Join(filepath.Dir(cs), "countersign-agent")+" hook copilot --timeout") {
		t.Fatalf("install wrote no hook running countersign-agent in ~/.copilot/hooks/countersign.json:\n%s", data)
	}
	return r
}

// captureInputs adds a hook beside countersign's that keeps every input
// of the events it gets.
func (r *copilotRig) captureInputs(events ...string) {
	r.capture = filepath.Join(r.w.root, "inputs.jsonl")
	hooks := map[string]any{}
	for _, ev := range events {
		hooks[ev] = []any{map[string]any{"type": "command", "bash": "{ cat; echo; } >> " + r.capture, "timeoutSec": 30}}
	}
	data, _ := json.Marshal(map[string]any{"version": 1, "hooks": hooks})
	r.w.file(".copilot/hooks/capture.json", string(data))
}

// run runs `copilot -p` in the project with the script and returns its
// output and the model's view of each call's result.
func (r *copilotRig) run(args []string, script ...toolUse) (string, []toolResult) {
	r.t.Helper()
	api := newModelAPI(r.t, script...)
	claudeSlots <- struct{}{}
	defer func() { <-claudeSlots }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, append([]string{"-p", "do the task", "--no-auto-update"}, args...)...)
	cmd.Dir = r.w.project
	cmd.Env = []string{"HOME=" + r.w.home, "PWD=" + r.w.project, "PATH=" + r.path, "XDG_CACHE_HOME=" + r.cache,
		"COPILOT_OFFLINE=true", "COPILOT_AUTO_UPDATE=false", "COPILOT_PROVIDER_TYPE=anthropic", "COPILOT_PROVIDER_BASE_URL=" + api.URL,
		"COPILOT_PROVIDER_API_KEY=sk-ant-test", "COPILOT_MODEL=claude-sonnet-4.5",
		"COUNTERSIGN_URL=" + r.url, "COUNTERSIGN_KEY=" + r.key}
	// The npm loader runs the native binary as its child: a run that
	// overstays is ended as a process group, and its output no longer
	// awaited after that.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	close(r.exited)
	r.exited = make(chan struct{}) // for the next run
	if err != nil {
		r.t.Logf("copilot: %v", err)
		logs, _ := filepath.Glob(filepath.Join(r.w.home, ".copilot", "logs", "*.log"))
		for _, l := range logs {
			d, _ := os.ReadFile(l)
			lines := strings.Split(string(d), "\n")
			r.t.Logf("the end of %s:\n%s", l, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	}
	return out.String(), api.Results()
}

// captured returns the inputs the capturing hook kept.
func (r *copilotRig) captured() []map[string]any {
	r.t.Helper()
	saved := r.inputs
	r.inputs = r.capture
	defer func() { r.inputs = saved }()
	return r.claudeRig.captured()
}

// askedCopilot checks that a human decided exactly one request, of the
// tool, asked by Copilot in its session from the project, and returns it.
func (r *copilotRig) askedCopilot(tool string) *client.Request {
	return r.srv.askedOnce(r.t, countersign.AgentCopilot, r.w.project, tool)
}

// shell is a scripted call of Copilot's shell tool.
func shell(command string) toolUse {
	return toolUse{Name: "bash", Input: map[string]any{"command": command, "description": "run " + command}}
}

// TestCopilotCLI drives the real GitHub Copilot CLI (pinned in
// testdata/npm-copilot/package-lock.json) offline against a scripted
// model, with the hook `countersign hook copilot install` wrote and the
// real server where a human decides. What the model sees and what ran
// are checked, not the hook's JSON.
func TestCopilotCLI(t *testing.T) {
	t.Parallel()
	t.Run("risky line denied", func(t *testing.T) {
		t.Parallel()
		r := newCopilotRig(t, "")
		wait := r.human(client.Decision{Decision: "deny", Text: "keep build: the release needs it"})
		out, results := r.run(nil, shell("rm -r build"))
		wait()
		res := oneResult(t, out, results)
		q := r.askedCopilot("Bash")
		want := fmt.Sprintf("Denied by preToolUse hook: countersign: alice denied this call (%s): keep build: the release needs it", q.Reference)
		if !strings.Contains(res.Text, want) {
			t.Errorf("the model got %+v; want %q", res, want)
		}
		if q.Status != "denied" || !exists(filepath.Join(r.w.project, "build", "x.o")) {
			t.Errorf("request %s, build there: %v; want it denied and build kept", q.Status, exists(filepath.Join(r.w.project, "build")))
		}
	})
	t.Run("risky line approved", func(t *testing.T) {
		t.Parallel()
		r := newCopilotRig(t, "")
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run(nil, shell("rm -r build"))
		wait()
		res := oneResult(t, out, results)
		q := r.askedCopilot("Bash")
		if strings.Contains(res.Text, "enied") || exists(filepath.Join(r.w.project, "build")) {
			t.Errorf("the model got %+v, build there: %v; want the line run", res, exists(filepath.Join(r.w.project, "build")))
		}
		// The line ran through the rm wrapper first in the shell's PATH,
		// which the approval covered, in Copilot's session: asked once.
		var covered int
		for _, rq := range r.srv.requests(t) {
			if rq.Kind == "rm" && rq.DecidedBy == countersign.DecidedByCoverage && rq.Status == "consumed" {
				covered++
			}
		}
		if q.Status != "consumed" || covered != 1 {
			t.Errorf("the hook's request %s, %d wrapper requests covered; want consumed and 1; the model got %q", q.Status, covered, res.Text)
		}
	})
	t.Run("harmless line not asked", func(t *testing.T) {
		t.Parallel()
		r := newCopilotRig(t, "")
		out, results := r.run(nil, shell("ls"))
		res := oneResult(t, out, results)
		if !strings.Contains(res.Text, "a.txt") {
			t.Errorf("the model got %+v; want the listing", res)
		}
		if n := len(r.srv.requests(t)); n != 0 {
			t.Errorf("a harmless line made %d requests", n)
		}
	})
	t.Run("write outside the project", func(t *testing.T) {
		t.Parallel()
		r := newCopilotRig(t, "")
		target := filepath.Join(r.w.root, "outside.txt")
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run(nil, toolUse{Name: "create", Input: map[string]any{"path": target, "file_text": "written\n"}})
		wait()
		res := oneResult(t, out, results)
		q := r.askedCopilot("Write")
		got, _ := os.ReadFile(target)
		if string(got) != "written\n" || q.Status != "consumed" {
			t.Errorf("the model got %+v, the file holds %q, the request is %s; want it written once approved", res, got, q.Status)
		}
	})
	t.Run("edit answered", func(t *testing.T) {
		t.Parallel()
		r := newCopilotRig(t, "")
		notes := r.w.file("shared/notes.txt", "old line\n")
		wait := r.human(client.Decision{Decision: "respond", Text: "edit the project's copy instead"})
		out, results := r.run([]string{"--add-dir", filepath.Dir(notes)},
			toolUse{Name: "edit", Input: map[string]any{"path": notes, "old_str": "old line", "new_str": "new line"}})
		wait()
		res := oneResult(t, out, results)
		q := r.askedCopilot("Edit")
		got, _ := os.ReadFile(notes)
		if !strings.Contains(res.Text, "Permission denied by a PermissionRequest hook: edit the project's copy instead") ||
			string(got) != "old line\n" || q.Status != "responded" {
			t.Errorf("the model got %+v, the file holds %q, the request is %s; want the answer and no edit", res, got, q.Status)
		}
		if !strings.Contains(q.Preview, "- old line") || !strings.Contains(q.Preview, "+ new line") {
			t.Errorf("the preview does not show the change:\n%s", q.Preview)
		}
	})
	t.Run("MCP tool", func(t *testing.T) {
		t.Parallel()
		r := newCopilotRig(t, "[hook]\nask = [\"mcp__peer__*\"]\n")
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		ran := filepath.Join(r.w.root, "peer.log")
		mcpConfig, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"peer": map[string]any{
			"type": "local", "command": self, "args": []string{}, "tools": []string{"*"}, "env": map[string]string{"COUNTERSIGN_TEST_MCP_PEER": ran}}}})
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run([]string{"--additional-mcp-config", string(mcpConfig)}, toolUse{Name: "peer-echo", Input: map[string]any{"text": "hello"}})
		wait()
		res := oneResult(t, out, results)
		q := r.askedCopilot("mcp__peer__echo")
		log, _ := os.ReadFile(ran)
		if !strings.Contains(res.Text, "echo: hello") || string(log) != "hello\n" || q.Status != "consumed" {
			t.Errorf("the model got %+v, the peer ran %q, the request is %s; want the call run once approved", res, log, q.Status)
		}
	})
	// Copilot lets a call run when its hook times out: the hook answers
	// first, even with every tool allowed.
	t.Run("nobody answers", func(t *testing.T) {
		t.Parallel()
		r := newCopilotRig(t, "", "--timeout", "20")
		out, results := r.run([]string{"--allow-all-tools"}, shell("rm -r build"))
		res := oneResult(t, out, results)
		if !strings.Contains(res.Text, "Denied by preToolUse hook: countersign: the human did not answer in time") ||
			!exists(filepath.Join(r.w.project, "build", "x.o")) {
			t.Errorf("the model got %+v, build there: %v; want the hook's refusal before Copilot's timeout, and build kept",
				res, exists(filepath.Join(r.w.project, "build")))
		}
		if list := r.srv.requests(t); len(list) != 1 || list[0].Status == "pending" || list[0].Status == "consumed" {
			t.Errorf("requests %+v; want one, withdrawn", list)
		}
	})
	t.Run("window", func(t *testing.T) {
		t.Parallel()
		r := newCopilotRig(t, "")
		gitCommits(t, r.w, 3)
		wait := r.human(client.Decision{Decision: "approve", AutoApproveMinutes: 15})
		out, results := r.run(nil, shell("git reset --hard HEAD~1"), shell("git reset --hard HEAD~1"))
		wait()
		if len(results) != 2 || strings.Contains(results[0].Text, "enied") || strings.Contains(results[1].Text, "enied") {
			t.Fatalf("the model got %+v; want both resets run; Copilot said %s", results, out)
		}
		r.askedCopilot("Bash")
		var auto int
		for _, q := range r.srv.requests(t) {
			if q.AutoApproved && q.Status == "consumed" {
				auto++
			}
		}
		if head := gitHead(t, r.w); auto != 1 || head != "commit 1" {
			t.Errorf("%d requests auto-approved, HEAD at %q; want the second reset in the window and HEAD at commit 1", auto, head)
		}
	})
}

// TestCopilotCLIHookInput records the inputs Copilot gives its hooks, as
// a second hook beside countersign's keeps them: the fields
// docs/incoming-copilot.md lists, no more, no fewer.
func TestCopilotCLIHookInput(t *testing.T) {
	t.Parallel()
	r := newCopilotRig(t, "")
	r.captureInputs(CopilotPreToolUse, CopilotPermissionRequest, CopilotPostToolUse)
	r.run(nil, shell("ls"))
	in := r.captured()
	if len(in) != 3 {
		t.Fatalf("the hooks got %d inputs, want 3 (preToolUse, permissionRequest, postToolUse): %v", len(in), in)
	}
	want := [][]string{
		{"cwd", "sessionId", "timestamp", "toolArgs", "toolName"},
		{"cwd", "hookName", "permissionSuggestions", "sessionId", "timestamp", "toolInput", "toolName"},
		{"cwd", "sessionId", "timestamp", "toolArgs", "toolName", "toolResult"},
	}
	for i, v := range in {
		var keys []string
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if !slices.Equal(keys, want[i]) {
			t.Errorf("input %d: fields %v, want %v", i, keys, want[i])
		}
		if v["cwd"] != r.w.project || v["toolName"] != "bash" {
			t.Errorf("input %d: %v", i, v)
		}
	}
}

// TestCopilotCLIPreMcpToolCall runs the real Copilot with countersign's
// hook also on preMcpToolCall, beside a hook there that blocks (exit 2):
// Copilot runs the MCP tool whatever preMcpToolCall answers, so the call
// is guarded at permissionRequest, where a human is asked once, and
// countersign's hook on preMcpToolCall asks nobody again.
func TestCopilotCLIPreMcpToolCall(t *testing.T) {
	t.Parallel()
	r := newCopilotRig(t, "[hook]\nask = [\"mcp__peer__*\", \"echo\"]\n")
	data, err := os.ReadFile(filepath.Join(r.w.home, ".copilot", "hooks", "countersign.json"))
	if err != nil {
		t.Fatal(err)
	}
	var installed struct {
		Hooks map[string][]copilotEntry `json:"hooks"`
	}
	if err := json.Unmarshal(data, &installed); err != nil || len(installed.Hooks[CopilotPreToolUse]) != 1 {
		t.Fatalf("the installed hooks file: %s %v", data, err)
	}
	ours := installed.Hooks[CopilotPreToolUse][0]
	extra, _ := json.Marshal(map[string]any{"version": 1, "hooks": map[string]any{CopilotPreMcpToolCall: []any{
		ours, map[string]any{"type": "command", "bash": "cat >/dev/null; echo 'blocked by another hook' >&2; exit 2", "timeoutSec": 30}}}})
	r.w.file(".copilot/hooks/mcp-call.json", string(extra))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(r.w.root, "peer.log")
	mcpConfig, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"peer": map[string]any{
		"type": "local", "command": self, "args": []string{}, "tools": []string{"*"}, "env": map[string]string{"COUNTERSIGN_TEST_MCP_PEER": ran}}}})
	wait := r.human(client.Decision{Decision: "approve"})
	out, results := r.run([]string{"--additional-mcp-config", string(mcpConfig)}, toolUse{Name: "peer-echo", Input: map[string]any{"text": "hello"}})
	wait()
	res := oneResult(t, out, results)
	q := r.askedCopilot("mcp__peer__echo")
	log, _ := os.ReadFile(ran)
	if !strings.Contains(res.Text, "echo: hello") || string(log) != "hello\n" || q.Status != "consumed" {
		t.Errorf("the model got %+v, the peer ran %q, the request is %s; want the call run once approved", res, log, q.Status)
	}
	if n := len(r.srv.requests(t)); n != 1 {
		t.Errorf("%d requests; want the one of permissionRequest", n)
	}
}
