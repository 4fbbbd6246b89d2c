package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Inputs the real Copilot CLI 1.0.102 gave its hooks, as captured by a
// hook that kept its standard input (docs/incoming-copilot.md).
const (
	copilotPreBash    = `{"sessionId":"95e3ec7d-85ac-4b78-8d9a-29172594e7b9","timestamp":1796678708248,"cwd":"/tmp/cp/proj","toolName":"bash","toolArgs":{"command":"rm -r build","description":"clean"}}`
	copilotPermBash   = `{"hookName":"permissionRequest","sessionId":"95e3ec7d-85ac-4b78-8d9a-29172594e7b9","timestamp":1796678708299,"cwd":"/tmp/cp/proj","toolName":"bash","toolInput":{"command":"rm -r build"},"permissionSuggestions":[]}`
	copilotPreCreate  = `{"sessionId":"95e3ec7d-85ac-4b78-8d9a-29172594e7b9","timestamp":1796678708395,"cwd":"/tmp/cp/proj","toolName":"create","toolArgs":{"path":"/tmp/cp/outside.txt","file_text":"hi\n"}}`
	copilotPermCreate = `{"hookName":"permissionRequest","sessionId":"95e3ec7d-85ac-4b78-8d9a-29172594e7b9","timestamp":1796678708400,"cwd":"/tmp/cp/proj","toolName":"edit","toolInput":{"file_path":"/tmp/cp/outside.txt","diff":"\ndiff --git a/tmp/cp/outside.txt b/tmp/cp/outside.txt\ncreate file mode 100644\nindex 0000000..0000000\n--- a/dev/null\n+++ b/tmp/cp/outside.txt\n@@ -1,0 +1,1 @@\n+hi\n"},"permissionSuggestions":[]}`
	copilotPreEdit    = `{"sessionId":"95e3ec7d-85ac-4b78-8d9a-29172594e7b9","timestamp":1796678708448,"cwd":"/tmp/cp/proj","toolName":"edit","toolArgs":{"path":"/tmp/cp/proj/a.txt","old_str":"hi","new_str":"ho"}}`
	copilotPermEdit   = `{"hookName":"permissionRequest","sessionId":"95e3ec7d-85ac-4b78-8d9a-29172594e7b9","timestamp":1796678708470,"cwd":"/tmp/cp/proj","toolName":"edit","toolInput":{"file_path":"/tmp/cp/proj/a.txt","diff":"\ndiff --git a/tmp/cp/proj/a.txt b/tmp/cp/proj/a.txt\nindex 0000000..0000000 100644\n--- a/tmp/cp/proj/a.txt\n+++ b/tmp/cp/proj/a.txt\n@@ -1,2 +1,2 @@\n-hi\n+ho\n \n"},"permissionSuggestions":[]}`
	copilotPreView    = `{"sessionId":"354f2bf2-1453-46ee-9e46-72c4bf52a8c9","timestamp":1796678816018,"cwd":"/tmp/cp/proj","toolName":"view","toolArgs":{"path":"/etc/hostname"}}`
	copilotPreMCP     = `{"sessionId":"9573053a-a294-46bc-b254-c608aba17c83","timestamp":1796678931569,"cwd":"/tmp/cp/proj","toolName":"peer-echo","toolArgs":{"text":"hello"}}`
	copilotPermMCP    = `{"hookName":"permissionRequest","sessionId":"9573053a-a294-46bc-b254-c608aba17c83","timestamp":1796678931578,"cwd":"/tmp/cp/proj","toolName":"peer/echo","toolInput":{"text":"hello"},"permissionSuggestions":[]}`
	copilotPostBash   = `{"sessionId":"72d042f4-87b0-4740-b4ab-d73b5cc32f95","timestamp":1796678696673,"cwd":"/tmp/cp/proj","toolName":"bash","toolArgs":{"command":"ls","description":"list"},"toolResult":{"resultType":"success","textResultForLlm":"a.txt\n<shellId: 0 completed with exit code 0>"}}`
)

