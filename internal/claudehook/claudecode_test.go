package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/saferm"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// claudeCodeDir is the npm folder holding the real Claude Code, pinned by
// its lock file: npm ci --prefix internal/claudehook/testdata/npm.
const claudeCodeDir = "testdata/npm"

// claudeCode returns the real Claude Code binary, or ends the test.
func claudeCode(t testing.TB) string {
	t.Helper()
	bin := realCLI(t, "Claude Code", claudeCodeDir, "claude")
	return bin
}

// realCLI returns the binary bin of an agent's CLI, name, installed in the
// npm folder dir (testdata/npm*, pinned by its lock file), or ends the
// test: skipped with -short, and missing without npm ci.
func realCLI(t testing.TB, name, dir, bin string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real " + name)
	}
	path, err := filepath.Abs(filepath.Join(dir, "node_modules", ".bin", bin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		testutil.Missing(t, "the real "+name+" is not installed: npm ci --prefix internal/claudehook/"+dir)
	}
	return path
}

// toolUse is one tool call the scripted model makes.
type toolUse struct {
	Name  string
	Input any
}

// toolResult is what Claude Code sent back to the model for a call.
type toolResult struct {
	Text    string
	IsError bool
}

// modelAPI is a scripted Anthropic Messages API: to each request it
// answers with the next tool call of its script, one per turn, then ends
// the turn with text. It keeps the tool results Claude Code sends back.
type modelAPI struct {
	URL    string
	script []toolUse

	mu      sync.Mutex
	results []toolResult
	sent    time.Time       // when the last tool call went out
	calls   []time.Duration // from each tool call sent to its result back
}

// newModelAPI serves the script on 127.0.0.1.
func newModelAPI(t testing.TB, script ...toolUse) *modelAPI {
	t.Helper()
	m := &modelAPI{script: script}
	ts := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(ts.Close)
	m.URL = ts.URL
	return m
}

