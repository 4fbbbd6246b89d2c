package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
	"github.com/countersign/countersign/internal/testutil"
)

// geminiCLIDir is the npm folder holding the real Gemini CLI, pinned by
// its lock file: npm ci --prefix internal/claudehook/testdata/npm-gemini.
const geminiCLIDir = "testdata/npm-gemini"

// geminiCLI returns the real Gemini CLI, or ends the test.
func geminiCLI(t testing.TB) string {
	t.Helper()
	bin := realCLI(t, "Gemini CLI", geminiCLIDir, "gemini")
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Missing(t, "node is not on PATH, for the real Gemini CLI")
	}
	return bin
}

// geminiAPI is a scripted Gemini API (streamGenerateContent with
// alt=sse): to each request of the main loop it answers with the next
// function call of its script, one per turn, then ends the turn with
// text. It keeps the function responses Gemini CLI sends back.
type geminiAPI struct {
	URL    string
	script []toolUse

	mu      sync.Mutex
	results []toolResult
}

func newGeminiAPI(t testing.TB, script ...toolUse) *geminiAPI {
	t.Helper()
	m := &geminiAPI{script: script}
	ts := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(ts.Close)
	m.URL = ts.URL
	return m
}

// geminiPart is the part of a Content the script reads.
type geminiPart struct {
	FunctionResponse *struct {
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	} `json:"functionResponse"`
}

func (m *geminiAPI) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1beta/models/") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Contents []struct {
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 32<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The function responses so far: their number is the step.
	var results []toolResult
	for _, c := range req.Contents {
		for _, p := range c.Parts {
			if fr := p.FunctionResponse; fr != nil {
				res := toolResult{Text: fmt.Sprint(fr.Response["output"])}
				if e, ok := fr.Response["error"]; ok {
					res = toolResult{Text: fmt.Sprint(e), IsError: true}
				}
				results = append(results, res)
			}
		}
	}
	stream := strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
	if !stream || len(req.Tools) == 0 {
		// Not the main loop (a classifier, a summary): a short text.
		m.answer(w, stream, map[string]any{"text": "ok"})
		return
	}
	m.mu.Lock()
	if len(results) > len(m.results) {
		m.results = results
	}
	m.mu.Unlock()
	if len(results) < len(m.script) {
		call := m.script[len(results)]
		m.answer(w, true, map[string]any{"functionCall": map[string]any{"name": call.Name, "args": call.Input}})
		return
	}
	m.answer(w, true, map[string]any{"text": "done"})
}

// answer writes one model turn of one part, as one server-sent event or
// as JSON.
func (m *geminiAPI) answer(w http.ResponseWriter, stream bool, part map[string]any) {
	resp, _ := json.Marshal(map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]int{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
	})
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		w.Write(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: %s\n\n", resp)
}

// Results returns the function responses Gemini CLI sent.
func (m *geminiAPI) Results() []toolResult {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]toolResult(nil), m.results...)
}

// geminiRig is the real Gemini CLI in a scratch home, its hook and policy
// installed by the product, run against the scripted model and the real
// server; the rm wrapper is first in its PATH. The embedded claudeRig
// lends its human and its checks of the server's requests.
type geminiRig struct {
	*claudeRig
	gemini string
}

