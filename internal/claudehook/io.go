package claudehook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/countersign/countersign/internal/limit"
)

// Events the hook answers.
const (
	EventPreToolUse        = "PreToolUse"
	EventPermissionRequest = "PermissionRequest"
	// After a call ran, the hook reports it (reportRan).
	EventPostToolUse        = "PostToolUse"
	EventPostToolUseFailure = "PostToolUseFailure"
)

// Input is what Claude Code writes to the hook's standard input for
// PreToolUse and PermissionRequest. Fields the hook does not use are
// ignored, so that a newer Claude Code keeps working.
type Input struct {
	SessionID      string          `json:"session_id"`
	TranscriptPath string          `json:"transcript_path"`
	Cwd            string          `json:"cwd"`
	Event          string          `json:"hook_event_name"`
	PermissionMode string          `json:"permission_mode"`
	ToolName       string          `json:"tool_name"`
	ToolInput      json.RawMessage `json:"tool_input"`
	ToolUseID      string          `json:"tool_use_id"`
	AgentID        string          `json:"agent_id"`
	AgentType      string          `json:"agent_type"`

	// agent is the call in the agent's own words, where they are not
	// Claude Code's: what an edited call is written back into.
	agent *agentCall
}

// agentCall is a call in its agent's own words: the tool's name and
// arguments, and what else reading it in Claude Code's words took.
type agentCall struct {
	tool string
	args json.RawMessage
	cwd  string
	mcp  *geminiMCP
}

// MaxInput bounds what the hook reads: a Write of a large file carries the
// whole content. A larger input is blocked.
const MaxInput = 64 << 20

// errNoEvent is an input whose event cannot be known.
var errNoEvent = errors.New("the hook input is not a JSON object with hook_event_name")

// readInput reads a hook input, bounded in size and depth.
func readInput(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInput+1))
	if err != nil {
		return nil, fmt.Errorf("read the hook input: %w", err)
	}
	if len(data) > MaxInput {
		return nil, fmt.Errorf("the hook input is larger than %d MiB", MaxInput>>20)
	}
	if limit.CheckJSONDepth(data) != nil {
		// Refused before any decoding: every step after, up to the
		// request's preview, would work on it.
		return nil, fmt.Errorf("the hook input nests objects and arrays deeper than the limit of %d levels", limit.MaxJSONDepth)
	}
	return data, nil
}

// readInputBy is readInput that gives up at the deadline: an agent that
// starts the hook and never closes its standard input gets a blocked call
// from the hook, before its own timeout would leave the call to the
// agent's rules. The read itself ends at the deadline where the input is a
// pipe; elsewhere it is left behind, and ends with the process.
func readInputBy(r io.Reader, deadline time.Time) ([]byte, error) {
	if f, ok := r.(interface{ SetReadDeadline(time.Time) error }); ok {
		f.SetReadDeadline(deadline) // a regular file has none, and needs none
	}
	type read struct {
		data []byte
		err  error
	}
	done := make(chan read, 1)
	go func() {
		data, err := readInput(r)
		done <- read{data, err}
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case got := <-done:
		if errors.Is(got.err, os.ErrDeadlineExceeded) {
			return nil, errLateInput
		}
		return got.data, got.err
	case <-t.C:
		return nil, errLateInput
	}
}

// errLateInput is an input that did not end before the hook's deadline.
var errLateInput = errors.New("the hook input did not end (standard input still open) before the hook's deadline")

// eventName returns the hook_event_name of an input.
func eventName(data []byte) (string, error) {
	var head struct {
		Event string `json:"hook_event_name"`
	}
	if err := json.Unmarshal(data, &head); err != nil || head.Event == "" {
		return "", errNoEvent
	}
	return head.Event, nil
}

// parseCall decodes a PreToolUse or PermissionRequest input into the call
// to decide. Any input the hook cannot read fully is an error: the caller
// denies (fail closed).
func parseCall(data []byte, cwd, projectDir string) (*Input, *Call, error) {
	var in Input
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, nil, fmt.Errorf("the hook input does not have the documented shape: %v", err)
	}
	if in.ToolName == "" {
		return &in, nil, errors.New("the input has no tool_name")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(in.ToolInput, &fields); err != nil || fields == nil {
		return &in, nil, fmt.Errorf("tool_input of %s is not a JSON object", in.ToolName)
	}
	c := &Call{Tool: in.ToolName, Cwd: cwd, Mode: in.PermissionMode}
	if filepath.IsAbs(in.Cwd) {
		c.Cwd = filepath.Clean(in.Cwd)
	}
	if !filepath.IsAbs(c.Cwd) {
		return &in, nil, errors.New("the input has no absolute cwd, and the hook's own working directory is unknown")
	}
	c.Project = c.Cwd
	if filepath.IsAbs(projectDir) {
		c.Project = filepath.Clean(projectDir) // CLAUDE_PROJECT_DIR
	}
	if err := c.readInput(fields); err != nil {
		return &in, nil, err
	}
	return &in, c, nil
}

