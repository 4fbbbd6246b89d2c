package claudehook

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign"
)

// GitHub Copilot CLI's hooks (`countersign hook copilot`). Copilot runs a
// command hook with one JSON object on standard input, in camelCase:
//
//   - preToolUse, before every tool call: sessionId, timestamp, cwd,
//     toolName, toolArgs (an object, {} for a tool without arguments;
//     read too when it is a JSON string holding one). The answer is {"permissionDecision": "allow"|"deny",
//     "permissionDecisionReason", "modifiedArgs"}; a deny's reason reaches
//     the model as "Denied by preToolUse hook: <reason>".
//   - permissionRequest, before Copilot's own permission check of a shell
//     command, a file write or an MCP tool, in every permission mode
//     (--allow-all-tools and --yolo too): hookName "permissionRequest",
//     sessionId, timestamp, cwd, toolName, toolInput, permissionSuggestions.
//     A write is toolName "edit" with toolInput {file_path, diff}, an MCP
//     tool "server/tool". The answer is {"behavior": "allow"|"deny",
//     "message", "interrupt"}; a deny's message reaches the model as
//     "Permission denied by a PermissionRequest hook: <message>".
//   - postToolUse, after a call that succeeded: the preToolUse fields and
//     toolResult {resultType, textResultForLlm}.
//   - preMcpToolCall, just before an MCP tool is called, after
//     permissionRequest: sessionId, timestamp, cwd, toolCallId,
//     serverName, toolName (the tool's own name), arguments. It sets the
//     request's metadata and cannot stop the call (1.0.102 runs the tool
//     whatever the hook answers or exits with), so the hook reads it as
//     what it is and answers nothing: MCP tools are decided at
//     permissionRequest. Taken for a preToolUse, it would be a call of a
//     Copilot tool of the MCP tool's name, without arguments.
//
// An "allow" to preToolUse skips Copilot's permission check of a shell
// command only: a file write or an MCP tool still goes through it, and so
// through permissionRequest. Those calls are therefore decided, and asked,
// at permissionRequest, once; preToolUse decides everything else (shell
// commands, reads, the other tools).
//
// A hook that outlives its timeoutSec lets the call proceed, so the hook
// answers before it, as it does for Claude Code.

// Copilot's hook events.
const (
	CopilotPreToolUse        = "preToolUse"
	CopilotPermissionRequest = "permissionRequest"
	CopilotPostToolUse       = "postToolUse"
	CopilotPreMcpToolCall    = "preMcpToolCall"
)

// copilotInput is what Copilot writes to the hook's standard input.
// Fields the hook does not use are ignored.
type copilotInput struct {
	HookName   string          `json:"hookName"`
	SessionID  string          `json:"sessionId"`
	Cwd        string          `json:"cwd"`
	ToolName   string          `json:"toolName"`
	ToolArgs   json.RawMessage `json:"toolArgs"`
	ToolInput  json.RawMessage `json:"toolInput"`
	ToolResult json.RawMessage `json:"toolResult"`
	Error      json.RawMessage `json:"error"`
	ServerName *string         `json:"serverName"` // preMcpToolCall's alone
}

// copilotEvent names the event of an input: Copilot's command hooks carry
// no event name except permissionRequest's hookName, so the fields tell.
func copilotEvent(in *copilotInput) string {
	switch {
	case in.HookName != "":
		return in.HookName
	case written(in.ToolResult):
		return CopilotPostToolUse
	case written(in.Error):
		return "postToolUseFailure"
	case in.ServerName != nil:
		return CopilotPreMcpToolCall
	case in.ToolArgs != nil || in.ToolName != "":
		return CopilotPreToolUse
	}
	return ""
}

