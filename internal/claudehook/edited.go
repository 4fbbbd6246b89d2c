package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/countersign/countersign/client/api"
)

// edit is an approval a human gave with a change of the call: what runs
// is the edited tool input, never the one the agent asked about.
type edit struct {
	id, ref, by string
	// input is the edited tool_input, in Claude Code's words, as the
	// server's answer to the consumption carries it.
	input json.RawMessage
	// edited and original are what the answer says of the edit: both
	// must be there.
	edited   bool
	original *api.Original
}

// editOf is the edit of a consumed approval, nil when it was not edited.
func editOf(used *api.Request) *edit {
	if !used.Edited && used.Original == nil {
		return nil
	}
	return &edit{id: used.ID, ref: used.Reference, by: used.DecidedBy, input: used.Arguments, edited: used.Edited, original: used.Original}
}

// maxShownEdit bounds the edited input a deny's reason shows.
const maxShownEdit = 4000

// shown is the edited call as a reason shows it: a Bash command as
// itself, any other tool's input as JSON.
func (e *edit) shown(tool string) string {
	var s string
	if tool == "Bash" {
		s = updatedCommand(e.input)
	}
	if s == "" {
		var b bytes.Buffer
		if json.Compact(&b, e.input) == nil {
			s = b.String()
		} else {
			s = string(e.input)
		}
	}
	if len(s) > maxShownEdit {
		s = s[:maxShownEdit] + "…"
	}
	return s
}

// refused denies a call whose approval came with an edit that cannot run
// as edited: nothing runs, neither the call nor the edit, and the reason
// names the edit and what was approved instead, so that the agent can
// ask for exactly that.
func (e *edit) refused(tool, why string) outcome {
	return deny("countersign: %s approved this call (%s) only as they edited it, but %s, so nothing ran (the approval is used up). "+
		"What %s approved instead: %s\nIf that is still wanted, run exactly that as a new call; it will be asked about again.",
		e.by, e.ref, why, e.by, e.shown(tool))
}

// applyEdit turns an approval with an edit into the answer that runs the
// edited call: the edit must be of this very call (its original is what
// the hook asked about), a tool input this hook can read, and not refused
// by this machine's own policy. Its Bash deletes are covered as an
// unedited approval's are. Anything else denies, and nothing runs.
func applyEdit(ctx context.Context, pol *Policy, p *Protocol, in *Input, call *Call, o outcome) outcome {
	e := o.edit
	switch {
	case !e.edited || e.original == nil:
		return e.refused(call.Tool, "the server's answer does not describe the edit whole")
	case len(in.ToolInput) > maxArgs:
		// The request showed a digest of this input: an edit of it
		// cannot be the call with a change.
		return e.refused(call.Tool, "this call's input was too large to be shown whole, so it cannot be run as edited")
	case !sameJSON(e.original.Arguments, in.ToolInput):
		return e.refused(call.Tool, "the approval's original is not this call")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.input, &fields); err != nil || fields == nil {
		return e.refused(call.Tool, "the edited input is not a JSON object")
	}
	ec := *call
	ec.Command, ec.Path = "", ""
	if err := ec.readInput(fields); err != nil {
		return e.refused(call.Tool, fmt.Sprintf("the edited input cannot run (%v)", err))
	}
	v := pol.Decide(ctx, &ec)
	if v.Unchecked || v.Action == Deny {
		return e.refused(call.Tool, "this machine's policy refuses the edited call: "+strings.Join(v.Reasons, "; "))
	}
	ein := *in
	ein.ToolInput = e.input
	o.input = coverInput(p.Agent, &ein, &ec, v.Scope, e.id)
	if o.input == nil {
		o.input = e.input
	}
	o.reason = fmt.Sprintf("countersign: approved by %s (%s) as they edited it: %s", e.by, e.ref, e.shown(call.Tool))
	return o
}