// readInput takes the fields the policy needs from the tool input.
func (c *Call) readInput(fields map[string]json.RawMessage) error {
	key, need := "", false
	switch c.Tool {
	case "Bash":
		key, need = "command", true
	case "Write", "Edit", "MultiEdit":
		key, need = "file_path", true
	case "NotebookEdit":
		key, need = "notebook_path", true
	case "Read":
		key = "file_path"
	case "NotebookRead":
		key = "notebook_path"
	default:
		return nil
	}
	raw, ok := fields[key]
	if !ok {
		if need {
			return fmt.Errorf("tool_input of %s has no %s", c.Tool, key)
		}
		return nil
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil || (need && strings.TrimSpace(v) == "") {
		return fmt.Errorf("tool_input.%s of %s is not a non-empty string", key, c.Tool)
	}
	if c.Tool == "Bash" {
		c.Command = v
	} else if v != "" {
		c.Path = v
		if !filepath.IsAbs(v) {
			c.Path = c.Cwd + "/" + v // not cleaned: "link/.." is resolved after the link
		}
	}
	return nil
}

// outcome is the hook's answer.
type outcome struct {
	action Action // Allow, Deny, or Prompt for no answer
	reason string
	stop   bool // the human stopped the session
	// input, with Allow, is the tool input to run instead of the one
	// asked about (Claude Code's updatedInput).
	input json.RawMessage
	// edit, with Allow, is the approver's edit of the call: input is
	// then the edited call's, which must run or nothing.
	edit *edit
}

// preToolUseOut is the JSON answer to PreToolUse.
type preToolUseOut struct {
	HookSpecificOutput struct {
		HookEventName            string          `json:"hookEventName"`
		PermissionDecision       string          `json:"permissionDecision"`
		PermissionDecisionReason string          `json:"permissionDecisionReason,omitempty"`
		UpdatedInput             json.RawMessage `json:"updatedInput,omitempty"`
	} `json:"hookSpecificOutput"`
	// Continue false stops Claude after a stop decision; StopReason is
	// shown to the user.
	Continue   *bool  `json:"continue,omitempty"`
	StopReason string `json:"stopReason,omitempty"`
}

// permissionRequestOut is the JSON answer to PermissionRequest.
type permissionRequestOut struct {
	HookSpecificOutput struct {
		HookEventName string `json:"hookEventName"`
		Decision      struct {
			Behavior     string          `json:"behavior"`
			UpdatedInput json.RawMessage `json:"updatedInput,omitempty"`
			Message      string          `json:"message,omitempty"`
			Interrupt    bool            `json:"interrupt,omitempty"`
		} `json:"decision"`
	} `json:"hookSpecificOutput"`
}

// render returns the stdout of the answer to the event: nothing when the
// call is left to Claude Code.
func (o outcome) render(event string) []byte {
	if o.action == Prompt {
		return nil
	}
	var v any
	switch event {
	case EventPreToolUse:
		var out preToolUseOut
		out.HookSpecificOutput.HookEventName = event
		out.HookSpecificOutput.PermissionDecision = o.action.String()
		out.HookSpecificOutput.PermissionDecisionReason = o.reason
		if o.action == Allow {
			out.HookSpecificOutput.UpdatedInput = o.input
		}
		if o.stop {
			no := false
			out.Continue, out.StopReason = &no, o.reason
		}
		v = out
	case EventPermissionRequest:
		var out permissionRequestOut
		out.HookSpecificOutput.HookEventName = event
		out.HookSpecificOutput.Decision.Behavior = o.action.String()
		if o.action == Allow {
			out.HookSpecificOutput.Decision.UpdatedInput = o.input
		}
		if o.action == Deny {
			out.HookSpecificOutput.Decision.Message = o.reason
			out.HookSpecificOutput.Decision.Interrupt = o.stop
		}
		v = out
	default:
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // "&&" and "<" stay readable in reasons
	enc.Encode(v)
	return b.Bytes()
}