// newGeminiRig installs the hook with `countersign hook gemini install`
// into settings that already hold what Gemini CLI needs to start offline
// (an API key as the way to sign in, no usage statistics), which the
// install keeps.
func newGeminiRig(t testing.TB, capture bool) *geminiRig {
	t.Helper()
	bin := geminiCLI(t)
	cs := binary(t, "countersign")
	w := newWorld(t)
	w.writeConfig("")
	srv := newTestServerWith(t, nil)
	r := &geminiRig{claudeRig: &claudeRig{t: t, w: w, srv: srv, key: srv.agentKey, url: srv.URL, exited: make(chan struct{})}, gemini: bin}
	wrapDir := filepath.Join(w.root, "bin")
	if err := os.MkdirAll(wrapDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(cs, filepath.Join(wrapDir, "rm")); err != nil {
		t.Fatal(err)
	}
	r.path = wrapDir + ":" + os.Getenv("PATH")
	settings := w.file(".gemini/settings.json", `{"security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": false}}`)
	// A shorter timeout than the default: a call asked by mistake ends
	// the run in a minute, not ten.
	args := []string{"hook", "gemini", "install", "--settings", settings, "--timeout", "60"}
	cmd := exec.Command(cs, args...)
	cmd.Env = []string{"HOME=" + w.home, "PATH=" + r.path}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("countersign %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if capture {
		r.claudeRig.inputs = filepath.Join(w.root, "inputs.jsonl")
		data, err := os.ReadFile(settings)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		hooks := v["hooks"].(map[string]any)
		for _, ev := range geminiEvents {
			hooks[ev] = append(hooks[ev].([]any), map[string]any{"matcher": "*", "hooks": []any{map[string]any{
				"type": "command", "command": "{ cat; echo; } >> " + r.inputs + "; echo '{}'"}}})
		}
		data, _ = json.Marshal(v)
		if err := os.WriteFile(settings, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// run runs `gemini -p` in the project with the script, and returns its
// output and the model's view of each call's result.
func (r *geminiRig) run(args []string, script ...toolUse) (string, []toolResult) {
	r.t.Helper()
	api := newGeminiAPI(r.t, script...)
	claudeSlots <- struct{}{}
	defer func() { <-claudeSlots }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A model named: Gemini CLI routes an unnamed one through a
	// classifier first.
	cmd := exec.CommandContext(ctx, r.gemini, append([]string{"-p", "do the task", "--skip-trust", "-m", "gemini-2.5-pro"}, args...)...)
	cmd.Dir = r.w.project
	cmd.Env = []string{"HOME=" + r.w.home, "PWD=" + r.w.project, "PATH=" + r.path,
		"GOOGLE_GEMINI_BASE_URL=" + api.URL, "GEMINI_API_KEY=test-key",
		"COUNTERSIGN_URL=" + r.url, "COUNTERSIGN_KEY=" + r.key}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	close(r.exited)
	r.exited = make(chan struct{}) // for the next run
	if err != nil {
		r.t.Logf("gemini: %v\n%s", err, out.String())
	}
	return out.String(), api.Results()
}

// askedOnce checks that a human decided exactly one request of the rig,
// on the tool, asked by Gemini CLI in its session, from the project, and
// returns it.
func (r *geminiRig) askedOnce(tool string) *client.Request {
	return r.srv.askedOnce(r.t, countersign.AgentGemini, r.w.project, tool)
}

// geminiShell is a scripted run_shell_command call.
func geminiShell(command string) toolUse {
	return toolUse{Name: "run_shell_command", Input: map[string]any{"command": command, "description": "run " + command}}
}

// TestGeminiCLI drives the real Gemini CLI (pinned in
// testdata/npm-gemini/package-lock.json) offline against a scripted
// Gemini API, with the hook and the policy file `countersign hook gemini
// install` wrote, and the real server where a human decides. What the
// model sees and what ran are checked, not the hook's JSON.
func TestGeminiCLI(t *testing.T) {
	t.Parallel()
	t.Run("risky line denied", func(t *testing.T) {
		t.Parallel()
		r := newGeminiRig(t, false)
		wait := r.human(client.Decision{Decision: "deny", Text: "keep build: the release needs it"})
		out, results := r.run(nil, geminiShell("rm -r build"))
		wait()
		res := oneResult(t, out, results)
		q := r.askedOnce("Bash")
		want := fmt.Sprintf("Tool execution blocked: countersign: alice denied this call (%s): keep build: the release needs it", q.Reference)
		if !res.IsError || res.Text != want {
			t.Errorf("the model got %+v; want the error %q", res, want)
		}
		if q.Status != "denied" || !exists(filepath.Join(r.w.project, "build", "x.o")) {
			t.Errorf("request %s, build there: %v; want it denied and build kept", q.Status, exists(filepath.Join(r.w.project, "build")))
		}
	})
	t.Run("risky line approved", func(t *testing.T) {
		t.Parallel()
		r := newGeminiRig(t, false)
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run(nil, geminiShell("rm -r build"))
		wait()
		res := oneResult(t, out, results)
		q := r.askedOnce("Bash")
		if res.IsError || exists(filepath.Join(r.w.project, "build")) {
			t.Errorf("the model got %+v, build there: %v; want the line run", res, exists(filepath.Join(r.w.project, "build")))
		}
		// The line ran through the rm wrapper first in PATH, which the
		// approval covered: asked once, not twice.
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
		r := newGeminiRig(t, false)
		out, results := r.run(nil, geminiShell("ls"))
		res := oneResult(t, out, results)
		if res.IsError || !strings.Contains(res.Text, "a.txt") {
			t.Errorf("the model got %+v; want the listing", res)
		}
		if n := len(r.srv.requests(t)); n != 0 {
			t.Errorf("a harmless line made %d requests", n)
		}
	})
	t.Run("write outside the project", func(t *testing.T) {
		t.Parallel()
		r := newGeminiRig(t, false)
		// Gemini CLI refuses paths outside its workspace itself;
		// --include-directories adds one outside the project, where
		// countersign asks.
		shared := filepath.Join(r.w.root, "shared")
		if err := os.MkdirAll(shared, 0o755); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(shared, "outside.txt")
		wait := r.human(client.Decision{Decision: "approve"})
		out, results := r.run([]string{"--include-directories", shared}, toolUse{Name: "write_file", Input: map[string]any{"file_path": target, "content": "written\n"}})
		wait()
		res := oneResult(t, out, results)
		q := r.askedOnce("Write")
		got, _ := os.ReadFile(target)
		if res.IsError || string(got) != "written\n" || q.Status != "consumed" {
			t.Errorf("the model got %+v, the file holds %q, the request is %s; want it written once approved", res, got, q.Status)
		}
	})
}

// TestGeminiCLIHookInput records the inputs Gemini CLI gives its
// BeforeTool and AfterTool hooks, captured by a second hook beside
// countersign's: the fields docs/incoming-gemini.md lists, and each one
// read as the call in Claude Code's words.
func TestGeminiCLIHookInput(t *testing.T) {
	t.Parallel()
	r := newGeminiRig(t, true)
	r.run(nil, geminiShell("ls"))
	in := r.captured()
	if len(in) != 2 {
		t.Fatalf("the hooks got %d inputs, want 2: %v", len(in), in)
	}
	want := map[string][]string{
		GeminiBeforeTool: {"cwd", "hook_event_name", "session_id", "timestamp", "tool_input", "tool_name", "transcript_path"},
		GeminiAfterTool:  {"cwd", "hook_event_name", "session_id", "timestamp", "tool_input", "tool_name", "tool_response", "transcript_path"},
	}
	for i, ev := range geminiEvents {
		keys := slices.Sorted(maps.Keys(in[i]))
		if got := strings.Join(keys, " "); got != strings.Join(want[ev], " ") || in[i]["hook_event_name"] != ev {
			t.Errorf("input %d: event %v, fields %s; want %s with %s", i, in[i]["hook_event_name"], got, ev, strings.Join(want[ev], " "))
		}
		data, _ := json.Marshal(in[i])
		event, ci, call, err := readGemini(data, "/", func(string) string { return "" })
		if err != nil || event != []Event{EventBefore, EventAfter}[i] || ci.Event != ev || call.Tool != "Bash" || call.Command != "ls" || call.Cwd != r.w.project {
			t.Errorf("%s read as event %v, %+v, %+v (%v); want a Bash call of ls in the project", ev, event, ci, call, err)
		}
	}
	resp, _ := in[1]["tool_response"].(map[string]any)
	if llm, _ := resp["llmContent"].(string); !strings.Contains(llm, "a.txt") {
		t.Errorf("AfterTool's tool_response %v; want the listing in llmContent", in[1]["tool_response"])
	}
}
