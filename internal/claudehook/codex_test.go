package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
)

// codexDir is the npm folder holding the real Codex CLI, pinned by its
// lock file: npm ci --prefix internal/claudehook/testdata/npm-codex.
const codexDir = "testdata/npm-codex"

// codexCLI returns the real Codex CLI, or ends the test.
func codexCLI(t testing.TB) string {
	t.Helper()
	bin := realCLI(t, "Codex CLI", codexDir, "codex")
	return bin
}

// shellCall is one exec_command call the scripted model makes: Codex's
// shell tool, which its hooks see as Bash.
type shellCall struct {
	Cmd string
	// Escalate asks Codex to run the command outside its sandbox, which
	// it puts to its approval (the PermissionRequest hook).
	Escalate bool
}

// responsesAPI is a scripted OpenAI Responses API: to each request of the
// main loop it streams the next call of its script, one per turn, then
// ends the turn with text. It keeps the tool outputs Codex sends back.
type responsesAPI struct {
	URL    string
	script []shellCall

	mu      sync.Mutex
	results []string
}

// newResponsesAPI serves the script on 127.0.0.1.
func newResponsesAPI(t testing.TB, script ...shellCall) *responsesAPI {
	t.Helper()
	m := &responsesAPI{script: script}
	ts := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(ts.Close)
	m.URL = ts.URL
	return m
}

func (m *responsesAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Input []struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		} `json:"input"`
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 32<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The outputs so far, from the conversation: their number is the
	// step of the script.
	var results []string
	for _, in := range req.Input {
		if in.Type == "function_call_output" {
			results = append(results, outputText(in.Output))
		}
	}
	main := slices.ContainsFunc(req.Tools, func(t struct {
		Name string `json:"name"`
	}) bool {
		return t.Name == "exec_command"
	})
	if !main {
		m.stream(w, len(results), nil)
		return
	}
	m.mu.Lock()
	if len(results) > len(m.results) {
		m.results = results
	}
	m.mu.Unlock()
	if len(results) < len(m.script) {
		m.stream(w, len(results), &m.script[len(results)])
		return
	}
	m.stream(w, len(results), nil)
}