// written reports whether a field is in the input with a value: a null is
// no result, and does not make a call to decide a report after it, which
// is answered with nothing.
func written(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// copilotCall is one Copilot hook input read in Claude Code's words, so
// that one policy judges every agent's calls.
type copilotCall struct {
	Event string // Copilot's event
	// Input is the call as Claude Code's PreToolUse or PermissionRequest
	// input: session_id, cwd, hook_event_name, tool_name, tool_input.
	Input *Input
	// Deferred is set on a preToolUse call that permissionRequest
	// decides (a file write, an MCP tool): preToolUse leaves it alone.
	Deferred bool
	// agent is the call in Copilot's words.
	agent *agentCall
}

// readCopilot parses a Copilot hook input. An input it cannot read fully
// is an error: the caller denies.
func readCopilot(data []byte) (*copilotCall, error) {
	var in copilotInput
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, fmt.Errorf("the hook input is not Copilot's JSON object: %v", err)
	}
	ev := copilotEvent(&in)
	c := &copilotCall{Event: ev}
	if ev == "" {
		return c, errors.New("the hook input is not a Copilot preToolUse, permissionRequest or postToolUse event")
	}
	if ev != CopilotPreToolUse && ev != CopilotPermissionRequest && ev != CopilotPostToolUse {
		return c, nil
	}
	if in.ToolName == "" {
		return c, errors.New("the input has no toolName")
	}
	raw := in.ToolArgs
	if ev == CopilotPermissionRequest {
		raw = in.ToolInput
	}
	args, err := copilotArgs(raw)
	if err != nil {
		return c, fmt.Errorf("the arguments of %s: %v", in.ToolName, err)
	}
	var tool string
	var input map[string]json.RawMessage
	if ev == CopilotPermissionRequest {
		tool, input = permissionTool(in.ToolName, args)
	} else {
		tool, input, c.Deferred = copilotTool(in.ToolName, args)
	}
	hookEvent := EventPreToolUse
	if ev == CopilotPermissionRequest {
		hookEvent = EventPermissionRequest
	}
	ti, err := json.Marshal(input)
	if err != nil {
		return c, err
	}
	c.Input = &Input{SessionID: in.SessionID, Cwd: in.Cwd, Event: hookEvent, ToolName: tool, ToolInput: ti}
	c.agent = &agentCall{tool: in.ToolName, args: raw}
	if ev == CopilotPostToolUse {
		c.Input.Event = "PostToolUse"
	}
	return c, nil
}

// copilotArgs reads a tool's arguments: a JSON object, or a JSON string
// holding one; none at all are no arguments.
func copilotArgs(raw json.RawMessage) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		raw = []byte(s)
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil || args == nil {
		return nil, errors.New("not a JSON object")
	}
	return args, nil
}

// copilotTool names a preToolUse call in Claude Code's words: its tool and
// the fields of its input the policy reads. Fields Claude Code's tool does
// not have are kept, so that the request shows the call whole and an
// allowed shell command's modifiedArgs keep Copilot's own.
func copilotTool(name string, args map[string]json.RawMessage) (string, map[string]json.RawMessage, bool) {
	switch name {
	case "bash":
		return "Bash", args, false
	case "write_bash":
		// Input typed into a shell the agent started with mode "async":
		// judged as the command line it is.
		out := rename(args)
		out["command"] = args["input"]
		return "Bash", out, false
	case "view":
		return "Read", rename(args, "path", "file_path"), false
	case "create":
		return "Write", rename(args, "path", "file_path", "file_text", "content"), true
	case "edit":
		return "Edit", rename(args, "path", "file_path", "old_str", "old_string", "new_str", "new_string"), true
	case "glob":
		return "Glob", args, false
	case "grep":
		return "Grep", args, false
	case "web_fetch":
		return "WebFetch", args, false
	}
	// Copilot's own tools are single words with underscores; an MCP
	// tool is "<server>-<tool>", which cannot be split for certain (a
	// server's name may hold a dash): permissionRequest names it
	// "<server>/<tool>" and decides it.
	if strings.Contains(name, "-") {
		return name, args, true
	}
	return name, args, false
}

// permissionTool names a permissionRequest call in Claude Code's words.
func permissionTool(name string, args map[string]json.RawMessage) (string, map[string]json.RawMessage) {
	switch name {
	case "bash":
		return "Bash", args
	case "edit":
		return writeFromDiff(args)
	}
	if server, tool, ok := strings.Cut(name, "/"); ok && server != "" && tool != "" {
		return "mcp__" + server + "__" + tool, args
	}
	return name, args
}

