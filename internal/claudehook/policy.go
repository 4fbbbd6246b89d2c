package claudehook

import (
	"context"
	"os"
	"slices"

	"github.com/countersign/countersign/client/api"
	"github.com/countersign/countersign/internal/saferm"
)

// Policy decides tool calls. Three layers, from the bottom:
//
//   - defaults: read-only tools and read-only shell commands are allowed;
//     git push --force, git reset --hard and writes outside the project
//     directory (by their real paths) are asked; commands that lose data
//     without rm (destroy.go) are left to Claude Code where its permission
//     mode asks and asked where it does not; everything else is left to
//     Claude Code;
//   - the rules of the [hook] table, which replace the default of every
//     command or file they match (the strongest matching rule wins);
//   - checks that no rule can loosen, only tighten: a delete is judged by
//     the rm policy of the [rm] table (hard-blocked → deny, risky → ask),
//     and whatever cannot be resolved before it runs (a computed delete
//     target or command name, a script read from a pipe, code downloaded
//     and run, a command that does not parse, a path through a link the
//     line makes) is asked; changing Claude Code's settings or the rm
//     wrapper is never below Claude Code's prompt (guard.go);
//   - bounds of the analysis (budget.go): a command too large, too deep or
//     too slow to check is denied.
type Policy struct {
	Rules    Rules
	Config   *saferm.Config // the rm policy and the home directory
	Wrappers []string       // the rm wrapper's links and program (WrapperLinks)
}

// Call is one tool call to decide.
type Call struct {
	Tool    string
	Command string // Bash: the command line
	Path    string // the file tools: the file, absolute
	Cwd     string // absolute: where Claude Code runs the call
	Project string // absolute: the project directory
	Mode    string // Claude Code's permission_mode: whether it asks itself
	// Agent is the coding agent that makes the call (context.agent);
	// empty for Claude Code. Only what a human reads names it.
	Agent string
	// Typed is set when the agent can write to a command's standard
	// input after it started, which the hook never sees (Codex's
	// write_stdin): a shell or an interpreter reading commands from it
	// is then asked.
	Typed bool
	// Patches is set when the agent applies an apply_patch command
	// itself, writing and deleting the files the patch names (Codex):
	// each is judged as a file tool's.
	Patches bool
}

// Verdict is the policy's decision on one call.
type Verdict struct {
	Action  Action
	Reasons []string // why: the risks when asking, the refusal when denying
	Details []string // what the call would do, for the human (delete targets)
	// Default is set when a built-in default, not a rule or a check,
	// decided some part of the call.
	Default bool
	// Scope is the shape of the call the request carries (see scopeOf).
	Scope *api.Scope
	// Unchecked is set when the analysis could not finish (the call is
	// too large, too deep or too slow to check): the call is denied.
	Unchecked bool
	// Protected is set when a delete of the call touches a protected
	// path: the request says so as a fact, which the server's rules of
	// who may approve it (a passkey) read.
	Protected bool
}

// part is the judgement of one thing a call does: one shell command, one
// file written, or the tool call itself.
type part struct {
	subjects []subject // what rules match
	def      Action    // the default, when no rule matches
	defWhy   []string
	floor    Action // the checks' verdict; no rule goes below it
	floorWhy []string
	details  []string
	deleted  *saferm.Assessment // a delete's assessment, for the request's scope
}

// raise lifts the floor to action for the reasons.
func (p *part) raise(action Action, why ...string) {
	switch {
	case action > p.floor:
		p.floor, p.floorWhy = action, why
	case action == p.floor:
		p.floorWhy = append(p.floorWhy, why...)
	}
}

// tool kinds for the defaults.
var (
	readTools  = []string{"Read", "Glob", "Grep", "LS", "NotebookRead", "TodoRead", "TodoWrite", "BashOutput", "TaskOutput"}
	writeTools = []string{"Write", "Edit", "MultiEdit", "NotebookEdit"}
)

// opaqueTools are coding agents' tools that write files or run commands
// whose input the hook does not read into Claude Code's words (GitHub
// Copilot CLI's patch, editor and PowerShell tools): they are asked.
var opaqueTools = []string{"apply_patch", "str_replace_editor", "str_replace", "powershell", "write_powershell"}

// Decide judges a call. It never fails: what it cannot find out becomes a
// reason to ask.
func (p *Policy) Decide(ctx context.Context, c *Call) Verdict {
	var parts []part
	switch {
	case c.Tool == "Bash":
		return p.decideBash(ctx, c)
	case slices.Contains(writeTools, c.Tool):
		parts = []part{p.writePart(c.Tool, c.Path, c)}
	case slices.Contains(readTools, c.Tool):
		pt := part{subjects: []subject{{tool: c.Tool}}, def: Allow, defWhy: []string{"reads only"}}
		if c.Path != "" {
			pt.subjects = pathSubjects(c.Tool, c.Path)
		}
		parts = []part{pt}
	case slices.Contains(opaqueTools, c.Tool):
		// An agent's tool that writes files or runs commands in a shape
		// the hook does not read: a human decides, unless a rule does,
		// rather than the agent's own prompt, which a mode may skip.
		parts = []part{{subjects: []subject{{tool: c.Tool}}, def: Ask, defWhy: []string{c.Tool + " writes files or runs commands in a way countersign does not read"}}}
	case c.Tool == "NetworkAccess":
		// Codex asks it to reach the network from its sandbox: a human
		// decides, unless a rule does.
		parts = []part{{subjects: []subject{{tool: c.Tool}}, def: Ask, defWhy: []string{"network access from the agent's sandbox"}}}
	default:
		parts = []part{{subjects: []subject{{tool: c.Tool}}, def: Prompt, defWhy: []string{"left to Claude Code's permissions"}}}
	}
	v := p.combine(parts, c)
	v.Scope = scopeOf(c, parts)
	return v
}

// combine applies the rules to each part and returns the strongest result.
func (p *Policy) combine(parts []part, c *Call) Verdict {
	v := Verdict{Action: Allow}
	if len(parts) == 0 {
		// Nothing the hook judges is not nothing that runs: the call
		// is left to Claude Code, like a built-in default.
		v.Reasons, v.Default = []string{"runs nothing the hook checks"}, true
		return v
	}
	m := matchEnv{project: c.Project, home: p.Config.Home}
	for i, pt := range parts {
		action, why, byDefault := pt.def, pt.defWhy, true
		if r, ok := p.Rules.match(pt.subjects, m); ok {
			action, why, byDefault = r.Action, []string{"rule " + r.Action.String() + " " + r.Text}, false
		}
		switch {
		case pt.floor > action:
			action, why, byDefault = pt.floor, pt.floorWhy, false
		case pt.floor == action && pt.floor > Allow:
			why = append(slices.Clip(why), pt.floorWhy...)
		}
		if i == 0 || action > v.Action {
			v = Verdict{Action: action}
		}
		if action == v.Action {
			v.Reasons = appendNew(v.Reasons, why...)
			v.Details = appendNew(v.Details, pt.details...)
			v.Default = v.Default || byDefault
		}
	}
	for _, pt := range parts {
		v.Protected = v.Protected || (pt.deleted != nil && pt.deleted.Protected)
	}
	return v
}

// appendNew appends the strings not yet in list.
func appendNew(list []string, add ...string) []string {
	for _, s := range add {
		if s != "" && !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

// isDir reports whether p is a directory.
func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// assessor returns the rm policy's assessor working from cwd.
func (p *Policy) assessor(cwd string) *saferm.Assessor {
	return p.Config.Assessor(cwd)
}