// outputText is a function call output as text: a string, or content
// items.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// stream writes one response as server-sent events: an exec_command call,
// or a message ending the turn.
func (m *responsesAPI) stream(w http.ResponseWriter, step int, call *shellCall) {
	id := fmt.Sprintf("resp_%d_%d", step, time.Now().UnixNano())
	var item map[string]any
	if call != nil {
		args := map[string]any{"cmd": call.Cmd}
		if call.Escalate {
			args["sandbox_permissions"] = "require_escalated"
			args["justification"] = "run " + call.Cmd
		}
		a, _ := json.Marshal(args)
		item = map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": fmt.Sprintf("call_%d", step),
			"name": "exec_command", "arguments": string(a)}
	} else {
		item = map[string]any{"type": "message", "id": "msg_" + id, "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": "done"}}}
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", v["type"], b)
	}
	event(map[string]any{"type": "response.created", "response": map[string]any{"id": id}})
	event(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	event(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	event(map[string]any{"type": "response.completed", "response": map[string]any{"id": id,
		"usage": map[string]any{"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}})
}

// Results returns the tool outputs Codex sent.
func (m *responsesAPI) Results() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.results...)
}

// codexRig is the real Codex CLI in a scratch home (HOME and CODEX_HOME),
// its hooks in CODEX_HOME/hooks.json, run against the scripted model and
// the real server; an rm wrapper (the countersign binary named rm) is
// first in its PATH.
type codexRig struct {
	t      testing.TB
	bin    string
	w      *world
	srv    *testServer
	home   string // CODEX_HOME
	path   string // PATH: the wrapper's directory first
	inputs string // where the capturing hook appends the inputs it gets
	exited chan struct{}
	// untrusted: hooks Codex does not trust are in hooks.json (the
	// capturing one), which run with --dangerously-bypass-hook-trust.
	untrusted bool
	trust     string // the config.toml install wrote
}

// codexOptions say how a rig is made.
type codexOptions struct {
	config  string // the countersign configuration file's content
	capture bool   // a capturing hook on every event, beside countersign's
	// bare: no countersign hook, only the capturing one.
	bare bool
}

func newCodexRig(t testing.TB, o codexOptions) *codexRig {
	t.Helper()
	bin := codexCLI(t)
	cs := binary(t, "countersign")
	w := newWorld(t)
	w.writeConfig(o.config)
	r := &codexRig{t: t, bin: bin, w: w, home: filepath.Join(w.home, ".codex"), exited: make(chan struct{})}
	r.srv = newTestServerWith(t, nil)
	wrapDir := filepath.Join(w.root, "bin")
	if err := os.MkdirAll(wrapDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cs, filepath.Join(wrapDir, "rm")); err != nil {
		t.Fatal(err)
	}
	r.path = wrapDir + ":" + os.Getenv("PATH")
	// Codex runs commands in a login shell (bash -lc), whose
	// /etc/profile may set PATH anew: the wrapper comes first in it by
	// the user's profile, as a user installs it.
	w.file(".profile", "export PATH="+wrapDir+":\"$PATH\"\n")
	hooks := filepath.Join(r.home, "hooks.json")
	if !o.bare {
		// The product writes the hooks and trusts them, as a user
		// installs them. A shorter timeout than the default: a call
		// asked by mistake ends the run in a minute, not ten.
		args := []string{"hook", "codex", "install", "--trust", "--timeout", "60"}
		cmd := exec.Command(cs, args...)
		cmd.Env = []string{"HOME=" + w.home, "CODEX_HOME=" + r.home, "PATH=" + r.path}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("countersign %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		trust, err := os.ReadFile(filepath.Join(r.home, "config.toml"))
		if err != nil {
			t.Fatalf("install --trust wrote no config.toml: %v", err)
		}
		r.trust = string(trust)
	}
	if o.capture || o.bare {
		r.untrusted = true
		r.inputs = filepath.Join(w.root, "inputs.jsonl")
		r.addCapture(hooks)
	}
	return r
}

// addCapture adds a hook on each event that appends its input to
// r.inputs and answers nothing.
func (r *codexRig) addCapture(hooks string) {
	r.t.Helper()
	v := map[string]any{}
	if data, err := os.ReadFile(hooks); err == nil {
		if err := json.Unmarshal(data, &v); err != nil {
			r.t.Fatal(err)
		}
	}
	if v["hooks"] == nil {
		v["hooks"] = map[string]any{}
	}
	all := v["hooks"].(map[string]any)
	for _, ev := range []string{"PreToolUse", "PermissionRequest", "PostToolUse"} {
		groups, _ := all[ev].([]any)
		all[ev] = append(groups, map[string]any{"matcher": "*", "hooks": []any{map[string]any{"type": "command",
			"command": "{ cat; echo; } >> " + r.inputs}}})
	}
	data, _ := json.Marshal(v)
	if err := os.MkdirAll(filepath.Dir(hooks), 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(hooks, data, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// codexSandboxless is how the tests run Codex: no sandbox and no
// approval prompts of its own, so that every shell call reaches
// PreToolUse and the hook alone decides, as root in CI.
var codexSandboxless = []string{"--dangerously-bypass-approvals-and-sandbox"}

// codexApproveForMe runs Codex in its workspace sandbox with approvals on
// request, routed to the PermissionRequest hook: an escalated call is
// put to it.
var codexApproveForMe = []string{"--approve-for-me"}

// run runs `codex exec` in the project with the script, and returns its
// output and the model's view of each call's output.
func (r *codexRig) run(args []string, script ...shellCall) (string, []string) {
	r.t.Helper()
	api := newResponsesAPI(r.t, script...)
	config := fmt.Sprintf(`model = "gpt-test"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted"
base_url = "%s/v1"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
`, api.URL)
	if err := os.MkdirAll(r.home, 0o755); err != nil {
		r.t.Fatal(err)
	}
	// The tables install wrote (the hooks' trust) come after the
	// model's keys, which TOML wants before any table.
	if err := os.WriteFile(filepath.Join(r.home, "config.toml"), []byte(config+"\n"+r.trust), 0o600); err != nil {
		r.t.Fatal(err)
	}
	args = append([]string{"exec", "--skip-git-repo-check", "--color", "never"}, args...)
	if r.untrusted {
		args = append(args, "--dangerously-bypass-hook-trust")
	}
	claudeSlots <- struct{}{}
	defer func() { <-claudeSlots }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, append(args, "do the task")...)
	cmd.Dir = r.w.project
	cmd.Env = []string{"HOME=" + r.w.home, "CODEX_HOME=" + r.home, "PATH=" + r.path,
		"COUNTERSIGN_URL=" + r.srv.URL, "COUNTERSIGN_KEY=" + r.srv.agentKey}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	close(r.exited)
	r.exited = make(chan struct{})
	if err != nil {
		r.t.Logf("codex: %v\n%s", err, out.String())
	}
	return out.String(), api.Results()
}

// human decides the rig's requests as they come: the decisions in turn,
// one request each, until Codex exits. It returns a wait for the
// requests it decided.
func (r *codexRig) human(decisions ...client.Decision) func() {
	return r.srv.decideAsTheyCome(r.t, "Codex", r.exited, decisions...)
}

// captured returns the inputs the capturing hook kept.
func (r *codexRig) captured() []map[string]any {
	r.t.Helper()
	data, err := os.ReadFile(r.inputs)
	if err != nil {
		r.t.Fatalf("the capturing hook kept nothing: %v", err)
	}
	var list []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			r.t.Fatalf("a hook input is not JSON: %v: %s", err, line)
		}
		list = append(list, v)
	}
	return list
}

// keysOf is the sorted keys of a hook input.
func keysOf(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestCodexHookInput records the inputs the real Codex CLI gives its
// hooks, captured by a hook that answers nothing: PreToolUse and
// PostToolUse of a shell call, which Codex names Bash, and
// PermissionRequest when it would ask for an escalated one. The fields
// are those docs/incoming-codex.md lists, no more, no fewer.
func TestCodexHookInput(t *testing.T) {
	t.Parallel()
	common := []string{"cwd", "hook_event_name", "model", "permission_mode", "session_id", "tool_input", "tool_name", "transcript_path", "turn_id"}
	t.Run("sandboxless", func(t *testing.T) {
		t.Parallel()
		r := newCodexRig(t, codexOptions{bare: true})
		out, results := r.run(codexSandboxless, shellCall{Cmd: "ls"})
		if len(results) != 1 || !strings.Contains(results[0], "a.txt") {
			t.Fatalf("the model got %q; want the listing; Codex said %s", results, out)
		}
		in := r.captured()
		if len(in) != 2 || in[0]["hook_event_name"] != "PreToolUse" || in[1]["hook_event_name"] != "PostToolUse" {
			t.Fatalf("the hook got %v; want PreToolUse then PostToolUse", in)
		}
		pre, post := in[0], in[1]
		if got, want := keysOf(pre), append(slices.Clone(common), "tool_use_id"); !slices.Equal(got, sorted(want)) {
			t.Errorf("PreToolUse fields %v, want %v", got, sorted(want))
		}
		if got, want := keysOf(post), append(slices.Clone(common), "tool_response", "tool_use_id"); !slices.Equal(got, sorted(want)) {
			t.Errorf("PostToolUse fields %v, want %v", got, sorted(want))
		}
		ti, _ := pre["tool_input"].(map[string]any)
		if pre["tool_name"] != "Bash" || ti["command"] != "ls" || len(ti) != 1 || pre["cwd"] != r.w.project ||
			pre["permission_mode"] != "bypassPermissions" || pre["tool_use_id"] != "call_0" {
			t.Errorf("PreToolUse input %v", pre)
		}
		if resp, _ := post["tool_response"].(string); !strings.Contains(resp, "a.txt") || post["tool_use_id"] != "call_0" {
			t.Errorf("PostToolUse input %v; want the listing as tool_response", post)
		}
	})
	t.Run("escalated", func(t *testing.T) {
		t.Parallel()
		r := newCodexRig(t, codexOptions{bare: true})
		// The capturing hook answers nothing; Codex's own review then
		// asks the scripted model, which answers no verdict: refused.
		r.run(codexApproveForMe, shellCall{Cmd: "rm -r build", Escalate: true})
		in := r.captured()
		var perm map[string]any
		for _, v := range in {
			if v["hook_event_name"] == "PermissionRequest" {
				perm = v
			}
		}
		if perm == nil {
			t.Fatalf("the hook got %v; want a PermissionRequest", in)
		}
		if got := keysOf(perm); !slices.Equal(got, common) {
			t.Errorf("PermissionRequest fields %v, want %v", got, common)
		}
		ti, _ := perm["tool_input"].(map[string]any)
		if perm["tool_name"] != "Bash" || ti["command"] != "rm -r build" || ti["description"] != "run rm -r build" ||
			perm["permission_mode"] != "default" {
			t.Errorf("PermissionRequest input %v", perm)
		}
		if !exists(filepath.Join(r.w.project, "build")) {
			t.Error("build was removed")
		}
	})
}

// sorted returns s sorted.
func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// askedCodex checks that a human decided exactly n requests of the rig,
// all Bash calls from the project in Codex's session, named as Codex's,
// and returns them, oldest first.
func (r *codexRig) askedCodex(n int) []*client.Request {
	r.t.Helper()
	var decided []*client.Request
	for _, q := range r.srv.requests(r.t) {
		if q.DecidedBy == "alice" {
			decided = append([]*client.Request{q}, decided...)
		}
	}
	if len(decided) != n {
		r.t.Fatalf("a human decided %d requests, want %d", len(decided), n)
	}
	for _, q := range decided {
		if q.Kind != "tool" || q.Action != "Bash" || q.Context.Cwd != r.w.project || q.Context.Agent != "codex" ||
			!strings.HasPrefix(q.Context.SessionID, "codex:") {
			r.t.Errorf("the request: kind %s action %s cwd %s agent %q session %q; want a Bash request of Codex's from the project",
				q.Kind, q.Action, q.Context.Cwd, q.Context.Agent, q.Context.SessionID)
		}
	}
	return decided
}

// oneOutput checks that Codex sent the model one tool output and
// returns it.
func oneOutput(t *testing.T, out string, results []string) string {
	t.Helper()
	if len(results) != 1 {
		t.Fatalf("the model got %d tool outputs, want 1: %q; Codex said %s", len(results), results, out)
	}
	return results[0]
}

// TestCodex drives the real Codex CLI (pinned in
// testdata/npm-codex/package-lock.json) offline against a scripted model,
// with the hooks `countersign hook codex install` wrote and the real
// server where a human decides. Codex runs without its sandbox and
// approvals (--dangerously-bypass-approvals-and-sandbox), as in CI as
// root, so that the hook alone guards each shell command; and in its
// sandbox with --approve-for-me, where a command to run outside it comes
// to the hook again as Codex's own permission prompt.
func TestCodex(t *testing.T) {
	t.Parallel()
	t.Run("risky line denied", func(t *testing.T) {
		t.Parallel()
		r := newCodexRig(t, codexOptions{})
		wait := r.human(client.Decision{Decision: "deny", Text: "keep build: the release needs it"})
		out, results := r.run(codexSandboxless, shellCall{Cmd: "rm -r build"})
		wait()
		res := oneOutput(t, out, results)
		q := r.askedCodex(1)[0]
		want := fmt.Sprintf("Command blocked by PreToolUse hook: countersign: alice denied this call (%s): keep build: the release needs it", q.Reference)
		if !strings.Contains(res, want) {
			t.Errorf("the model got %q; want %q", res, want)
		}
		if q.Status != "denied" || !exists(filepath.Join(r.w.project, "build", "x.o")) {
			t.Errorf("request %s, build there: %v; want it denied and build kept", q.Status, exists(filepath.Join(r.w.project, "build")))
		}
	})
	t.Run("risky line approved", func(t *testing.T) {
		t.Parallel()
		r := newCodexRig(t, codexOptions{})
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run(codexSandboxless, shellCall{Cmd: "rm -r build"})
		wait()
		res := oneOutput(t, out, results)
		q := r.askedCodex(1)[0]
		if !strings.Contains(res, "Process exited with code 0") || exists(filepath.Join(r.w.project, "build")) {
			t.Errorf("the model got %q, build there: %v; want the line run", res, exists(filepath.Join(r.w.project, "build")))
		}
		// The line ran through the rm wrapper first in PATH, which the
		// approval covered: asked once, not twice.
		if !strings.Contains(res, "covered by the approval the Codex CLI hook asked for") {
			t.Errorf("the wrapper did not run under the approval: %q", res)
		}
		var covered int
		for _, rq := range r.srv.requests(t) {
			if rq.Kind == "rm" && rq.DecidedBy == countersign.DecidedByCoverage && rq.Status == "consumed" && rq.Context.Agent == "codex" {
				covered++
			}
		}
		if q.Status != "consumed" || covered != 1 {
			t.Errorf("the hook's request %s, %d wrapper requests consumed; want consumed and 1", q.Status, covered)
		}
	})
	t.Run("harmless line not asked", func(t *testing.T) {
		t.Parallel()
		r := newCodexRig(t, codexOptions{})
		out, results := r.run(codexSandboxless, shellCall{Cmd: "ls"})
		if res := oneOutput(t, out, results); !strings.Contains(res, "a.txt") {
			t.Errorf("the model got %q; want the listing", res)
		}
		if n := len(r.srv.requests(t)); n != 0 {
			t.Errorf("a harmless line made %d requests", n)
		}
		// The hooks Codex ran are the small binary's, installed beside
		// the countersign binary that wrote them.
		var v struct {
			Hooks map[string][]groupJSON `json:"hooks"`
		}
		json.Unmarshal(readFile(t, filepath.Join(r.home, "hooks.json")), &v)
		for _, ev := range codexEvents {
			if g := v.Hooks[ev]; len(g) != 1 || g[0].Hooks[0].Command != filepath.Join(filepath.Dir(binary(t, "countersign")), "countersign-agent")+" hook codex --timeout 60" {
				t.Errorf("hooks.json %s: %+v", ev, g)
			}
		}
	})
	t.Run("destroyer asked", func(t *testing.T) {
		t.Parallel()
		// Codex asks nothing itself without its sandbox: a command
		// that loses data without rm is put to a human.
		r := newCodexRig(t, codexOptions{})
		gitCommits(t, r.w, 2)
		wait := r.human(client.Decision{Decision: "deny", Text: "not the history"})
		out, results := r.run(codexSandboxless, shellCall{Cmd: "git reset --hard HEAD~1"})
		wait()
		res := oneOutput(t, out, results)
		r.askedCodex(1)
		if !strings.Contains(res, "not the history") || gitHead(t, r.w) != "commit 2" {
			t.Errorf("the model got %q, HEAD at %q; want the refusal and HEAD kept", res, gitHead(t, r.w))
		}
	})
	t.Run("shell to type into", func(t *testing.T) {
		t.Parallel()
		// Codex's write_stdin types into a running command, and no hook
		// sees what it types (checked: PreToolUse does not come): a
		// shell started to be typed into is put to a human.
		r := newCodexRig(t, codexOptions{})
		wait := r.human(client.Decision{Decision: "deny", Text: "no shell to type into"})
		out, results := r.run(codexSandboxless, shellCall{Cmd: "bash"})
		wait()
		res := oneOutput(t, out, results)
		q := r.askedCodex(1)[0]
		if !strings.Contains(res, "Command blocked by PreToolUse hook") || !strings.Contains(res, "no shell to type into") ||
			!strings.Contains(strings.Join(q.RiskReasons, " "), "type commands into later") {
			t.Errorf("the model got %q, the request's reasons %q; want the refusal of a shell to type into", res, q.RiskReasons)
		}
	})
	t.Run("write outside the project", func(t *testing.T) {
		t.Parallel()
		// Codex applies an apply_patch command itself: its hooks see
		// Bash with the patch, whose files the policy judges.
		r := newCodexRig(t, codexOptions{})
		target := filepath.Join(r.w.root, "outside.txt")
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run(codexSandboxless, shellCall{Cmd: "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: " + target + "\n+written\n*** End Patch\nEOF\n"})
		wait()
		res := oneOutput(t, out, results)
		q := r.askedCodex(1)[0]
		got, _ := os.ReadFile(target)
		if string(got) != "written\n" || q.Status != "consumed" || !strings.Contains(strings.Join(q.RiskReasons, " "), "outside the project") {
			t.Errorf("the model got %q, the file holds %q, the request is %s (%q); want it written once approved", res, got, q.Status, q.RiskReasons)
		}
	})
	t.Run("window", func(t *testing.T) {
		t.Parallel()
		// A window a human opens covers the same shape of call in the
		// same Codex session.
		r := newCodexRig(t, codexOptions{})
		gitCommits(t, r.w, 3)
		wait := r.human(client.Decision{Decision: "approve", AutoApproveMinutes: 15})
		out, results := r.run(codexSandboxless, shellCall{Cmd: "git reset --hard HEAD~1"}, shellCall{Cmd: "git reset --hard HEAD~1"})
		wait()
		if len(results) != 2 || strings.Contains(results[0], "blocked") || strings.Contains(results[1], "blocked") {
			t.Fatalf("the model got %q; want both resets run; Codex said %s", results, out)
		}
		q := r.askedCodex(1)[0]
		var auto int
		for _, a := range r.srv.requests(t) {
			if a.AutoApproved && a.Status == "consumed" && a.Context.SessionID == q.Context.SessionID {
				auto++
			}
		}
		if head := gitHead(t, r.w); auto != 1 || head != "commit 1" {
			t.Errorf("%d requests auto-approved in the session, HEAD at %q; want the second reset in the window and HEAD at commit 1", auto, head)
		}
	})
	t.Run("escalated line", func(t *testing.T) {
		t.Parallel()
		// In its sandbox, Codex runs the hook before the command
		// (approved here) and again at its own prompt to leave the
		// sandbox, where the human refuses: the refusal reaches the
		// model and nothing ran.
		r := newCodexRig(t, codexOptions{})
		wait := r.human(client.Decision{Decision: "approve"}, client.Decision{Decision: "deny", Text: "not outside the sandbox"})
		out, results := r.run(codexApproveForMe, shellCall{Cmd: "rm -r build", Escalate: true})
		wait()
		res := oneOutput(t, out, results)
		qs := r.askedCodex(2)
		if !strings.Contains(res, "not outside the sandbox") || !exists(filepath.Join(r.w.project, "build", "x.o")) {
			t.Errorf("the model got %q, build there: %v; want the refusal and build kept", res, exists(filepath.Join(r.w.project, "build")))
		}
		if qs[0].Status != "consumed" || qs[1].Status != "denied" {
			t.Errorf("the requests are %s and %s; want consumed (PreToolUse) and denied (PermissionRequest)", qs[0].Status, qs[1].Status)
		}
	})
}

// TestCodexGuarded: changing Codex's hooks.json, which holds the hooks, or
// its config.toml, which holds their trust and its features, is asked of a
// human, however Codex makes the call and whatever rule allows it.
func TestCodexGuarded(t *testing.T) {
	w := newWorld(t)
	w.writeConfig("[hook]\nallow = [\"Write(~/**)\", \"Edit(~/**)\", \"Bash(echo:*)\", \"Bash(rm:*)\", \"Bash(mv:*)\", \"Bash(apply_patch:*)\"]\n")
	hooks := w.file(".codex/hooks.json", "{}")
	config := w.file(".codex/config.toml", "")
	p := w.policy()
	for _, c := range []struct{ tool, arg string }{
		{"Write", hooks},
		{"Edit", config},
		{"Write", filepath.Join(w.project, ".codex", "hooks.json")},
		{"Edit", filepath.Join(w.project, ".codex", "config.toml")},
		{"Bash", "echo '{}' > " + hooks},
		{"Bash", "mv " + config + " /tmp/x"},
		{"Bash", "rm -r " + filepath.Dir(hooks)},
		{"Bash", "apply_patch '*** Begin Patch\n*** Update File: " + config + "\n@@\n-x\n+y\n*** End Patch'"},
	} {
		call := &Call{Tool: c.tool, Cwd: w.project, Project: w.project, Patches: true, Typed: true}
		if c.tool == "Bash" {
			call.Command = c.arg
		} else {
			call.Path = c.arg
		}
		if v := p.Decide(context.Background(), call); v.Action != Ask || !strings.Contains(strings.Join(v.Reasons, " "), "Codex") {
			t.Errorf("%s %s: %s %q; want it asked as a change of Codex's hooks", c.tool, c.arg, v.Action, v.Reasons)
		}
	}
	v := p.Decide(context.Background(), &Call{Tool: "Write", Path: w.project + "/notes/config.toml", Cwd: w.project, Project: w.project})
	if v.Action != Allow {
		t.Errorf("another config.toml: %v %q; want the rule's allow", v.Action, v.Reasons)
	}
}