// writeFromDiff turns a write's permission input, {file_path, diff},
// into Claude Code's Write (a new file: its content) or Edit (the lines
// taken out and put in), for the policy and the human's preview.
func writeFromDiff(args map[string]json.RawMessage) (string, map[string]json.RawMessage) {
	var diff string
	json.Unmarshal(args["diff"], &diff)
	var old, added []string
	created, inHunk := false, false
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case !inHunk && (strings.HasPrefix(l, "create file mode") || l == "--- a/dev/null" || l == "--- /dev/null"):
			created = true
		case strings.HasPrefix(l, "@@"):
			inHunk = true
		case !inHunk:
		case strings.HasPrefix(l, "-"):
			old = append(old, l[1:])
		case strings.HasPrefix(l, "+"):
			added = append(added, l[1:])
		}
	}
	out := map[string]json.RawMessage{"file_path": args["file_path"], "diff": args["diff"]}
	if created {
		out["content"] = mustJSON(strings.Join(added, "\n"))
		return "Write", out
	}
	out["old_string"], out["new_string"] = mustJSON(strings.Join(old, "\n")), mustJSON(strings.Join(added, "\n"))
	return "Edit", out
}

// rename returns args with keys renamed, pairs of from and to.
func rename(args map[string]json.RawMessage, pairs ...string) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(args))
	for k, v := range args {
		out[k] = v
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		if v, ok := out[pairs[i]]; ok {
			delete(out, pairs[i])
			out[pairs[i+1]] = v
		}
	}
	return out
}

// typedInput reports whether a tool input is write_bash's: the command is
// its input, which modifiedArgs cannot rewrite as a command line, so an
// approved delete typed into a shell is asked again by the rm wrapper.
func typedInput(input json.RawMessage) bool {
	var f map[string]json.RawMessage
	json.Unmarshal(input, &f)
	_, ok := f["input"]
	return ok
}

// copilotPreOut is the answer to preToolUse.
type copilotPreOut struct {
	PermissionDecision       string          `json:"permissionDecision"`
	PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
	ModifiedArgs             json.RawMessage `json:"modifiedArgs,omitempty"`
}

// copilotPermissionOut is the answer to permissionRequest.
type copilotPermissionOut struct {
	Behavior  string `json:"behavior"`
	Message   string `json:"message,omitempty"`
	Interrupt bool   `json:"interrupt,omitempty"`
}

