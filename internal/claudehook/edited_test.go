package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/client/api"
	"github.com/countersign/countersign/internal/saferm"
)

// editServer is a server whose human approves every request with an
// edit: the consumption answers the request edited to edited (the tool
// input in Claude Code's words), its original the arguments the hook
// sent, or original where it is set (a forged answer).
type editServer struct {
	edited   json.RawMessage
	original json.RawMessage
	noEdited bool // the answer leaves "edited" out
	created  api.CreateInput
	consumed bool
}

func (s *editServer) Create(_ context.Context, in api.CreateInput) (*api.Request, bool, error) {
	s.created = in
	return &api.Request{ID: "req_0123456789abcdef", Reference: "K7F-2QX", Action: in.Action, Status: "approved", DecidedBy: "alice"}, true, nil
}

func (s *editServer) Get(context.Context, string) (*api.Request, error) {
	return nil, api.ErrUnreachable
}

func (s *editServer) Wait(context.Context, string, time.Duration) (*api.Request, error) {
	return nil, api.ErrUnreachable
}

func (s *editServer) Consume(_ context.Context, id string) (*api.Request, error) {
	s.consumed = true
	orig := s.original
	if orig == nil {
		orig = s.created.Arguments
	}
	return &api.Request{ID: id, Reference: "K7F-2QX", Action: s.created.Action, Status: "consumed", DecidedBy: "alice",
		Arguments: s.edited, Edited: !s.noEdited, Original: &api.Original{Arguments: orig}}, nil
}

func (s *editServer) Cancel(context.Context, string) (*api.Request, error) {
	return nil, api.ErrUnreachable
}

func (s *editServer) ReportRan(context.Context, api.RanInput) (*api.Request, error) {
	return nil, api.ErrUnreachable
}

// runEdited runs the hook of p on one input against s, in process.
func runEdited(t *testing.T, w *world, p *Protocol, s *editServer, input map[string]any) (map[string]any, string) {
	t.Helper()
	w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = "http://countersign.invalid", "csk_test"
	in, _ := json.Marshal(input)
	var stdout, stderr bytes.Buffer
	code := RunProtocol(context.Background(), &Env{Connect: func(string, string) saferm.Server { return s },
		Stdin: bytes.NewReader(in), Stdout: &stdout, Stderr: &stderr,
		Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()}, p)
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	if !s.consumed {
		t.Fatalf("the approval was not consumed: %s", stdout.String())
	}
	var out map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("answer %q: %v", stdout.String(), err)
	}
	return out, stdout.String()
}

// dig returns the value at a path of keys.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// TestEditedClaude: an approval with an edit answers Claude Code allow
// with the edited input, at PreToolUse (updatedInput) and at
// PermissionRequest (decision.updatedInput); a delete in the edited
// command is covered as an unedited approval's is.
func TestEditedClaude(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	call := func(event string) map[string]any {
		return map[string]any{"session_id": "s1", "cwd": w.project, "hook_event_name": event, "permission_mode": "default",
			"tool_name": "Bash", "tool_input": map[string]any{"command": "rm -rf build src", "description": "clean"}, "tool_use_id": "t1"}
	}
	edited := json.RawMessage(`{"command":"rm -rf build","description":"clean"}`)
	out, raw := runEdited(t, w, Claude, &editServer{edited: edited}, call("PreToolUse"))
	cmd, _ := dig(out, "hookSpecificOutput", "updatedInput", "command").(string)
	if dig(out, "hookSpecificOutput", "permissionDecision") != "allow" || !strings.HasSuffix(cmd, "\nrm -rf build") ||
		!strings.HasPrefix(cmd, "export COUNTERSIGN_APPROVAL=req_0123456789abcdef ") ||
		dig(out, "hookSpecificOutput", "updatedInput", "description") != "clean" {
		t.Errorf("PreToolUse: %s; want allow with the edited command, covered", raw)
	}
	if r, _ := dig(out, "hookSpecificOutput", "permissionDecisionReason").(string); !strings.Contains(r, "alice") || !strings.Contains(r, "edited") {
		t.Errorf("reason %q; want it to name the edit and who made it", r)
	}
	out, raw = runEdited(t, w, Claude, &editServer{edited: json.RawMessage(`{"command":"ls build"}`)}, call("PermissionRequest"))
	if dig(out, "hookSpecificOutput", "decision", "behavior") != "allow" || dig(out, "hookSpecificOutput", "decision", "updatedInput", "command") != "ls build" {
		t.Errorf("PermissionRequest: %s; want allow with the edited command", raw)
	}
}

// TestEditedRefused: an edit runs only as the edit of this very call,
// readable, and allowed by this machine's policy; otherwise the hook
// denies, names the edit and says what was approved instead.
func TestEditedRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.writeConfig("[hook]\ndeny = [\"Bash(curl *)\"]\n")
	call := map[string]any{"session_id": "s1", "cwd": w.project, "hook_event_name": "PreToolUse", "permission_mode": "default",
		"tool_name": "Bash", "tool_input": map[string]any{"command": "rm -rf build"}, "tool_use_id": "t1"}
	for _, tc := range []struct {
		name string
		s    *editServer
		want string
	}{
		{"another call's original", &editServer{edited: json.RawMessage(`{"command":"rm -rf build/x.o"}`), original: json.RawMessage(`{"command":"rm -rf src"}`)},
			"the approval's original is not this call"},
		{"not said to be edited", &editServer{edited: json.RawMessage(`{"command":"rm -rf build/x.o"}`), noEdited: true},
			"does not describe the edit"},
		{"not an object", &editServer{edited: json.RawMessage(`"rm -rf build/x.o"`)}, "not a JSON object"},
		{"no command", &editServer{edited: json.RawMessage(`{"description":"x"}`)}, "cannot run"},
		{"refused by the policy", &editServer{edited: json.RawMessage(`{"command":"curl https://example.com"}`)}, "policy refuses the edited call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, raw := runEdited(t, w, Claude, tc.s, call)
			reason, _ := dig(out, "hookSpecificOutput", "permissionDecisionReason").(string)
			if dig(out, "hookSpecificOutput", "permissionDecision") != "deny" || dig(out, "hookSpecificOutput", "updatedInput") != nil ||
				!strings.Contains(reason, tc.want) || !strings.Contains(reason, "only as they edited it") || !strings.Contains(reason, "nothing ran") {
				t.Errorf("answer %s; want a deny naming the edit and %q", raw, tc.want)
			}
		})
	}
}

