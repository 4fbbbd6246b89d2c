package server

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/callview"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/visible"
)

// callView is what a tool call will run, as its card and page lead with
// it: the tool, the server it belongs to, the target, and the arguments
// as labelled fields (an edit as a diff). The upstream's own title and
// description follow the arguments, marked as its words.
type callView struct {
	Tool   string
	Server string // the MCP server; empty for a tool of Claude Code's own
	Via    string // "Claude Code" for a call of the Claude Code hook
	// Target is the path or URL a Claude Code tool acts on, shown with the
	// tool; TargetName is its argument's name, which Fields then omit.
	Target, TargetName string
	Fields             []callview.Field
	Diff               []callview.DiffLine
	About              []aboutLine
}

// aboutLine is a text of the upstream's tool definition: its own words.
type aboutLine struct{ Label, Text string }

// rmView is a delete of the rm wrapper: its headline, the targets it
// resolved and the command, each said once: the headline names a single
// target, so that the page lists them only when there are several.
type rmView struct {
	Headline string
	Targets  []string
	More     int
	Command  string
	// Edited: an approver narrowed the targets; the page lists them
	// whatever their number, and the command is the agent's.
	Edited bool
}

// maxTargetsShown bounds the targets a page lists.
const maxTargetsShown = 20

// uploadsOf is the map of the files a call carries, by upload id, for
// the argument fields.
func uploadsOf(files []fileView) map[string]*callview.Upload {
	if len(files) == 0 {
		return nil
	}
	m := make(map[string]*callview.Upload, len(files))
	for _, f := range files {
		id := strings.TrimPrefix(f.URL, "/files/")
		m[id] = &callview.Upload{Reference: f.Reference, MIME: f.MIME, SHA256: f.SHA256, URL: f.URL, Size: f.Size}
	}
	return m
}

// callOf is the callView of an MCP call or of a Claude Code tool call
// other than Bash; nil for other requests.
func callOf(r *countersign.Request, files []fileView) *callView {
	args := r.Arguments
	switch {
	case r.Kind == countersign.KindMCP:
		c := &callView{Tool: r.Action}
		preview := r.Preview
		if r.Original != nil {
			// An edit changes the arguments, not the tool: its server
			// and its words are in the gateway's preview of the call as
			// asked.
			preview = r.Original.Preview
		}
		c.Server, c.About = gatewayFacts(preview)
		c.Fields = callview.Fields(args, uploadsOf(files))
		return c
	case r.Kind == countersign.KindTool && claudeTool(r.Action):
		c := &callView{Tool: r.Action, Via: "Claude Code"}
		if server, tool, ok := callview.MCPTool(r.Action); ok {
			c.Server, c.Tool = server, tool
		}
		switch r.Action {
		case "Write", "Edit", "MultiEdit", "NotebookEdit", "Read", "WebFetch":
			for _, k := range []string{"file_path", "notebook_path", "url"} {
				if v := callview.Str(args, k); v != "" {
					c.Target, c.TargetName = visible.Line(limit.Text(v, 2048)), k
					break
				}
			}
		}
		changes := ""
		switch r.Action {
		case "Edit":
			c.Diff, changes = callview.Diff(callview.Str(args, "old_string"), callview.Str(args, "new_string")), "old_string new_string"
		case "MultiEdit":
			c.Diff, changes = multiEdit(args), "edits"
		}
		skip := false
		for _, f := range callview.Fields(args, nil) {
			if f.Depth == 0 {
				skip = f.Name == c.TargetName || (c.Diff != nil && slices.Contains(strings.Fields(changes), f.Name))
			}
			if !skip {
				c.Fields = append(c.Fields, f)
			}
		}
		return c
	}
	return nil
}

// maxEdits bounds the edits of a MultiEdit shown as a diff.
const maxEdits = 20

// multiEdit is the diff of a MultiEdit's edits, one after the other;
// nil when its arguments hold none.
func multiEdit(args json.RawMessage) []callview.DiffLine {
	if len(args) > callview.MaxRaw {
		return nil
	}
	var in struct {
		Edits []struct {
			Old string `json:"old_string"`
			New string `json:"new_string"`
		} `json:"edits"`
	}
	if json.Unmarshal(args, &in) != nil {
		return nil
	}
	var out []callview.DiffLine
	for i, e := range in.Edits {
		if i == maxEdits {
			out = append(out, callview.DiffLine{Op: "…", Text: fmt.Sprintf("%d more edits not shown", len(in.Edits)-i)})
			break
		}
		if i > 0 {
			out = append(out, callview.DiffLine{Op: "…", Text: fmt.Sprintf("edit %d", i+1)})
		}
		out = append(out, callview.Diff(e.Old, e.New)...)
	}
	return out
}