// noRewrite is the answer where the agent's hook protocol cannot change
// a call's input at this event: an edited approval denies, naming the
// edit; any other answer is left as it is.
func noRewrite(o outcome, in *Input, agent string) outcome {
	if o.action != Allow || o.edit == nil {
		return o
	}
	return o.edit.refused(in.ToolName, agent+" cannot run an edited call from this hook")
}

// sameJSON reports whether two JSON texts hold the same value (key order,
// spacing and number spelling aside).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// geminiEdited writes an edited call, in Claude Code's words, back into
// Gemini CLI's: the call's arguments whole, with the edited fields under
// Gemini CLI's names. Gemini CLI merges a hook's tool_input over the
// call's arguments, so an edit that takes a field away cannot be
// written; and the result, read back in Claude Code's words, must be the
// edit exactly, or it is refused.
func geminiEdited(in *Input, edited json.RawMessage) (map[string]any, error) {
	a := in.agent
	if a == nil {
		return nil, fmt.Errorf("the call in its own words is unknown")
	}
	var want, orig map[string]any
	if json.Unmarshal(edited, &want) != nil || want == nil || json.Unmarshal(a.args, &orig) != nil || orig == nil {
		return nil, fmt.Errorf("the arguments are not JSON objects")
	}
	args := map[string]any{}
	if t, ok := geminiTools[a.tool]; ok && (a.mcp == nil || a.mcp.Server == "" || a.mcp.Tool == "") {
		back := map[string]string{}
		for g, c := range t.fields {
			back[c] = g
		}
		for k, v := range orig {
			if _, named := t.fields[k]; !named {
				args[k] = v // what Claude Code's words leave out (dir_path)
			}
		}
		for k, v := range want {
			if g, ok := back[k]; ok {
				args[g] = v
			}
		}
	} else {
		for k, v := range want {
			args[k] = v
		}
	}
	for k := range orig {
		if _, ok := args[k]; !ok {
			return nil, fmt.Errorf("the edit takes away the argument %s, which a hook cannot", k)
		}
	}
	tool, got, _, err := geminiCall(a.tool, args, a.mcp, a.cwd)
	if err != nil || tool != in.ToolName || !reflect.DeepEqual(got, want) {
		return nil, fmt.Errorf("the edit has no exact form in %s's arguments", a.tool)
	}
	return args, nil
}

// copilotNames are Copilot's tools whose fields Claude Code's words
// rename, each as pairs of Copilot's name and Claude Code's (copilotTool).
var copilotNames = map[string][]string{
	"view":   {"path", "file_path"},
	"create": {"path", "file_path", "file_text", "content"},
	"edit":   {"path", "file_path", "old_str", "old_string", "new_str", "new_string"},
}

// copilotEdited writes an edited call, in Claude Code's words, back into
// Copilot's arguments (modifiedArgs), which replace the call's. Read back
// in Claude Code's words, they must be the edit exactly, or it is
// refused; input typed into a running shell cannot be rewritten.
func copilotEdited(in *Input, edited json.RawMessage) (json.RawMessage, error) {
	a := in.agent
	if a == nil {
		return nil, fmt.Errorf("the call in its own words is unknown")
	}
	if a.tool == "write_bash" {
		return nil, fmt.Errorf("input typed into a running shell cannot be rewritten")
	}
	var want map[string]json.RawMessage
	if json.Unmarshal(edited, &want) != nil || want == nil {
		return nil, fmt.Errorf("the edited input is not a JSON object")
	}
	pairs := copilotNames[a.tool]
	back := make([]string, 0, len(pairs))
	for i := 0; i+1 < len(pairs); i += 2 {
		back = append(back, pairs[i+1], pairs[i])
	}
	args := rename(want, back...)
	tool, got, deferred := copilotTool(a.tool, args)
	gotJSON, err1 := json.Marshal(got)
	out, err2 := json.Marshal(args)
	if err1 != nil || err2 != nil || deferred || tool != in.ToolName || !sameJSON(gotJSON, edited) {
		return nil, fmt.Errorf("the edit has no exact form in %s's arguments", a.tool)
	}
	return out, nil
}