// message is the part of a Messages API request the script reads.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type block struct {
	Type      string          `json:"type"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (m *modelAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Stream   bool      `json:"stream"`
		Messages []message `json:"messages"`
		Tools    []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 32<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The results so far, from the conversation: their number is the
	// step of the script.
	var results []toolResult
	for _, msg := range req.Messages {
		var blocks []block
		if msg.Role != "user" || json.Unmarshal(msg.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_result" {
				results = append(results, toolResult{Text: resultText(b.Content), IsError: b.IsError})
			}
		}
	}
	if len(req.Tools) == 0 {
		// Not the main loop (a title, a summary): a short text.
		m.answer(w, req.Stream, nil, "ok")
		return
	}
	m.mu.Lock()
	if len(results) > len(m.results) {
		m.results = results
		if !m.sent.IsZero() {
			m.calls = append(m.calls, time.Since(m.sent))
		}
	}
	m.mu.Unlock()
	if len(results) < len(m.script) {
		m.answer(w, req.Stream, &m.script[len(results)], "")
		m.mu.Lock()
		m.sent = time.Now()
		m.mu.Unlock()
		return
	}
	m.answer(w, req.Stream, nil, "done")
}

// resultText is a tool result's content as text.
func resultText(raw json.RawMessage) string {
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

// answer writes one assistant message: a tool call, or text ending the
// turn.
func (m *modelAPI) answer(w http.ResponseWriter, stream bool, call *toolUse, text string) {
	id := fmt.Sprintf("msg_%d", time.Now().UnixNano())
	stop := "end_turn"
	var content map[string]any
	var input []byte
	if call != nil {
		stop = "tool_use"
		input, _ = json.Marshal(call.Input)
		content = map[string]any{"type": "tool_use", "id": "toolu_" + id, "name": call.Name, "input": json.RawMessage(input)}
	} else {
		content = map[string]any{"type": "text", "text": text}
	}
	usage := map[string]int{"input_tokens": 10, "output_tokens": 5}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": "claude-test",
			"content": []any{content}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(name string, v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
	}
	event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message", "role": "assistant",
		"model": "claude-test", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	if call != nil {
		start := map[string]any{"type": "tool_use", "id": content["id"], "name": call.Name, "input": map[string]any{}}
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": start})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
	} else {
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": text}})
	}
	event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": 5}})
	event("message_stop", map[string]any{"type": "message_stop"})
}

// Results returns the tool results Claude Code sent.
func (m *modelAPI) Results() []toolResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]toolResult(nil), m.results...)
}

// claudeRig is the real Claude Code in a scratch home, its hook installed
// by the product, run against the scripted model and the real server; an
// rm wrapper (the countersign binary named rm) is first in its PATH.
type claudeRig struct {
	t      testing.TB
	bin    string
	w      *world
	srv    *testServer
	path   string // PATH: the wrapper's directory first
	inputs string // where the capturing hook appends the inputs it gets
	http   bool
	key    string        // COUNTERSIGN_KEY in Claude Code's environment
	url    string        // COUNTERSIGN_URL in Claude Code's environment
	exited chan struct{} // closed when Claude Code exits
	dirs   []string      // the HTTP hook: the project directory of each call
}

// projectDirs is the HTTP hook, keeping the project directory Claude Code
// sent with each call.
type projectDirs struct {
	HTTPHook
	mu   sync.Mutex
	dirs *[]string
}

func (h *projectDirs) Answer(ctx context.Context, input []byte, timeout time.Duration, projectDir, path string, start time.Time,
	serverURL, key string, ask saferm.Server) []byte {
	h.mu.Lock()
	*h.dirs = append(*h.dirs, projectDir)
	h.mu.Unlock()
	return h.HTTPHook.Answer(ctx, input, timeout, projectDir, path, start, serverURL, key, ask)
}

// claudeSlots bounds how many Claude Code processes run at once: each
// takes a second or two of a processor to start, and a machine running
// many at once starts each one slower than the tests wait.
var claudeSlots = make(chan struct{}, 2*runtime.GOMAXPROCS(0))

// rigOptions say how a rig is made.
type rigOptions struct {
	http    bool   // the HTTP hook (install --http), not the command hook
	config  string // the configuration file's content
	capture bool   // a second hook keeps every input it gets
}

func newClaudeRig(t testing.TB, o rigOptions) *claudeRig {
	t.Helper()
	bin := claudeCode(t)
	cs := binary(t, "countersign")
	w := newWorld(t)
	w.writeConfig(o.config)
	r := &claudeRig{t: t, bin: bin, w: w, http: o.http}
	set := func(*server.Config) {}
	if o.http {
		set = func(c *server.Config) { c.ClaudeHook = &projectDirs{HTTPHook: HTTPHook{Load: w.load()}, dirs: &r.dirs} }
	}
	r.srv = newTestServerWith(t, set)
	r.key, r.url, r.exited = r.srv.agentKey, r.srv.URL, make(chan struct{})
	wrapDir := filepath.Join(w.root, "bin")
	if err := os.MkdirAll(wrapDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cs, filepath.Join(wrapDir, "rm")); err != nil {
		t.Fatal(err)
	}
	r.path = wrapDir + ":" + os.Getenv("PATH")

	// The product writes the settings, as a user installs the hook.
	settings := filepath.Join(w.home, ".claude", "settings.json")
	// A shorter timeout than the default: a call asked by mistake ends
	// the run in a minute, not ten.
	args := []string{"hook", "claude", "install", "--settings", settings, "--timeout", "60"}
	if o.http {
		args = append(args, "--http", "--server", r.srv.URL)
	}
	cmd := exec.Command(cs, args...)
	cmd.Env = []string{"HOME=" + w.home, "PATH=" + r.path}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("countersign %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if o.capture {
		r.inputs = filepath.Join(w.root, "inputs.jsonl")
		data, err := os.ReadFile(settings)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		pre := v["hooks"].(map[string]any)["PreToolUse"].([]any)
		pre = append(pre, map[string]any{"matcher": "*", "hooks": []any{map[string]any{"type": "command",
			"command": "{ cat; echo; } >> " + r.inputs}}})
		v["hooks"].(map[string]any)["PreToolUse"] = pre
		data, _ = json.Marshal(v)
		if err := os.WriteFile(settings, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// down points the installed hook and the rm wrapper at a server that is
// not there: a port that was just free.
func (r *claudeRig) down() {
	r.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	settings := filepath.Join(r.w.home, ".claude", "settings.json")
	data, err := os.ReadFile(settings)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(settings, []byte(strings.ReplaceAll(string(data), r.srv.URL, gone)), 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.url = gone
}

// run runs `claude -p` in the project with the script, and returns its
// output and the model's view of each call's result.
func (r *claudeRig) run(args []string, script ...toolUse) (string, []toolResult) {
	r.t.Helper()
	out, results, _, _ := r.runAll(args, script...)
	return out, results
}

// runTimed is run for a benchmark: it returns the output, the time of
// each call from the model's side, and Claude Code's debug log.
func (r *claudeRig) runTimed(args []string, script ...toolUse) (string, []time.Duration, []byte) {
	r.t.Helper()
	out, _, calls, debug := r.runAll(args, script...)
	return out, calls, debug
}

func (r *claudeRig) runAll(args []string, script ...toolUse) (string, []toolResult, []time.Duration, []byte) {
	r.t.Helper()
	api := newModelAPI(r.t, script...)
	claudeSlots <- struct{}{}
	defer func() { <-claudeSlots }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	debug := filepath.Join(r.w.root, "claude-debug.log")
	cmd := exec.CommandContext(ctx, r.bin, append([]string{"-p", "do the task", "--debug-file", debug}, args...)...)
	cmd.Dir = r.w.project
	// PWD as a shell sets it, for the HTTP hook's project directory.
	cmd.Env = []string{"HOME=" + r.w.home, "PWD=" + r.w.project, "PATH=" + r.path, "ANTHROPIC_BASE_URL=" + api.URL, "ANTHROPIC_API_KEY=sk-ant-test",
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1",
		"COUNTERSIGN_URL=" + r.url, "COUNTERSIGN_KEY=" + r.key}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	close(r.exited)
	r.exited = make(chan struct{}) // for the next run
	if err != nil {
		r.t.Logf("claude: %v", err)
		d, _ := os.ReadFile(debug)
		lines := strings.Split(string(d), "\n")
		r.t.Logf("the end of its debug log:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
	d, _ := os.ReadFile(debug)
	results := api.Results()
	api.mu.Lock()
	defer api.mu.Unlock()
	return out.String(), results, slices.Clone(api.calls), d
}

// hookKinds are the two ways Claude Code runs the hook.
var hookKinds = []struct {
	name string
	http bool
}{{"command", false}, {"http", true}}

// bash is a scripted Bash call.
func bash(command string) toolUse {
	return toolUse{Name: "Bash", Input: map[string]any{"command": command, "description": "run " + command}}
}

// human decides the rig's requests as they come: the decisions in turn,
// one request each, until Claude Code exits (run closes r.exited). It
// returns a wait for the requests it decided.
func (r *claudeRig) human(decisions ...client.Decision) func() {
	return r.srv.decideAsTheyCome(r.t, "Claude Code", r.exited, decisions...)
}

// decideAsTheyCome decides the server's requests as they come, the
// decisions in turn, one request each, until the agent named who exits
// (exited closes). It returns a wait for the requests it decided.
func (s *testServer) decideAsTheyCome(t testing.TB, who string, exited <-chan struct{}, decisions ...client.Decision) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, d := range decisions {
			req := s.nextPending(exited)
			if req == nil {
				t.Errorf("no request to %s was pending before %s exited (or within %s)", d.Decision, who, testutil.EventuallyWithin)
				return
			}
			s.decide(t, req, d)
		}
	}()
	return func() { <-done }
}

// nextPending waits for a pending request until the agent exits; nil
// when it exits first or none comes within testutil.EventuallyWithin.
func (s *testServer) nextPending(exited <-chan struct{}) *client.Request {
	var req *client.Request
	testutil.Wait(func() bool {
		list, err := s.human.List(context.Background(), "pending", 5)
		if err == nil && len(list) > 0 {
			req = list[0]
			return true
		}
		select {
		case <-exited:
			return true
		default:
			return false
		}
	}, testutil.EventuallyWithin)
	return req
}

// askedOnce checks that a human decided exactly one request of the rig,
// on the tool, in the session Claude Code runs, and returns it.
func (r *claudeRig) askedOnce(tool string) *client.Request {
	return r.srv.askedOnce(r.t, countersign.AgentClaudeCode, r.w.project, tool)
}

// askedOnce checks that a human decided exactly one request of the
// server, on the tool, asked by the agent from the project in a session
// of its own (Claude Code's bare, another agent's prefixed with its
// name), and returns it.
func (s *testServer) askedOnce(t testing.TB, agent, project, tool string) *client.Request {
	t.Helper()
	var decided []*client.Request
	for _, q := range s.requests(t) {
		if q.DecidedBy == "alice" {
			decided = append(decided, q)
		}
	}
	if len(decided) != 1 {
		t.Fatalf("a human decided %d requests, want 1", len(decided))
	}
	q := decided[0]
	session, ok := q.Context.SessionID, true
	if agent != countersign.AgentClaudeCode {
		session, ok = strings.CutPrefix(session, agent+":")
	}
	if q.Kind != "tool" || q.Action != tool || q.Context.Cwd != project || !ok || session == "" || q.Context.Agent != agent {
		t.Errorf("the request: kind %s action %s cwd %s session %q agent %q; want a tool request of %s from the project, by %s in its session",
			q.Kind, q.Action, q.Context.Cwd, q.Context.SessionID, q.Context.Agent, tool, agent)
	}
	return q
}

// oneResult checks that Claude Code sent the model one tool result and
// returns it.
func oneResult(t *testing.T, out string, results []toolResult) toolResult {
	t.Helper()
	if len(results) != 1 {
		t.Fatalf("the model got %d tool results, want 1: %+v; Claude Code said %s", len(results), results, out)
	}
	return results[0]
}

// TestClaudeCode drives the real Claude Code (pinned in
// testdata/npm/package-lock.json) offline against a scripted model, with
// the hook `countersign hook claude install` wrote, as a command hook and
// as the HTTP hook, and the real server where a human decides. What the
// model sees and what ran are checked, not the hook's JSON.
func TestClaudeCode(t *testing.T) {
	t.Parallel()
	for _, kind := range hookKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			testClaudeCode(t, kind.http)
		})
	}
}

func testClaudeCode(t *testing.T, http bool) {
	t.Run("risky line denied", func(t *testing.T) {
		t.Parallel()
		r := newClaudeRig(t, rigOptions{http: http})
		wait := r.human(client.Decision{Decision: "deny", Text: "keep build: the release needs it"})
		out, results := r.run(nil, bash("rm -r build"))
		wait()
		res := oneResult(t, out, results)
		q := r.askedOnce("Bash")
		want := fmt.Sprintf("PreToolUse:Bash hook error: countersign: alice denied this call (%s): keep build: the release needs it", q.Reference)
		if !res.IsError || !strings.Contains(res.Text, want) {
			t.Errorf("the model got %+v; want an error with %q", res, want)
		}
		if q.Status != "denied" || !exists(filepath.Join(r.w.project, "build", "x.o")) {
			t.Errorf("request %s, build there: %v; want it denied and build kept", q.Status, exists(filepath.Join(r.w.project, "build")))
		}
	})
	t.Run("risky line approved", func(t *testing.T) {
		t.Parallel()
		r := newClaudeRig(t, rigOptions{http: http})
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run(nil, bash("rm -r build"))
		wait()
		res := oneResult(t, out, results)
		q := r.askedOnce("Bash")
		if res.IsError || exists(filepath.Join(r.w.project, "build")) {
			t.Errorf("the model got %+v, build there: %v; want the line run", res, exists(filepath.Join(r.w.project, "build")))
		}
		// The line ran through the rm wrapper first in PATH, which the
		// approval covered: asked once, not twice.
		if !strings.Contains(res.Text, "covered by the approval the Claude Code hook asked for") {
			t.Errorf("the wrapper did not run under the approval: %q", res.Text)
		}
		var covered int
		for _, rq := range r.srv.requests(t) {
			if rq.Kind == "rm" && rq.DecidedBy == countersign.DecidedByCoverage && rq.Status == "consumed" {
				covered++
			}
		}
		if q.Status != "consumed" || covered != 1 {
			t.Errorf("the hook's request %s, %d wrapper requests covered; want consumed and 1", q.Status, covered)
		}
	})
	t.Run("harmless line not asked", func(t *testing.T) {
		t.Parallel()
		r := newClaudeRig(t, rigOptions{http: http})
		out, results := r.run(nil, bash("ls"))
		res := oneResult(t, out, results)
		if res.IsError || !strings.Contains(res.Text, "a.txt") {
			t.Errorf("the model got %+v; want the listing", res)
		}
		// The HTTP hook gets the project directory in a header, from
		// Claude Code's PWD: before the call and after it ran.
		if http && (len(r.dirs) != 2 || r.dirs[0] != r.w.project || r.dirs[1] != r.w.project) {
			t.Errorf("the HTTP hook got the project directories %q, want %s twice", r.dirs, r.w.project)
		}
		if n := len(r.srv.requests(t)); n != 0 {
			t.Errorf("a harmless line made %d requests", n)
		}
	})
	t.Run("write outside the project", func(t *testing.T) {
		t.Parallel()
		r := newClaudeRig(t, rigOptions{http: http})
		target := filepath.Join(r.w.root, "outside.txt")
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run(nil, toolUse{Name: "Write", Input: map[string]any{"file_path": target, "content": "written\n"}})
		wait()
		res := oneResult(t, out, results)
		q := r.askedOnce("Write")
		got, _ := os.ReadFile(target)
		if res.IsError || string(got) != "written\n" || q.Status != "consumed" {
			t.Errorf("the model got %+v, the file holds %q, the request is %s; want it written once approved", res, got, q.Status)
		}
	})
	t.Run("edit answered", func(t *testing.T) {
		t.Parallel()
		r := newClaudeRig(t, rigOptions{http: http})
		// Claude Code edits only what it read; --add-dir lets it read
		// outside the project, where countersign asks.
		notes := filepath.Join(r.w.root, "shared", "notes.txt")
		if err := os.MkdirAll(filepath.Dir(notes), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(notes, []byte("old line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		wait := r.human(client.Decision{Decision: "respond", Text: "edit the project's copy instead"})
		out, results := r.run([]string{"--add-dir", filepath.Dir(notes)},
			toolUse{Name: "Read", Input: map[string]any{"file_path": notes}},
			toolUse{Name: "Edit", Input: map[string]any{"file_path": notes, "old_string": "old line", "new_string": "new line"}})
		wait()
		if len(results) != 2 || results[0].IsError || !strings.Contains(results[0].Text, "old line") {
			t.Fatalf("the model got %+v; want the file read; Claude Code said %s", results, out)
		}
		q := r.askedOnce("Edit")
		got, _ := os.ReadFile(notes)
		if !results[1].IsError || !strings.Contains(results[1].Text, "PreToolUse:Edit hook error: edit the project's copy instead") ||
			string(got) != "old line\n" || q.Status != "responded" {
			t.Errorf("the model got %+v, the file holds %q, the request is %s; want the answer and no edit", results[1], got, q.Status)
		}
	})
	t.Run("MCP tool", func(t *testing.T) {
		t.Parallel()
		r := newClaudeRig(t, rigOptions{http: http, config: "[hook]\nask = [\"mcp__peer__*\"]\n"})
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		ran := filepath.Join(r.w.root, "peer.log")
		mcpConfig, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"peer": map[string]any{
			"type": "stdio", "command": self, "env": map[string]string{"COUNTERSIGN_TEST_MCP_PEER": ran}}}})
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run([]string{"--strict-mcp-config", "--mcp-config", string(mcpConfig)},
			toolUse{Name: "mcp__peer__echo", Input: map[string]any{"text": "hello"}})
		wait()
		res := oneResult(t, out, results)
		q := r.askedOnce("mcp__peer__echo")
		log, _ := os.ReadFile(ran)
		if res.IsError || !strings.Contains(res.Text, "echo: hello") || string(log) != "hello\n" || q.Status != "consumed" {
			t.Errorf("the model got %+v, the peer ran %q, the request is %s; want the call run once approved", res, log, q.Status)
		}
		var args map[string]any
		if json.Unmarshal(q.Arguments, &args) != nil || args["text"] != "hello" {
			t.Errorf("the request's arguments %s; want the tool's", q.Arguments)
		}
	})
	t.Run("window", func(t *testing.T) {
		t.Parallel()
		r := newClaudeRig(t, rigOptions{http: http})
		gitCommits(t, r.w, 3)
		wait := r.human(client.Decision{Decision: "approve", AutoApproveMinutes: 15})
		out, results := r.run(nil, bash("git reset --hard HEAD~1"), bash("git reset --hard HEAD~1"))
		wait()
		if len(results) != 2 || results[0].IsError || results[1].IsError {
			t.Fatalf("the model got %+v; want both resets run; Claude Code said %s", results, out)
		}
		r.askedOnce("Bash")
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
	// Each permission mode Claude Code runs as root: bypassPermissions
	// refuses root (below); "manual" is sent to the hook as "default".
	for _, mode := range []struct{ flag, sent string }{
		{"manual", "default"}, {"acceptEdits", "acceptEdits"}, {"plan", "plan"}, {"dontAsk", "dontAsk"}, {"auto", "auto"},
	} {
		t.Run("mode "+mode.flag, func(t *testing.T) {
			t.Parallel()
			r := newClaudeRig(t, rigOptions{http: http, capture: true})
			wait := r.human(client.Decision{Decision: "deny", Text: "not in " + mode.flag})
			out, results := r.run([]string{"--permission-mode", mode.flag}, bash("rm -r build"))
			wait()
			res := oneResult(t, out, results)
			r.askedOnce("Bash")
			if !res.IsError || !strings.Contains(res.Text, "not in "+mode.flag) || !exists(filepath.Join(r.w.project, "build")) {
				t.Errorf("the model got %+v; want the human's refusal and build kept", res)
			}
			if in := r.captured(); len(in) != 1 || in[0]["permission_mode"] != mode.sent {
				t.Errorf("the hook got %v; want one input with permission_mode %q", in, mode.sent)
			}
		})
	}
}

// TestClaudeCodeRootRefusesBypass: as root, Claude Code does not start in
// bypassPermissions, so that mode needs no test of its own there.
func TestClaudeCodeRootRefusesBypass(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("bypassPermissions runs when not root; its hook inputs are those of the other modes")
	}
	r := newClaudeRig(t, rigOptions{})
	out, results := r.run([]string{"--permission-mode", "bypassPermissions"}, bash("rm -r build"))
	if len(results) != 0 || !strings.Contains(out, "cannot be used with root/sudo privileges") || !exists(filepath.Join(r.w.project, "build")) {
		t.Errorf("Claude Code in bypassPermissions as root said %q and sent %+v; want the refusal and nothing run", out, results)
	}
}

// TestClaudeCodeHookInput records the input Claude Code gives its
// PreToolUse hooks, captured by a second hook beside countersign's: the
// fields docs/claude-code.md lists, no more, no fewer.
func TestClaudeCodeHookInput(t *testing.T) {
	t.Parallel()
	r := newClaudeRig(t, rigOptions{capture: true})
	r.run(nil, bash("ls"))
	in := r.captured()
	if len(in) != 1 {
		t.Fatalf("the hook got %d inputs, want 1", len(in))
	}
	var keys []string
	for k := range in[0] {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"cwd", "effort", "hook_event_name", "permission_mode", "prompt_id", "session_id", "tool_input", "tool_name", "tool_use_id", "transcript_path"}
	if !slices.Equal(keys, want) {
		t.Errorf("PreToolUse input fields %v, want %v", keys, want)
	}
	effort, _ := in[0]["effort"].(map[string]any)
	if in[0]["cwd"] != r.w.project || in[0]["hook_event_name"] != "PreToolUse" || in[0]["tool_name"] != "Bash" || effort["level"] == nil {
		t.Errorf("the input %v", in[0])
	}
}

// captured returns the inputs the capturing hook kept.
func (r *claudeRig) captured() []map[string]any {
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

// gitCommits makes the project a git repository of n commits, "commit 1"
// to "commit n".
func gitCommits(t *testing.T, w *world, n int) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testutil.Missing(t, "git is not on PATH")
	}
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", w.project, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+w.home, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	for i := 1; i <= n; i++ {
		w.file("proj/log.txt", fmt.Sprintf("%d\n", i))
		git("add", "-A")
		git("commit", "-qm", fmt.Sprintf("commit %d", i))
	}
}

// gitHead is the subject of the project's HEAD commit.
func gitHead(t *testing.T, w *world) string {
	t.Helper()
	out, err := exec.Command("git", "-C", w.project, "log", "-1", "--format=%s").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// mcpPeer is the MCP server Claude Code starts in the MCP case: this test
// binary again, with COUNTERSIGN_TEST_MCP_PEER naming the file where each
// call that ran writes its text. It serves one tool, echo.
func mcpPeer(log string) {
	s := mcp.NewServer(&mcp.Implementation{Name: "peer", Version: "1.0.0"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes the text."}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintln(f, in.Text)
		f.Close()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "peer:", err)
	}
}