// TestCopilotRead reads each input Copilot gives into Claude Code's words.
func TestCopilotRead(t *testing.T) {
	for _, c := range []struct {
		name, input, event, tool string
		fields                   map[string]string // tool_input's string fields
		deferred                 bool
	}{
		{"pre bash", copilotPreBash, "preToolUse", "Bash", map[string]string{"command": "rm -r build", "description": "clean"}, false},
		{"permission bash", copilotPermBash, "permissionRequest", "Bash", map[string]string{"command": "rm -r build"}, false},
		{"pre create", copilotPreCreate, "preToolUse", "Write", map[string]string{"file_path": "/tmp/cp/outside.txt", "content": "hi\n"}, true},
		{"permission create", copilotPermCreate, "permissionRequest", "Write", map[string]string{"file_path": "/tmp/cp/outside.txt", "content": "hi"}, false},
		{"pre edit", copilotPreEdit, "preToolUse", "Edit", map[string]string{"file_path": "/tmp/cp/proj/a.txt", "old_string": "hi", "new_string": "ho"}, true},
		{"permission edit", copilotPermEdit, "permissionRequest", "Edit", map[string]string{"file_path": "/tmp/cp/proj/a.txt", "old_string": "hi", "new_string": "ho"}, false},
		{"pre view", copilotPreView, "preToolUse", "Read", map[string]string{"file_path": "/etc/hostname"}, false},
		{"pre MCP", copilotPreMCP, "preToolUse", "peer-echo", map[string]string{"text": "hello"}, true},
		{"permission MCP", copilotPermMCP, "permissionRequest", "mcp__peer__echo", map[string]string{"text": "hello"}, false},
		{"post bash", copilotPostBash, "postToolUse", "Bash", map[string]string{"command": "ls"}, false},
		{"pre write_bash", `{"sessionId":"s","cwd":"/p","toolName":"write_bash","toolArgs":{"shellId":"0","input":"rm -rf build\n"}}`, "preToolUse", "Bash", map[string]string{"command": "rm -rf build\n", "shellId": "0"}, false},
		{"pre, no arguments", `{"sessionId":"s","cwd":"/p","toolName":"list_bash","toolArgs":{}}`, "preToolUse", "list_bash", nil, false},
		{"pre, arguments left out", `{"sessionId":"s","cwd":"/p","toolName":"list_agents"}`, "preToolUse", "list_agents", nil, false},
		// toolArgs as a JSON string holding the object.
		{"pre bash, arguments as a string", `{"sessionId":"s","cwd":"/p","toolName":"bash","toolArgs":"{\"command\":\"ls -l\"}"}`, "preToolUse", "Bash", map[string]string{"command": "ls -l"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readCopilot([]byte(c.input))
			if err != nil {
				t.Fatal(err)
			}
			if got.Event != c.event || got.Input.ToolName != c.tool || got.Deferred != c.deferred {
				t.Errorf("event %s tool %s deferred %v; want %s %s %v", got.Event, got.Input.ToolName, got.Deferred, c.event, c.tool, c.deferred)
			}
			var fields map[string]any
			if err := json.Unmarshal(got.Input.ToolInput, &fields); err != nil {
				t.Fatal(err)
			}
			for k, want := range c.fields {
				if fields[k] != want {
					t.Errorf("tool_input.%s = %q, want %q", k, fields[k], want)
				}
			}
			if got.Input.SessionID == "" || got.Input.Cwd == "" {
				t.Errorf("no session or cwd: %+v", got.Input)
			}
		})
	}
}

