package claudehook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/countersign/countersign"
)

// Gemini is Gemini CLI's hook protocol, `countersign hook gemini`: its
// BeforeTool and AfterTool events, its tools named in Claude Code's
// words, its JSON answer.
var Gemini = &Protocol{
	Agent:   countersign.AgentGemini,
	Name:    "gemini",
	Read:    readGemini,
	Write:   writeGemini,
	Install: InstallGemini,
}

// Gemini CLI's hook events: BeforeTool before a tool runs, AfterTool
// after it ran. Its other events (BeforeModel, SessionStart, …) are not
// about tool calls and get an empty answer.
const (
	GeminiBeforeTool = "BeforeTool"
	GeminiAfterTool  = "AfterTool"
)

// geminiInput is what Gemini CLI writes to a BeforeTool or AfterTool hook.
// Fields the hook does not use are ignored, so that a newer Gemini CLI
// keeps working.
type geminiInput struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	Event          string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	MCP            *geminiMCP      `json:"mcp_context"`
	// ToolResponse, in AfterTool, is what the tool returned: llmContent,
	// returnDisplay and an optional error.
	ToolResponse json.RawMessage `json:"tool_response"`
}

// geminiMCP is the mcp_context of a call of an MCP server's tool: the
// server's name as configured and the tool's own name, which Gemini CLI
// joins into one tool name (mcp_<server>_<tool>) that cannot be split
// back where the server's name holds an underscore.
type geminiMCP struct {
	Server string `json:"server_name"`
	Tool   string `json:"tool_name"`
}

// claudeInput is a hook input in Claude Code's words: the one policy reads
// every agent's calls by Claude Code's tool names and fields.
type claudeInput struct {
	SessionID      string         `json:"session_id"`
	TranscriptPath string         `json:"transcript_path,omitempty"`
	Cwd            string         `json:"cwd"`
	Event          string         `json:"hook_event_name"`
	ToolName       string         `json:"tool_name"`
	ToolInput      map[string]any `json:"tool_input"`
}

// readGemini reads one Gemini CLI hook input: BeforeTool is the event
// before a call, AfterTool the event after it ran, and the call is read
// in Claude Code's words (geminiCall). Any other event has no call. An
// input it cannot read fully is an error: the call is refused.
func readGemini(data []byte, cwd string, getenv func(string) string) (Event, *Input, *Call, error) {
	var in geminiInput
	if err := json.Unmarshal(data, &in); err != nil || in.Event == "" {
		return EventOther, nil, nil, errNoEvent
	}
	ev := EventOther
	switch in.Event {
	case GeminiBeforeTool:
		ev = EventBefore
	case GeminiAfterTool:
		ev = EventAfter
	default:
		return ev, &Input{Event: in.Event}, nil, nil
	}
	claude, err := geminiToClaude(&in)
	if err != nil {
		return ev, &Input{Event: in.Event, SessionID: in.SessionID}, nil, err
	}
	// Gemini CLI starts its hooks with the project's directory in
	// GEMINI_PROJECT_DIR; it is the input's cwd, which a shell call's
	// dir_path does not move.
	project := getenv("GEMINI_PROJECT_DIR")
	if project == "" {
		project = in.Cwd
	}
	ci, call, err := parseCall(claude, cwd, project)
	if ci == nil {
		ci = &Input{}
	}
	ci.Event = in.Event
	ci.agent = &agentCall{tool: in.ToolName, args: in.ToolInput, cwd: in.Cwd, mcp: in.MCP}
	return ev, ci, call, err
}

// geminiToClaude is a Gemini CLI tool event as Claude Code's hook input.
func geminiToClaude(in *geminiInput) ([]byte, error) {
	if in.ToolName == "" {
		return nil, errors.New("the input has no tool_name")
	}
	var args map[string]any
	if err := json.Unmarshal(in.ToolInput, &args); err != nil || args == nil {
		return nil, fmt.Errorf("tool_input of %s is not a JSON object", in.ToolName)
	}
	tool, input, cwd, err := geminiCall(in.ToolName, args, in.MCP, in.Cwd)
	if err != nil {
		return nil, err
	}
	return json.Marshal(claudeInput{SessionID: in.SessionID, TranscriptPath: in.TranscriptPath, Cwd: cwd,
		Event: in.Event, ToolName: tool, ToolInput: input})
}

// geminiTools name Gemini CLI's tools in Claude Code's words: the tool
// and, field by field, what Gemini CLI calls Claude Code's field.
var geminiTools = map[string]struct {
	tool   string
	fields map[string]string // Gemini CLI's field → Claude Code's
}{
	"run_shell_command": {"Bash", map[string]string{"command": "command", "description": "description", "is_background": "run_in_background"}},
	"write_file":        {"Write", map[string]string{"file_path": "file_path", "content": "content"}},
	"replace":           {"Edit", map[string]string{"file_path": "file_path", "old_string": "old_string", "new_string": "new_string", "allow_multiple": "replace_all"}},
	"read_file":         {"Read", map[string]string{"file_path": "file_path"}},
	"list_directory":    {"LS", map[string]string{"dir_path": "path"}},
	"glob":              {"Glob", map[string]string{"pattern": "pattern", "dir_path": "path"}},
	"grep_search":       {"Grep", map[string]string{"pattern": "pattern", "dir_path": "path"}},
	"google_web_search": {"WebSearch", map[string]string{"query": "query"}},
	"web_fetch":         {"WebFetch", map[string]string{"prompt": "prompt"}},
}

