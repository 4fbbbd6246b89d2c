package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/client/api"
)

// geminiHookInput is a Gemini CLI hook input as it sends one.
func geminiHookInput(event, tool string, toolInput map[string]any, mcp map[string]any) []byte {
	in := map[string]any{"session_id": "9f2c", "transcript_path": "/home/u/.gemini/tmp/proj/chats/session.jsonl",
		"cwd": "/home/u/proj", "hook_event_name": event, "timestamp": "2026-12-07T21:27:05.617Z",
		"tool_name": tool, "tool_input": toolInput}
	if mcp != nil {
		in["mcp_context"] = mcp
	}
	data, _ := json.Marshal(in)
	return data
}

// TestReadGemini: each Gemini CLI tool is read as the call Claude Code's
// tool of the same kind makes, so that one policy judges both.
func TestReadGemini(t *testing.T) {
	none := func(string) string { return "" }
	for _, tc := range []struct {
		name, tool string
		input      map[string]any
		mcp        map[string]any
		wantTool   string
		wantCwd    string
		command    string
		path       string
		wantInput  string // the tool input in Claude Code's words
	}{
		{name: "shell", tool: "run_shell_command", input: map[string]any{"command": "rm -r build", "description": "clean"},
			wantTool: "Bash", wantCwd: "/home/u/proj", command: "rm -r build", wantInput: `{"command":"rm -r build","description":"clean"}`},
		{name: "shell in a subdirectory", tool: "run_shell_command", input: map[string]any{"command": "rm -r build", "dir_path": "sub/dir", "is_background": true},
			wantTool: "Bash", wantCwd: "/home/u/proj/sub/dir", command: "rm -r build", wantInput: `{"command":"rm -r build","run_in_background":true}`},
		{name: "shell in an absolute directory", tool: "run_shell_command", input: map[string]any{"command": "ls", "dir_path": "/tmp/../srv"},
			wantTool: "Bash", wantCwd: "/srv", command: "ls", wantInput: `{"command":"ls"}`},
		{name: "write", tool: "write_file", input: map[string]any{"file_path": "/etc/motd", "content": "hi\n"},
			wantTool: "Write", wantCwd: "/home/u/proj", path: "/etc/motd", wantInput: `{"content":"hi\n","file_path":"/etc/motd"}`},
		{name: "relative write", tool: "write_file", input: map[string]any{"file_path": "src/a.go", "content": ""},
			wantTool: "Write", wantCwd: "/home/u/proj", path: "/home/u/proj/src/a.go", wantInput: `{"content":"","file_path":"src/a.go"}`},
		{name: "replace", tool: "replace", input: map[string]any{"file_path": "/a", "old_string": "x", "new_string": "y", "allow_multiple": true, "instruction": "fix"},
			wantTool: "Edit", wantCwd: "/home/u/proj", path: "/a", wantInput: `{"file_path":"/a","new_string":"y","old_string":"x","replace_all":true}`},
		{name: "read", tool: "read_file", input: map[string]any{"file_path": "/etc/passwd", "start_line": 1},
			wantTool: "Read", wantCwd: "/home/u/proj", path: "/etc/passwd", wantInput: `{"file_path":"/etc/passwd"}`},
		{name: "fetch", tool: "web_fetch", input: map[string]any{"prompt": "summarise https://example.com/a?b=1 please"},
			wantTool: "WebFetch", wantCwd: "/home/u/proj", wantInput: `{"prompt":"summarise https://example.com/a?b=1 please","url":"https://example.com/a?b=1"}`},
		{name: "search", tool: "grep_search", input: map[string]any{"pattern": "TODO", "dir_path": "src"},
			wantTool: "Grep", wantCwd: "/home/u/proj", wantInput: `{"path":"src","pattern":"TODO"}`},
		{name: "MCP tool", tool: "mcp_my_server_echo", input: map[string]any{"text": "hi"}, mcp: map[string]any{"server_name": "my_server", "tool_name": "echo", "command": "peer"},
			wantTool: "mcp__my_server__echo", wantCwd: "/home/u/proj", wantInput: `{"text":"hi"}`},
		{name: "other tool", tool: "write_todos", input: map[string]any{"todos": []any{}},
			wantTool: "write_todos", wantCwd: "/home/u/proj", wantInput: `{"todos":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev, in, call, err := readGemini(geminiHookInput(GeminiBeforeTool, tc.tool, tc.input, tc.mcp), "/", none)
			if err != nil || ev != EventBefore {
				t.Fatalf("event %v, error %v", ev, err)
			}
			if in.Event != GeminiBeforeTool || in.SessionID != "9f2c" || in.ToolName != tc.wantTool || string(in.ToolInput) != tc.wantInput {
				t.Errorf("input %s %s %s %s; want %s %s", in.Event, in.SessionID, in.ToolName, in.ToolInput, tc.wantTool, tc.wantInput)
			}
			if call.Tool != tc.wantTool || call.Cwd != tc.wantCwd || call.Project != "/home/u/proj" || call.Command != tc.command || call.Path != tc.path || call.Mode != "" {
				t.Errorf("call %+v; want %s in %s, command %q, path %q, no mode", call, tc.wantTool, tc.wantCwd, tc.command, tc.path)
			}
		})
	}
}

// TestReadGeminiEvents: AfterTool is the call as it ran; another event
// has no call; an input that cannot be read is refused, with an input to
// answer when the event is known.
func TestReadGeminiEvents(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"GEMINI_PROJECT_DIR": "/home/u"}[k]
	}
	ev, in, call, err := readGemini(geminiHookInput(GeminiAfterTool, "run_shell_command", map[string]any{"command": "ls"}, nil), "/", env)
	if err != nil || ev != EventAfter || in.Event != GeminiAfterTool || call.Command != "ls" || call.Project != "/home/u" {
		t.Errorf("AfterTool: %v %+v %+v %v", ev, in, call, err)
	}
	ev, in, call, err = readGemini([]byte(`{"hook_event_name":"SessionStart","source":"startup"}`), "/", env)
	if err != nil || ev != EventOther || in.Event != "SessionStart" || call != nil {
		t.Errorf("SessionStart: %v %+v %+v %v", ev, in, call, err)
	}
	for _, bad := range []string{`[]`, `{}`, `{"hook_event_name":""}`, `not json`} {
		if ev, in, _, err := readGemini([]byte(bad), "/", env); err == nil || in != nil || ev != EventOther {
			t.Errorf("%s: %v %+v %v; want an error and no input", bad, ev, in, err)
		}
	}
	for name, input := range map[string][]byte{
		"no command":         geminiHookInput(GeminiBeforeTool, "run_shell_command", map[string]any{"description": "x"}, nil),
		"command not text":   geminiHookInput(GeminiBeforeTool, "run_shell_command", map[string]any{"command": 1}, nil),
		"dir_path not text":  geminiHookInput(GeminiBeforeTool, "run_shell_command", map[string]any{"command": "ls", "dir_path": []any{}}, nil),
		"no tool name":       geminiHookInput(GeminiBeforeTool, "", map[string]any{"command": "ls"}, nil),
		"input not object":   []byte(`{"hook_event_name":"BeforeTool","cwd":"/p","tool_name":"write_file","tool_input":"x"}`),
		"write without path": geminiHookInput(GeminiBeforeTool, "write_file", map[string]any{"content": "x"}, nil),
	} {
		ev, in, _, err := readGemini(input, "/", env)
		if err == nil || in == nil || in.Event != GeminiBeforeTool || ev != EventBefore {
			t.Errorf("%s: %v %+v %v; want an error to deny", name, ev, in, err)
		}
	}
}

// TestRenderGemini: each outcome in Gemini CLI's words.
func TestRenderGemini(t *testing.T) {
	for _, tc := range []struct {
		o    outcome
		want string
	}{
		{outcome{action: Prompt}, `{}`},
		{outcome{action: Allow, reason: "countersign: approved by alice (K7F-2QX)"}, `{"decision":"allow","reason":"countersign: approved by alice (K7F-2QX)"}`},
		{outcome{action: Allow, reason: "ok", input: json.RawMessage(`{"command":"export A=1\nrm -r build","description":"x"}`)},
			`{"decision":"allow","reason":"ok","hookSpecificOutput":{"tool_input":{"command":"export A=1\nrm -r build"}}}`},
		{outcome{action: Deny, reason: "no && never <b>"}, `{"decision":"deny","reason":"no && never <b>"}`},
		{outcome{action: Deny, reason: "stop", stop: true}, `{"decision":"deny","reason":"stop","continue":false,"stopReason":"stop"}`},
	} {
		out, code := writeGemini(EventBefore, &Input{Event: GeminiBeforeTool}, tc.o)
		if code != ExitOK || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("%+v: exit %d, %s; want %s", tc.o, code, out, tc.want)
		}
	}
}

// TestGeminiHookAsks: a risky Gemini CLI call is asked as the agent
// gemini, in its own session, and the human's refusal is the answer.
func TestGeminiHookAsks(t *testing.T) {
	w := newWorld(t)
	srv := newTestServer(t)
	w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = srv.URL, srv.agentKey
	input, _ := json.Marshal(map[string]any{"session_id": "9f2c", "cwd": w.project, "hook_event_name": "BeforeTool",
		"timestamp": "2026-12-07T21:27:05.617Z", "tool_name": "run_shell_command", "tool_input": map[string]any{"command": "rm -r build"}})
	done := make(chan *client.Request, 1)
	go func() {
		r := srv.pending(t)
		if r != nil {
			srv.decide(t, r, client.Decision{Decision: "deny", Text: "not now"})
		}
		done <- r
	}()
	var out, errs bytes.Buffer
	code := RunProtocol(context.Background(), &Env{Connect: connect, Stdin: bytes.NewReader(input), Stdout: &out, Stderr: &errs,
		Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()}, Gemini)
	r := <-done
	if r == nil {
		t.Fatalf("no request; exit %d: %s %s", code, out.String(), errs.String())
	}
	want := `{"decision":"deny","reason":"countersign: alice denied this call (` + r.Reference + `): not now"}`
	if code != ExitOK || strings.TrimSpace(out.String()) != want {
		t.Errorf("exit %d: %s; want %s", code, out.String(), want)
	}
	if r.Kind != "tool" || r.Action != "Bash" || r.Context.Agent != countersign.AgentGemini || r.Context.SessionID != "gemini:9f2c" || r.Context.Cwd != w.project {
		t.Errorf("request %s %s, context %+v; want a Bash request of gemini in its session", r.Kind, r.Action, r.Context)
	}
}

// TestGeminiHookUnreadable: an input with no event is blocked by exit
// status 2, which Gemini CLI reads as a block with stderr as the reason.
func TestGeminiHookUnreadable(t *testing.T) {
	w := newWorld(t)
	var out, errs bytes.Buffer
	code := RunProtocol(context.Background(), &Env{Stdin: strings.NewReader(`{"tool_name":"run_shell_command"}`), Stdout: &out, Stderr: &errs,
		Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()}, Gemini)
	if code != ExitBlock || out.Len() != 0 || !strings.Contains(errs.String(), "the call is blocked") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2 and the reason on stderr", code, out.String(), errs.String())
	}
}

// TestCoverInputAgent: an approved rm of Gemini CLI tells the rm wrapper
// its agent too, whose name the server puts before the session's; Claude
// Code's line stays as it was.
func TestCoverInputAgent(t *testing.T) {
	in := &Input{SessionID: "9f2c", ToolInput: json.RawMessage(`{"command":"rm -r build"}`)}
	call := &Call{Tool: "Bash", Command: "rm -r build"}
	sc := &api.Scope{Paths: []string{"/p/build"}, Commands: []string{"rm"}}
	for _, tc := range []struct {
		p    *Protocol
		want string
	}{
		{Gemini, "export COUNTERSIGN_APPROVAL=req_0123456789ab COUNTERSIGN_SESSION=9f2c COUNTERSIGN_AGENT=gemini\nrm -r build"},
		{Claude, "export COUNTERSIGN_APPROVAL=req_0123456789ab COUNTERSIGN_SESSION=9f2c\nrm -r build"},
	} {
		if got := updatedCommand(coverInput(tc.p.Agent, in, call, sc, "req_0123456789ab")); got != tc.want {
			t.Errorf("%s: %q; want %q", tc.p.Name, got, tc.want)
		}
	}
}

// TestGeminiGuarded: changing Gemini CLI's settings, which hold the hook,
// or its policy files, which let calls run unasked, is asked of a human,
// however the call is made and whatever rule allows it.
func TestGeminiGuarded(t *testing.T) {
	w := newWorld(t)
	w.writeConfig("[hook]\nallow = [\"Write(~/**)\", \"Edit(~/**)\", \"Bash(echo:*)\", \"Bash(rm:*)\"]\n")
	p := w.policy()
	env := func(k string) string { return map[string]string{"GEMINI_PROJECT_DIR": w.project}[k] }
	for name, tc := range map[string]struct {
		tool  string
		input map[string]any
	}{
		"project settings":  {"write_file", map[string]any{"file_path": ".gemini/settings.json", "content": "{}"}},
		"user settings":     {"replace", map[string]any{"file_path": w.home + "/.gemini/settings.json", "old_string": "hook", "new_string": "x"}},
		"policy file":       {"write_file", map[string]any{"file_path": w.home + "/.gemini/policies/mine.toml", "content": "[[rule]]"}},
		"settings by shell": {"run_shell_command", map[string]any{"command": "echo '{}' > .gemini/settings.json"}},
		"the whole folder":  {"run_shell_command", map[string]any{"command": "rm -r " + w.home + "/.gemini", "dir_path": "src"}},
	} {
		input, _ := json.Marshal(map[string]any{"session_id": "9f2c", "cwd": w.project, "hook_event_name": GeminiBeforeTool,
			"tool_name": tc.tool, "tool_input": tc.input})
		_, _, call, err := readGemini(input, "/", env)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		v := p.Decide(context.Background(), call)
		if v.Action != Ask || !strings.Contains(strings.Join(v.Reasons, " "), "Gemini CLI") {
			t.Errorf("%s: %v %q; want asked as a change of Gemini CLI's settings", name, v.Action, v.Reasons)
		}
	}
	v := p.Decide(context.Background(), &Call{Tool: "Write", Path: w.project + "/notes/settings.json", Cwd: w.project, Project: w.project})
	if v.Action != Allow {
		t.Errorf("another settings.json: %v %q; want the rule's allow", v.Action, v.Reasons)
	}
}