// TestCopilotReadRefuses: what cannot be read is an error, which denies.
func TestCopilotReadRefuses(t *testing.T) {
	for _, in := range []string{
		`not json`,
		`{"sessionId":"s","cwd":"/p"}`, // no event
		`{"sessionId":"s","cwd":"/p","toolArgs":{"command":"ls"}}`,      // no tool
		`{"sessionId":"s","cwd":"/p","toolName":"bash","toolArgs":[1]}`, // not an object
		`{"sessionId":"s","cwd":"/p","toolName":"bash","toolArgs":"ls"}`,
		`{"hookName":"permissionRequest","sessionId":"s","cwd":"/p","toolName":"bash","toolInput":"{"}`,
	} {
		if _, err := readCopilot([]byte(in)); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
}

// TestCopilotRender writes each answer as Copilot reads it.
func TestCopilotRender(t *testing.T) {
	input := json.RawMessage(`{"command":"export X=1\nrm -r build","description":"clean"}`)
	for _, c := range []struct {
		o     outcome
		event string
		want  string
	}{
		{outcome{action: Allow, reason: "approved by alice", input: input}, "preToolUse",
			`{"permissionDecision":"allow","permissionDecisionReason":"approved by alice","modifiedArgs":{"command":"export X=1\nrm -r build","description":"clean"}}`},
		{outcome{action: Allow, reason: "approved", input: json.RawMessage(`{"shellId":"0","input":"rm -r build\n","command":"export X=1\nrm -r build\n"}`)}, "preToolUse",
			`{"permissionDecision":"allow","permissionDecisionReason":"approved"}`},
		{outcome{action: Deny, reason: "keep build & its <objects>"}, "preToolUse",
			`{"permissionDecision":"deny","permissionDecisionReason":"keep build & its <objects>"}`},
		{outcome{action: Deny, reason: "stopped", stop: true}, "preToolUse", `{"permissionDecision":"deny","permissionDecisionReason":"stopped"}`},
		{outcome{action: Prompt}, "preToolUse", ``},
		{outcome{action: Allow, reason: "approved", input: input}, "permissionRequest", `{"behavior":"allow"}`},
		{outcome{action: Deny, reason: "no"}, "permissionRequest", `{"behavior":"deny","message":"no"}`},
		{outcome{action: Deny, reason: "stopped", stop: true}, "permissionRequest", `{"behavior":"deny","message":"stopped","interrupt":true}`},
		{outcome{action: Prompt}, "permissionRequest", ``},
		{outcome{action: Deny, reason: "no"}, "postToolUse", ``},
	} {
		if got := strings.TrimSpace(string(c.o.renderCopilot(c.event))); got != c.want {
			t.Errorf("%s %+v:\n got %s\nwant %s", c.event, c.o, got, c.want)
		}
	}
}

// TestCopilotRun runs the hook in process on Copilot's inputs, with no
// server configured: a risky line is refused with the reason, a harmless
// one and a deferred write are left to Copilot, and an unreadable input
// exits 2.
func TestCopilotRun(t *testing.T) {
	w := newWorld(t)
	run := func(input string) (int, string) {
		t.Helper()
		var out, errs bytes.Buffer
		code := RunProtocol(context.Background(), &Env{Args: []string{"--timeout", "60"}, Stdin: strings.NewReader(input), Stdout: &out, Stderr: &errs,
			Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()}, Copilot)
		return code, out.String()
	}
	at := func(input string) string { return strings.ReplaceAll(input, "/tmp/cp/proj", w.project) }

	code, out := run(at(copilotPreBash))
	var pre copilotPreOut
	if code != ExitOK || json.Unmarshal([]byte(out), &pre) != nil || pre.PermissionDecision != "deny" ||
		!strings.Contains(pre.PermissionDecisionReason, "no countersign server is configured") {
		t.Errorf("rm -r build: exit %d, %s; want a deny naming the missing server", code, out)
	}
	code, out = run(at(copilotPermBash))
	var perm copilotPermissionOut
	if code != ExitOK || json.Unmarshal([]byte(out), &perm) != nil || perm.Behavior != "deny" || perm.Message == "" {
		t.Errorf("rm -r build at permissionRequest: exit %d, %s; want a deny", code, out)
	}
	for _, in := range []string{
		strings.ReplaceAll(at(copilotPreBash), "rm -r build", "ls"),
		at(copilotPreCreate), at(copilotPreEdit), at(copilotPreMCP), at(copilotPostBash),
	} {
		if code, out := run(in); code != ExitOK || out != "" {
			t.Errorf("%s: exit %d, %q; want it left to Copilot", in, code, out)
		}
	}
	if code, out := run(`{"cwd":"/p"}`); code != ExitBlock || out != "" {
		t.Errorf("an unreadable input: exit %d, %q; want 2", code, out)
	}
	// Copilot's tools that write or run in a shape the hook does not read
	// are asked, never left to Copilot's prompt, which --allow-all-tools
	// skips: without a server, that is a deny.
	for _, tool := range opaqueTools {
		in := strings.ReplaceAll(at(copilotPreBash), `"toolName":"bash"`, `"toolName":"`+tool+`"`)
		code, out := run(in)
		var pre copilotPreOut
		if code != ExitOK || json.Unmarshal([]byte(out), &pre) != nil || pre.PermissionDecision != "deny" ||
			!strings.Contains(pre.PermissionDecisionReason, "does not read") {
			t.Errorf("%s: exit %d, %s; want asked (a deny without a server)", tool, code, out)
		}
	}
}

// TestCopilotInstall writes the user's hooks file, keeps what else is
// there, updates its own entry in place and says the same twice.
func TestCopilotInstall(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"HOME": filepath.Join(dir, "home")}
	getenv := func(k string) string { return env[k] }
	var out, errs bytes.Buffer
	if err := CopilotInstall([]string{"--command", "/opt/cs/countersign hook copilot"}, &out, &errs, getenv); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "home", ".copilot", "hooks", "countersign.json")
	want := `{
  "version": 1,
  "hooks": {
    "preToolUse": [
      {
        "type": "command",
        "bash": "/opt/cs/countersign hook copilot --timeout 600",
        "timeoutSec": 600
      }
    ],
    "permissionRequest": [
      {
        "type": "command",
        "bash": "/opt/cs/countersign hook copilot --timeout 600",
        "timeoutSec": 600
      }
    ]
  }
}
`
	if got, _ := os.ReadFile(file); string(got) != want {
		t.Errorf("wrote\n%s\nwant\n%s", got, want)
	}

	// Another hook and another event are kept; the entry, with the
	// "command" alias, is updated in place.
	mine := `{"version":1,"disableAllHooks":false,"hooks":{"sessionStart":[{"type":"command","bash":"echo hi"}],` +
		`"preToolUse":[{"type":"command","bash":"./lint.sh","timeoutSec":5},{"type":"command","command":"countersign-agent hook copilot --timeout 30","timeoutSec":30,"cwd":"."}]}}`
	if err := os.WriteFile(file, []byte(mine), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := CopilotInstall([]string{"--timeout", "900", "--command", "countersign hook copilot"}, &out, &errs, getenv); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(file)
	var v struct {
		Version         int
		DisableAllHooks *bool
		Hooks           map[string][]map[string]any
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	pre := v.Hooks["preToolUse"]
	if v.Version != 1 || v.DisableAllHooks == nil || len(v.Hooks["sessionStart"]) != 1 || len(pre) != 2 || pre[0]["bash"] != "./lint.sh" ||
		pre[1]["command"] != "countersign hook copilot --timeout 900" || pre[1]["timeoutSec"] != 900.0 || pre[1]["cwd"] != "." || pre[1]["bash"] != nil ||
		len(v.Hooks["permissionRequest"]) != 1 {
		t.Errorf("merged into\n%s", data)
	}
	if st, _ := os.Stat(file); st.Mode().Perm() != 0o640 {
		t.Errorf("the file's mode is %v, want it kept", st.Mode().Perm())
	}

	// COPILOT_HOME moves the user's file; --project writes the
	// repository's.
	env["COPILOT_HOME"] = filepath.Join(dir, "ch")
	if err := CopilotInstall(nil, &out, &errs, getenv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ch", "hooks", "countersign.json")); err != nil {
		t.Error(err)
	}
	proj := filepath.Join(dir, "proj")
	os.Mkdir(proj, 0o755)
	if err := CopilotInstall([]string{"--project", proj}, &out, &errs, getenv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(proj, ".github", "hooks", "countersign.json")); err != nil {
		t.Error(err)
	}

	// Bad flags and a broken file change nothing.
	if err := os.WriteFile(file, []byte(`{"hooks":{"preToolUse":{}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	delete(env, "COPILOT_HOME")
	for _, bad := range [][]string{{"--timeout", "0"}, {"--timeout", "1.5s"}, {"--project", filepath.Join(dir, "none")}, {"--project", proj, "--file", file}, {"extra"}, {"--command", " "}, {}} {
		if err := CopilotInstall(bad, &out, &errs, getenv); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if got, _ := os.ReadFile(file); string(got) != `{"hooks":{"preToolUse":{}}}` {
		t.Errorf("a broken file was changed: %s", got)
	}
	env["COPILOT_HOME"] = "relative"
	if err := CopilotInstall(nil, &out, &errs, getenv); err == nil {
		t.Error("a relative COPILOT_HOME: no error")
	}
}

// TestCopilotGuarded: changing Copilot's hooks or settings files is never
// left below a human, whatever the rules allow.
func TestCopilotGuarded(t *testing.T) {
	w := newWorld(t)
	w.writeConfig("[hook]\nallow = [\"Bash(rm *)\", \"Bash(mv *)\", \"Write\"]\n")
	hooks := w.file(".copilot/hooks/countersign.json", "{}")
	repo := w.file("proj/.github/hooks/countersign.json", "{}")
	p := w.policy()
	for _, c := range []struct {
		tool, arg string
	}{
		{"Bash", "rm " + hooks},
		{"Bash", "rm -r " + filepath.Dir(hooks)},
		{"Bash", "rm -r ~/.copilot"},
		{"Bash", "mv .github/hooks/countersign.json /tmp/x"},
		{"Bash", "rm -r .github"},
		{"Write", repo},
		{"Write", filepath.Join(w.home, ".copilot", "settings.json")},
		{"Write", filepath.Join(w.home, ".copilot", "config.json")},
		{"Edit", filepath.Join(w.project, ".github", "copilot", "settings.local.json")},
	} {
		call := &Call{Tool: c.tool, Cwd: w.project, Project: w.project}
		if c.tool == "Bash" {
			call.Command = c.arg
		} else {
			call.Path = c.arg
		}
		if v := p.Decide(context.Background(), call); v.Action != Ask || !strings.Contains(strings.Join(v.Reasons, " "), "GitHub Copilot CLI") {
			t.Errorf("%s %s: %s %q; want it asked", c.tool, c.arg, v.Action, v.Reasons)
		}
	}
	for _, c := range []string{"rm a.txt", "mv a.txt b.txt"} {
		if v := w.bash(p, c); v.Action != Allow {
			t.Errorf("%s: %s %q; want the rule's allow", c, v.Action, v.Reasons)
		}
	}
}

// TestCopilotNullFields: a field Copilot writes as null is one it did not
// write, so a preToolUse input with "toolResult": null or "error": null is
// still a call to decide, not a report after it (which is answered with
// nothing, and so would let a risky call run).
func TestCopilotNullFields(t *testing.T) {
	w := newWorld(t)
	for _, field := range []string{`"toolResult":null`, `"error":null`, `"hookName":null`} {
		in := strings.Replace(strings.ReplaceAll(copilotPreBash, "/tmp/cp/proj", w.project), "{", "{"+field+",", 1)
		var out, errs bytes.Buffer
		code := RunProtocol(context.Background(), &Env{Args: []string{"--timeout", "60"}, Stdin: strings.NewReader(in), Stdout: &out, Stderr: &errs,
			Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()}, Copilot)
		var pre copilotPreOut
		if code != ExitOK || json.Unmarshal(out.Bytes(), &pre) != nil || pre.PermissionDecision != "deny" {
			t.Errorf("rm -r build with %s: exit %d, %q; want it refused", field, code, out.String())
		}
	}
}

// copilotPreMcpCall is the input of Copilot's preMcpToolCall (1.0.102),
// as the real binary gives it just before an MCP tool runs.
const copilotPreMcpCall = `{"sessionId":"93f8338c-c4b3-447f-b953-cceb565bb545","timestamp":1796689693416,"cwd":"/tmp/cp/proj","toolCallId":"toolu_1","serverName":"peer","toolName":"echo","arguments":{"text":"hello"}}`

// TestCopilotPreMcpToolCall: preMcpToolCall, which comes after
// permissionRequest has decided the MCP call and cannot stop it, is read
// as what it is and answered with nothing: not as a preToolUse of a
// Copilot tool named like the MCP tool, which a rule on that name would
// ask a human about again, or which the policy would judge without its
// arguments.
func TestCopilotPreMcpToolCall(t *testing.T) {
	c, err := readCopilot([]byte(copilotPreMcpCall))
	if err != nil || c.Event != CopilotPreMcpToolCall || c.Input != nil {
		t.Fatalf("readCopilot: %+v %v; want preMcpToolCall with no call to decide", c, err)
	}
	w := newWorld(t)
	srv := newTestServer(t)
	w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = srv.URL, srv.agentKey
	w.writeConfig("[hook]\nask = [\"echo\", \"bash\", \"mcp__*\"]\n")
	for _, input := range []string{
		copilotPreMcpCall,
		strings.ReplaceAll(copilotPreMcpCall, `"toolName":"echo","arguments":{"text":"hello"}`, `"toolName":"bash","arguments":{"command":"rm -rf /"}`),
		strings.ReplaceAll(copilotPreMcpCall, `"toolName":"echo"`, `"toolName":"write_powershell"`),
	} {
		input = strings.ReplaceAll(input, "/tmp/cp/proj", w.project)
		var out, errs bytes.Buffer
		code := RunProtocol(context.Background(), &Env{Connect: connect, Args: []string{"--timeout", "5"}, Stdin: strings.NewReader(input),
			Stdout: &out, Stderr: &errs, Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()}, Copilot)
		if code != ExitOK || out.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want no answer", input, code, out.String(), errs.String())
		}
	}
	if got := srv.requests(t); len(got) != 0 {
		t.Errorf("preMcpToolCall asked a human %d times", len(got))
	}
}