// claudeTool reports whether a tool is one of Claude Code's own, other
// than Bash, or a tool of an MCP server that Claude Code calls: a call
// shown by its arguments. A tool of another name shows its preview.
func claudeTool(name string) bool {
	switch name {
	case "Write", "Edit", "MultiEdit", "NotebookEdit", "Read", "WebFetch", "WebSearch", "Glob", "Grep", "Task", "Agent", "Skill", "SlashCommand":
		return true
	}
	_, _, ok := callview.MCPTool(name)
	return ok
}

// gatewayFacts reads the server's name and the upstream's own title and
// description from the preview the MCP gateway writes (confirm.Preview):
// "Server:   NAME (its tool "…")", "Title:    "…" (as the server
// describes it)", "About:    "…" (as the server describes it)".
func gatewayFacts(preview string) (server string, about []aboutLine) {
	head, _, _ := strings.Cut(preview, "\nArguments (")
	for _, line := range strings.Split(head, "\n") {
		switch {
		case strings.HasPrefix(line, "Server:"):
			v := strings.TrimSpace(strings.TrimPrefix(line, "Server:"))
			if i := strings.Index(v, " (its tool "); i >= 0 {
				v = v[:i]
			}
			server = v
		case strings.HasPrefix(line, "Title:"), strings.HasPrefix(line, "About:"):
			label, v, _ := strings.Cut(line, ":")
			v = strings.TrimSuffix(strings.TrimSpace(v), " (as the server describes it)")
			var s string
			if json.Unmarshal([]byte(v), &s) == nil {
				v = visible.String(s)
			}
			if label == "About" {
				label = "Description"
			}
			about = append(about, aboutLine{label, v})
		}
	}
	return server, about
}

// rmOf is the rmView of a delete of the rm wrapper whose arguments list
// its targets; nil otherwise.
func rmOf(r *countersign.Request) *rmView {
	if r.Kind != countersign.KindRm || len(r.Arguments) > callview.MaxRaw {
		return nil
	}
	var p struct {
		Targets       []string `json:"targets"`
		AffectedPaths []string `json:"affected_paths"`
	}
	if json.Unmarshal(r.Arguments, &p) != nil {
		return nil
	}
	targets := p.Targets
	if len(targets) == 0 {
		targets = p.AffectedPaths
	}
	if len(targets) == 0 {
		return nil
	}
	headline, _, _ := strings.Cut(r.Preview, "\n")
	v := &rmView{Headline: headline, Command: r.Action}
	if r.Original != nil {
		// The command line is the agent's, with every target it named:
		// the edit's targets are what the approval deletes.
		v.Edited = true
		v.Headline = fmt.Sprintf("Delete only %s of the command's targets", plural(len(targets), "target", "targets"))
		if n := len(stringsOf(objectOf(r.Original.Arguments)["targets"])); n > 0 {
			v.Headline = fmt.Sprintf("Delete only %s of the %d the command names", plural(len(targets), "target", "targets"), n)
		}
	}
	if n := len(targets); n > maxTargetsShown {
		targets, v.More = targets[:maxTargetsShown], n-maxTargetsShown
	}
	for _, t := range targets {
		v.Targets = append(v.Targets, visible.Line(limit.Text(t, 4096)))
	}
	return v
}