// geminiCall names a Gemini CLI tool call in Claude Code's words: its
// tool, its input and the directory it runs in (geminiTools). An MCP
// server's tool, known by its mcp_context, is mcp__<server>__<tool>. Any
// other tool keeps its name and arguments: no rule written for Claude
// Code's tools matches it by accident.
func geminiCall(name string, args map[string]any, mcp *geminiMCP, cwd string) (string, map[string]any, string, error) {
	if mcp != nil && mcp.Server != "" && mcp.Tool != "" {
		return "mcp__" + mcp.Server + "__" + mcp.Tool, args, cwd, nil
	}
	t, ok := geminiTools[name]
	if !ok {
		return name, args, cwd, nil
	}
	out := map[string]any{}
	for from, to := range t.fields {
		if v, ok := args[from]; ok {
			out[to] = v
		}
	}
	switch name {
	case "run_shell_command":
		if _, ok := args["command"].(string); !ok {
			return "", nil, "", errors.New("tool_input of run_shell_command has no command string")
		}
		dir, err := shellDir(args["dir_path"], cwd)
		return t.tool, out, dir, err
	case "web_fetch":
		// Gemini CLI's web_fetch takes a prompt holding the URLs; the
		// first one is the call's URL in Claude Code's words.
		if p, ok := args["prompt"].(string); ok {
			if u := firstURL.FindString(p); u != "" {
				out["url"] = u
			}
		}
	}
	return t.tool, out, cwd, nil
}

// shellDir is where a shell call runs: its dir_path, relative to the
// project, or the project. Its command's relative paths are resolved
// there.
func shellDir(dir any, cwd string) (string, error) {
	if dir == nil || dir == "" {
		return cwd, nil
	}
	d, ok := dir.(string)
	if !ok {
		return "", errors.New("tool_input.dir_path of run_shell_command is not a string")
	}
	if !filepath.IsAbs(d) {
		if !filepath.IsAbs(cwd) {
			return "", errors.New("tool_input.dir_path of run_shell_command is relative, and the input has no absolute cwd")
		}
		d = filepath.Join(cwd, d)
	}
	return filepath.Clean(d), nil
}

// firstURL finds a URL in web_fetch's prompt.
var firstURL = regexp.MustCompile(`https?://[^\s"'<>]+`)

// geminiOut is the answer to a BeforeTool hook. decision "deny" refuses
// the call with reason as the tool's error, which the model reads;
// continue false stops the agent; hookSpecificOutput.tool_input is merged
// over the call's arguments. An empty object leaves the call to Gemini
// CLI's own policy.
type geminiOut struct {
	Decision           string         `json:"decision,omitempty"`
	Reason             string         `json:"reason,omitempty"`
	Continue           *bool          `json:"continue,omitempty"`
	StopReason         string         `json:"stopReason,omitempty"`
	HookSpecificOutput *geminiOutSpec `json:"hookSpecificOutput,omitempty"`
}

type geminiOutSpec struct {
	ToolInput map[string]any `json:"tool_input,omitempty"`
}

// renderGemini returns the stdout of the answer: always one JSON object,
// since Gemini CLI reads an empty stdout's stderr as the answer.
func renderGemini(in *Input, o outcome) []byte {
	var edited map[string]any
	if o.action == Allow && o.edit != nil {
		var err error
		if edited, err = geminiEdited(in, o.input); err != nil {
			o = o.edit.refused(in.ToolName, "Gemini CLI cannot run it as edited: "+err.Error())
		}
	}
	var out geminiOut
	switch o.action {
	case Allow:
		out.Decision, out.Reason = "allow", o.reason
		if edited != nil {
			// The call's arguments whole, as edited: Gemini CLI
			// merges them over its own, or builds the call of them.
			out.HookSpecificOutput = &geminiOutSpec{ToolInput: edited}
		} else if cmd := updatedCommand(o.input); cmd != "" {
			// The only input the hook changes is a Bash line's (the
			// approval the rm wrapper reads): run_shell_command's
			// command has the same name.
			out.HookSpecificOutput = &geminiOutSpec{ToolInput: map[string]any{"command": cmd}}
		}
	case Deny:
		out.Decision, out.Reason = "deny", o.reason
		if o.stop {
			no := false
			out.Continue, out.StopReason = &no, o.reason
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "&&" and "<" stay readable in reasons
	enc.Encode(out)
	return b.Bytes()
}

// updatedCommand is the command of an updated Bash input, or "".
func updatedCommand(input json.RawMessage) string {
	var v struct {
		Command string `json:"command"`
	}
	if len(input) == 0 || json.Unmarshal(input, &v) != nil {
		return ""
	}
	return v.Command
}

// writeGemini renders an answer as Gemini CLI reads it: JSON on standard
// output and status 0.
func writeGemini(_ Event, in *Input, o outcome) ([]byte, int) {
	return renderGemini(in, o), ExitOK
}

// geminiHookName names countersign's hook entries in Gemini CLI's
// settings, in its /hooks panel and its logs.
const geminiHookName = "countersign"

// isGeminiCommand reports whether a hook command runs `countersign hook
// gemini`, whatever the path of the binary.
func isGeminiCommand(cmd string) bool {
	f := strings.Fields(cmd)
	if len(f) < 3 || f[1] != "hook" || f[2] != "gemini" {
		return false
	}
	base := filepath.Base(f[0])
	return base == "countersign" || base == "countersign-agent"
}