// renderCopilot returns the standard output of the answer to a Copilot
// event: nothing when the call is left to Copilot. A stopped session
// interrupts the agent where Copilot can (permissionRequest); preToolUse
// denies with the human's words.
func (o outcome) renderCopilot(event string) []byte {
	if o.action == Prompt {
		return nil
	}
	var v any
	switch event {
	case CopilotPreToolUse:
		out := copilotPreOut{PermissionDecision: o.action.String(), PermissionDecisionReason: o.reason}
		if o.action == Allow && !typedInput(o.input) {
			out.ModifiedArgs = o.input
		}
		v = out
	case CopilotPermissionRequest:
		out := copilotPermissionOut{Behavior: o.action.String()}
		if o.action == Deny {
			out.Message, out.Interrupt = o.reason, o.stop
		}
		v = out
	default:
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return b.Bytes()
}

// Copilot is GitHub Copilot CLI's hook protocol.
var Copilot = &Protocol{
	Agent:   countersign.AgentCopilot,
	Name:    "copilot",
	Read:    readCopilotEvent,
	Write:   writeCopilot,
	Install: CopilotInstall,
}

func init() { Protocols[Copilot.Name] = Copilot }

// readCopilotEvent reads a Copilot hook input for RunProtocol: the call in
// Claude Code's words, with in.Event Copilot's name of the event. A
// preToolUse call that permissionRequest decides is EventOther: no answer.
func readCopilotEvent(data []byte, cwd string, _ func(string) string) (Event, *Input, *Call, error) {
	c, err := readCopilot(data)
	if c == nil || c.Event == "" {
		return EventOther, nil, nil, err
	}
	ev := EventOther
	switch c.Event {
	case CopilotPreToolUse:
		ev = EventBefore
	case CopilotPermissionRequest:
		ev = EventPermission
	case CopilotPostToolUse:
		ev = EventAfter
	}
	if err != nil {
		return ev, &Input{Event: c.Event}, nil, err
	}
	if c.Input == nil {
		return ev, &Input{Event: c.Event}, nil, nil
	}
	claude, err := json.Marshal(c.Input)
	if err != nil {
		return ev, &Input{Event: c.Event}, nil, err
	}
	in, call, err := parseCall(claude, cwd, "")
	if in == nil {
		in = &Input{}
	}
	in.Event = c.Event
	in.agent = c.agent
	if c.Deferred {
		return EventOther, in, call, nil
	}
	return ev, in, call, err
}

// writeCopilot renders an answer as Copilot reads it: JSON on standard
// output and status 0.
func writeCopilot(_ Event, in *Input, o outcome) ([]byte, int) {
	if o.action == Allow && o.edit != nil {
		switch in.Event {
		case CopilotPreToolUse:
			args, err := copilotEdited(in, o.input)
			if err != nil {
				o = o.edit.refused(in.ToolName, "Copilot cannot run it as edited: "+err.Error())
			} else {
				o.input = args
			}
		default:
			o = noRewrite(o, in, "Copilot")
		}
	}
	return o.renderCopilot(in.Event), ExitOK
}

// CopilotInstallOptions are the flags of `countersign hook copilot
// install`.
type CopilotInstallOptions struct {
	File    string        // the hooks file to write
	Print   bool          // --print: print the file's content instead
	Timeout time.Duration // --timeout: timeoutSec, passed to the hook too
	Command string        // --command: how Copilot starts the hook
	Events  []string
}

// CopilotEvents are the events the hook is installed for.
var CopilotEvents = []string{CopilotPreToolUse, CopilotPermissionRequest}

// CopilotHooksFile is the user's hooks file Copilot loads in every
// project and in prompt mode: $COPILOT_HOME/hooks, else ~/.copilot/hooks.
func CopilotHooksFile(getenv func(string) string) (string, error) {
	if d := getenv("COPILOT_HOME"); d != "" {
		if !filepath.IsAbs(d) {
			return "", fmt.Errorf("COPILOT_HOME %q is not an absolute path", d)
		}
		return filepath.Join(d, "hooks", "countersign.json"), nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		return "", errors.New("HOME is not set to an absolute path: give the file with --file")
	}
	return filepath.Join(home, ".copilot", "hooks", "countersign.json"), nil
}

// CopilotInstall is `countersign hook copilot install`: write the hook
// into Copilot's hooks file (the user's, or a repository's with
// --project), or print it.
func CopilotInstall(args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	o, err := parseCopilotInstall(args, stderr, getenv)
	if err != nil {
		return err
	}
	if o.Print {
		out, err := mergeCopilotHooks([]byte("{}"), o)
		if err != nil {
			return err
		}
		_, err = stdout.Write(out)
		return err
	}
	data, mode, err := readSettings(o.File)
	if err != nil {
		return err
	}
	out, err := mergeCopilotHooks(data, o)
	if err != nil {
		return fmt.Errorf("%s: %w", o.File, err)
	}
	if err := writeAtomic(o.File, out, mode); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "countersign hook: installed in %s (%s, timeout %d s)\n", o.File, strings.Join(o.Events, ", "), int(o.Timeout/time.Second))
	return nil
}

// parseCopilotInstall reads install's flags.
func parseCopilotInstall(args []string, stderr io.Writer, getenv func(string) string) (CopilotInstallOptions, error) {
	o := CopilotInstallOptions{Timeout: DefaultTimeout, Command: defaultCommand("copilot"), Events: CopilotEvents}
	fs := flag.NewFlagSet("countersign hook copilot install", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.File, "file", "", "the hooks file to write (default: ~/.copilot/hooks/countersign.json, or under $COPILOT_HOME)")
	project := fs.String("project", "", "write the repository's .github/hooks/countersign.json under this directory instead")
	fs.BoolVar(&o.Print, "print", false, "print the hooks file instead of writing it")
	timeoutFlag(fs, &o.Timeout, "the hook's timeoutSec (default 600): how long a human has to decide")
	fs.StringVar(&o.Command, "command", o.Command, "the command Copilot runs")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := wholeSeconds(o.Timeout, "timeoutSec"); err != nil {
		return o, err
	}
	if strings.TrimSpace(o.Command) == "" {
		return o, errors.New("--command is empty")
	}
	switch {
	case *project != "" && o.File != "":
		return o, errors.New("--file and --project name two files: give one")
	case *project != "":
		if st, err := os.Stat(*project); err != nil || !st.IsDir() {
			return o, fmt.Errorf("--project: %s is not a directory", *project)
		}
		abs, err := filepath.Abs(*project)
		if err != nil {
			return o, err
		}
		o.File = filepath.Join(abs, ".github", "hooks", "countersign.json")
	case o.File == "" && !o.Print:
		f, err := CopilotHooksFile(getenv)
		if err != nil {
			return o, err
		}
		o.File = f
	}
	return o, nil
}