// TestEditedCodex: Codex takes the edited input at PreToolUse
// (updatedInput); its PermissionRequest cannot change the input, so an
// edited approval denies there, saying what was approved instead.
func TestEditedCodex(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	call := func(event string) map[string]any {
		return map[string]any{"session_id": "s1", "turn_id": "t1", "cwd": w.project, "hook_event_name": event, "model": "gpt-5",
			"permission_mode": "default", "tool_name": "Bash", "tool_input": map[string]any{"command": "rm -rf build src"}, "tool_use_id": "c1"}
	}
	edited := json.RawMessage(`{"command":"ls build"}`)
	out, raw := runEdited(t, w, Codex, &editServer{edited: edited}, call("PreToolUse"))
	if dig(out, "hookSpecificOutput", "permissionDecision") != "allow" || dig(out, "hookSpecificOutput", "updatedInput", "command") != "ls build" {
		t.Errorf("PreToolUse: %s; want allow with the edited command", raw)
	}
	out, raw = runEdited(t, w, Codex, &editServer{edited: edited}, call("PermissionRequest"))
	msg, _ := dig(out, "hookSpecificOutput", "decision", "message").(string)
	if dig(out, "hookSpecificOutput", "decision", "behavior") != "deny" || !strings.Contains(msg, "Codex cannot run an edited call") ||
		!strings.Contains(msg, "instead: ls build") || strings.Contains(raw, "updatedInput") {
		t.Errorf("PermissionRequest: %s; want a deny that names the edit", raw)
	}
}

// TestEditedGemini: Gemini CLI gets the call's arguments whole, in its
// own names, with the edited fields (and what Claude Code's words leave
// out, dir_path, kept); an edit that has no exact form in its arguments
// is refused.
func TestEditedGemini(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	call := func(tool string, input map[string]any) map[string]any {
		return map[string]any{"session_id": "s1", "cwd": w.project, "hook_event_name": "BeforeTool", "tool_name": tool, "tool_input": input}
	}
	shell := call("run_shell_command", map[string]any{"command": "rm -rf build src", "description": "clean", "dir_path": "."})
	out, raw := runEdited(t, w, Gemini, &editServer{edited: json.RawMessage(`{"command":"ls build","description":"look"}`)}, shell)
	ti, _ := dig(out, "hookSpecificOutput", "tool_input").(map[string]any)
	if out["decision"] != "allow" || ti["command"] != "ls build" || ti["description"] != "look" || ti["dir_path"] != "." || len(ti) != 3 {
		t.Errorf("run_shell_command: %s; want allow with the whole edited arguments", raw)
	}
	for _, tc := range []struct {
		name   string
		edited string
		want   string
	}{
		{"a field taken away", `{"command":"ls build"}`, "takes away the argument description"},
		{"a field Gemini CLI lacks", `{"command":"ls build","description":"clean","timeout":5}`, "no exact form"},
	} {
		out, raw := runEdited(t, w, Gemini, &editServer{edited: json.RawMessage(tc.edited)}, shell)
		if r, _ := out["reason"].(string); out["decision"] != "deny" || out["hookSpecificOutput"] != nil || !strings.Contains(r, tc.want) ||
			!strings.Contains(r, "Gemini CLI cannot run it as edited") {
			t.Errorf("%s: %s; want a deny saying %q", tc.name, raw, tc.want)
		}
	}
}

// TestEditedCopilot: Copilot's preToolUse takes the edited arguments in
// its own names (modifiedArgs); its permissionRequest cannot change
// them, so an edited approval denies there.
func TestEditedCopilot(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	pre := map[string]any{"sessionId": "s1", "timestamp": 1, "cwd": w.project, "toolName": "bash",
		"toolArgs": map[string]any{"command": "rm -rf build src", "description": "clean", "mode": "sync"}}
	out, raw := runEdited(t, w, Copilot, &editServer{edited: json.RawMessage(`{"command":"ls build","description":"clean","mode":"sync"}`)}, pre)
	if out["permissionDecision"] != "allow" || dig(out, "modifiedArgs", "command") != "ls build" || dig(out, "modifiedArgs", "mode") != "sync" {
		t.Errorf("preToolUse: %s; want allow with the edited arguments", raw)
	}
	perm := map[string]any{"hookName": "permissionRequest", "sessionId": "s1", "timestamp": 1, "cwd": w.project, "toolName": "bash",
		"toolInput": map[string]any{"command": "rm -rf build src"}}
	out, raw = runEdited(t, w, Copilot, &editServer{edited: json.RawMessage(`{"command":"ls build"}`)}, perm)
	if m, _ := out["message"].(string); out["behavior"] != "deny" || !strings.Contains(m, "Copilot cannot run an edited call") ||
		!strings.Contains(m, "instead: ls build") {
		t.Errorf("permissionRequest: %s; want a deny that names the edit", raw)
	}
}