// outcomeOf says in a sentence who decided what and when, and whether
// the agent has used an approval yet; empty for a pending request.
func outcomeOf(r *countersign.Request) string {
	by := deciderOf(r.DecidedBy)
	at := func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
	switch r.Status {
	case countersign.StatusApproved:
		s := fmt.Sprintf("Approved by %s at %s. The agent has not used the approval yet", by, at(r.DecidedAt))
		if !r.AutoApproveUntil.IsZero() {
			s = fmt.Sprintf("Approved by %s at %s, with requests of the same shape until %s. The agent has not used the approval yet", by, at(r.DecidedAt), at(r.AutoApproveUntil))
		}
		return s + "; it expires unused at " + at(r.ExpiresAt) + "."
	case countersign.StatusConsumed:
		s := fmt.Sprintf("Approved by %s at %s. The agent used the approval", by, at(r.DecidedAt))
		if !r.ConsumedAt.IsZero() {
			s += " at " + at(r.ConsumedAt)
		}
		return s + "."
	case countersign.StatusDenied:
		return fmt.Sprintf("Denied by %s at %s. The agent was told no.", by, at(r.DecidedAt))
	case countersign.StatusResponded:
		return fmt.Sprintf("Answered by %s at %s instead of approved: the agent may not go on with it.", by, at(r.DecidedAt))
	case countersign.StatusStopped:
		if r.DecidedBy == "" {
			return fmt.Sprintf("Stopped at %s: the agent's session was stopped.", at(r.DecidedAt))
		}
		return fmt.Sprintf("Stopped by %s at %s: the agent's session was stopped.", by, at(r.DecidedAt))
	case countersign.StatusExpired:
		if r.DecidedBy != "" {
			return fmt.Sprintf("Approved by %s at %s, but the agent never used the approval; it expired at %s.", by, at(r.DecidedAt), at(r.ExpiresAt))
		}
		return fmt.Sprintf("Expired at %s without a decision: the agent was told no.", at(r.ExpiresAt))
	case countersign.StatusCancelled:
		return "Cancelled by the agent before anyone decided."
	}
	return ""
}

// deciderOf names who decided in words.
func deciderOf(by string) string {
	switch by {
	case countersign.DecidedByAutoApprove:
		return "an auto-approve window"
	case countersign.DecidedByCoverage:
		return "the approval of the Claude Code hook's request for it"
	case "elicitation":
		return "the person at the agent's prompt"
	case "":
		return "someone"
	}
	return visible.Line(by)
}

// bashView is a Bash call of the Claude Code hook: the command, where it
// runs, Claude Code's note on it and the hook's findings, each said once.
type bashView struct {
	Command, Cwd, Note string
	Details            []string
}

// bashOf reads a Bash call of the hook from its preview, which the hook
// writes as "Claude Code wants to run, in CWD:\n\n$ COMMAND\n", then
// "\n(NOTE)\n" when the call has a description, then its findings a line
// each. A preview of another form is shown as it is: nil.
func bashOf(r *countersign.Request) *bashView {
	if r.Kind != countersign.KindTool || r.Action != "Bash" {
		return nil
	}
	cmd := callview.Str(r.Arguments, "command")
	if cmd == "" {
		return nil
	}
	v := &bashView{Command: visible.String(cmd), Cwd: r.Context.Cwd}
	if r.Original != nil {
		// An edited command's preview is the server's, not the hook's:
		// the command and where it runs; its reasons are listed apart.
		return v
	}
	rest, ok := strings.CutPrefix(r.Preview, "Claude Code wants to run, in "+v.Cwd+":\n\n$ "+v.Command)
	if !ok {
		return nil
	}
	rest = strings.TrimPrefix(rest, "\n")
	if desc := callview.Str(r.Arguments, "description"); desc != "" {
		note := "\n(" + visible.String(desc) + ")"
		if after, ok := strings.CutPrefix(rest, note); ok && (after == "" || after[0] == '\n') {
			v.Note, rest = visible.String(desc), after
		}
	}
	for _, line := range strings.Split(rest, "\n") {
		if line = strings.TrimSpace(line); line != "" && len(v.Details) < maxTargetsShown {
			v.Details = append(v.Details, line)
		}
	}
	return v
}

// ranView is what the agent reported it ran under an approval, as the
// pages say it: whether it is what was approved, and both bindings.
type ranView struct {
	Other                        bool
	At                           time.Time
	Agent                        string
	Action, ArgsHash             string
	ApprovedAction, ApprovedHash string
}

// ranViewOf is the ranView of a request; nil before a report.
func ranViewOf(r *countersign.Request) *ranView {
	if !r.Ran.Reported() {
		return nil
	}
	agent := countersign.CodingAgents[r.Context.Agent]
	if agent == "" {
		agent = "The agent"
	}
	return &ranView{Other: r.RanOther(), At: r.Ran.At, Agent: agent,
		Action: visible.Line(limit.Text(r.Ran.Action, 200)), ArgsHash: r.Ran.ArgsHash,
		ApprovedAction: visible.Line(limit.Text(r.Action, 200)), ApprovedHash: r.ArgsHash}
}

// plural is n and the noun in its number.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