// copilotEntry is a command hook of Copilot's hooks file.
type copilotEntry struct {
	Type       string `json:"type"`
	Bash       string `json:"bash"`
	TimeoutSec int    `json:"timeoutSec"`
}

// entry is the hook's entry. The command passes the timeout on, so that
// the hook answers before Copilot gives up on it and lets the call run.
func (o CopilotInstallOptions) entry() copilotEntry {
	s := int(o.Timeout / time.Second)
	return copilotEntry{Type: "command", Bash: fmt.Sprintf("%s --timeout %d", o.Command, s), TimeoutSec: s}
}

// mergeCopilotHooks merges the hook into a hooks file's content: what is
// there is kept in its order, an existing countersign entry is updated in
// place, and the file gets "version": 1 if it has none.
func mergeCopilotHooks(data []byte, o CopilotInstallOptions) ([]byte, error) {
	root, err := parseObject(data)
	if err != nil {
		return nil, err
	}
	if _, ok := root.get("version"); !ok {
		root.set("version", 1)
	}
	hooks, err := root.child("hooks")
	if err != nil {
		return nil, err
	}
	for _, ev := range o.Events {
		var entries []json.RawMessage
		if raw, ok := hooks.get(ev); ok {
			if err := json.Unmarshal(raw, &entries); err != nil {
				return nil, fmt.Errorf("hooks.%s: not a list of hooks", ev)
			}
		}
		found := false
		for i, e := range entries {
			entry, err := parseObject(e)
			if err != nil {
				continue
			}
			key := copilotCountersignKey(entry)
			if key == "" {
				continue
			}
			want := o.entry()
			entry.set("type", want.Type)
			entry.set(key, want.Bash)
			entry.set("timeoutSec", want.TimeoutSec)
			if _, ok := entry.get("timeout"); ok {
				entry.set("timeout", want.TimeoutSec) // Copilot's alias of timeoutSec
			}
			entries[i], found = entry.marshal(), true
		}
		if !found {
			entries = append(entries, mustJSON(o.entry()))
		}
		hooks.set(ev, entries)
	}
	root.setObject("hooks", hooks)
	return root.indent()
}

// copilotCountersignKey returns the key of a hook entry ("bash", or its
// alias "command") that runs `countersign hook copilot`, whatever the
// path of the binary; "" for another hook.
func copilotCountersignKey(entry *object) string {
	for _, k := range []string{"bash", "command"} {
		raw, _ := entry.get(k)
		var cmd string
		if json.Unmarshal(raw, &cmd) != nil {
			continue
		}
		f := strings.Fields(cmd)
		if len(f) >= 3 && f[1] == "hook" && f[2] == "copilot" {
			if base := filepath.Base(f[0]); base == "countersign" || base == "countersign-agent" {
				return k
			}
		}
	}
	return ""
}

// copilotGuarded returns why changing the file at path would switch
// GitHub Copilot CLI's hooks off, or "": a hooks file (~/.copilot/hooks,
// a repository's .github/hooks), or a settings file that may hold hooks
// or disableAllHooks (~/.copilot's config.json and settings.json, a
// repository's .github/copilot/settings*.json). whole is set when the
// change takes everything under path too.
func copilotGuarded(path string, whole bool) string {
	base, parent := filepath.Base(path), filepath.Base(filepath.Dir(path))
	grand := filepath.Base(filepath.Dir(filepath.Dir(path)))
	settings := strings.HasPrefix(base, "settings") && strings.HasSuffix(base, ".json")
	switch {
	case parent == "hooks" && (grand == ".copilot" || grand == ".github") && strings.HasSuffix(base, ".json"):
		return "changes " + path + ", a GitHub Copilot CLI hooks file, which can switch its hooks off"
	case parent == ".copilot" && (settings || base == "config.json"), parent == "copilot" && grand == ".github" && settings:
		return "changes " + path + ", GitHub Copilot CLI's settings, which can switch its hooks off"
	case whole && (base == ".copilot" || base == "hooks" && (parent == ".copilot" || parent == ".github") || base == "copilot" && parent == ".github"):
		return "changes " + path + ", which holds GitHub Copilot CLI's hooks or settings and can switch its hooks off"
	case whole && base == ".github" && isDir(filepath.Join(path, "hooks")):
		return "changes " + path + ", which holds GitHub Copilot CLI's hooks and can switch them off"
	}
	return ""
}
