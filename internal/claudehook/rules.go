package claudehook

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign/internal/clientconfig"
)

// Action is what the policy does with a call. The constants are ordered
// from the weakest to the strongest: a Bash line of several commands gets
// the strongest action of its commands.
type Action int

// Actions.
const (
	// Allow lets the call run at once.
	Allow Action = iota
	// Prompt leaves the call to Claude Code's own permission system: the
	// hook says nothing.
	Prompt
	// Ask asks a human through the countersign server.
	Ask
	// Deny refuses the call at once.
	Deny
)

// String is the action as the hook and the [hook] table name it.
func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Prompt:
		return "prompt"
	case Ask:
		return "ask"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// argKind is what a rule's "(…)" part is matched against.
type argKind int

const (
	argNone    argKind = iota // the tool takes no argument in rules
	argCommand                // one shell command, words joined by spaces
	argPath                   // an absolute file path
)

// toolArgs names the tools whose rules take a "(…)" part, and what it
// matches. Every other tool is matched by name only.
var toolArgs = map[string]argKind{
	"Bash":         argCommand,
	"Read":         argPath,
	"Write":        argPath,
	"Edit":         argPath,
	"MultiEdit":    argPath,
	"NotebookEdit": argPath,
	"NotebookRead": argPath,
}

// Rule is one entry of the [hook] table: a tool name pattern, optionally
// with a command or path pattern in parentheses.
//
//	Read                      the tool Read
//	mcp__github__*            every tool of the MCP server github
//	Bash(git push:*)          a command "git push" with any arguments
//	Bash(npm test)            exactly "npm test"
//	Write(./src/**)           a path under src/ of the project directory
//	Edit(~/.bashrc)           a path in the home directory
//
// Tool patterns and command patterns use * for any run of characters and
// ? for one; a command pattern ending in ":*" matches the words before it
// alone or followed by anything. Path patterns use * within one path
// component and ** for any number of components; a relative path is
// relative to the project directory.
type Rule struct {
	Text   string // as written
	Action Action
	Tool   string // path.Match pattern over the tool name
	Arg    string // "" when the rule has no "(…)" part
}

// Rules are the compiled [hook] table.
type Rules []Rule

// ParseRules compiles the [hook] table, refusing any rule it could only
// half obey.
func ParseRules(h clientconfig.HookRules) (Rules, error) {
	var out Rules
	var errs []string
	for _, list := range []struct {
		action Action
		name   string
		rules  []string
	}{{Deny, "deny", h.Deny}, {Ask, "ask", h.Ask}, {Prompt, "prompt", h.Prompt}, {Allow, "allow", h.Allow}} {
		for _, text := range list.rules {
			r, err := parseRule(text, list.action)
			if err != nil {
				errs = append(errs, fmt.Sprintf("[hook] %s: %v", list.name, err))
				continue
			}
			out = append(out, r)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}

// parseRule reads one rule.
func parseRule(text string, action Action) (Rule, error) {
	r := Rule{Text: text, Action: action, Tool: strings.TrimSpace(text)}
	if i := strings.IndexByte(r.Tool, '('); i >= 0 {
		if !strings.HasSuffix(r.Tool, ")") {
			return Rule{}, fmt.Errorf("%q: a rule is Tool or Tool(pattern)", text)
		}
		r.Tool, r.Arg = strings.TrimSpace(r.Tool[:i]), strings.TrimSpace(r.Tool[i+1:len(r.Tool)-1])
		if r.Arg == "" {
			return Rule{}, fmt.Errorf("%q: empty pattern in parentheses", text)
		}
	}
	if r.Tool == "" || strings.ContainsAny(r.Tool, "() \t") {
		return Rule{}, fmt.Errorf("%q: a rule is Tool or Tool(pattern)", text)
	}
	if _, err := path.Match(r.Tool, ""); err != nil {
		return Rule{}, fmt.Errorf("%q: bad tool pattern", text)
	}
	if r.Arg != "" && !hasMeta(r.Tool) && toolArgs[r.Tool] == argNone {
		return Rule{}, fmt.Errorf("%q: %s takes no (…) part; only Bash and the file tools do", text, r.Tool)
	}
	return r, nil
}

// subject is one thing a rule can match: a tool, and the command or path
// it works on.
type subject struct {
	tool string
	kind argKind
	arg  string // a command, or an absolute cleaned path
	// written marks a path as written, where it differs from the real
	// path: only rules that ask or deny match it.
	written bool
}

// match returns the strongest rule matching any of the subjects.
func (rs Rules) match(subjects []subject, m matchEnv) (Rule, bool) {
	var best Rule
	found := false
	for _, r := range rs {
		if found && r.Action <= best.Action {
			continue
		}
		for _, s := range subjects {
			if s.written && r.Action < Ask {
				continue
			}
			if r.matches(s, m) {
				best, found = r, true
				break
			}
		}
	}
	return best, found
}

// matchEnv is what relative path patterns are relative to.
type matchEnv struct {
	project, home string
}

// matches reports whether the rule covers the subject.
func (r Rule) matches(s subject, m matchEnv) bool {
	if ok, _ := path.Match(r.Tool, s.tool); !ok {
		return false
	}
	if r.Arg == "" {
		return true
	}
	switch s.kind {
	case argCommand:
		return matchCommand(r.Arg, s.arg)
	case argPath:
		return matchPath(absPattern(r.Arg, m), s.arg)
	}
	return false
}

// matchCommand matches a command pattern against a command.
func matchCommand(pat, cmd string) bool {
	if base, ok := strings.CutSuffix(pat, ":*"); ok {
		return wildcard(base, cmd) || wildcard(base+" *", cmd)
	}
	return wildcard(pat, cmd)
}

// wildcard matches s against pat, where * matches any run of characters,
// slashes and spaces included, and ? any one character.
func wildcard(pat, s string) bool {
	p, i := []rune(pat), []rune(s)
	star, mark := -1, 0
	pi, si := 0, 0
	for si < len(i) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == i[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// absPattern makes a path pattern absolute: ~ is the home directory, and a
// relative pattern is relative to the project directory.
func absPattern(pat string, m matchEnv) string {
	switch {
	case pat == "~" && m.home != "":
		return m.home
	case strings.HasPrefix(pat, "~/") && m.home != "":
		return m.home + pat[1:]
	case filepath.IsAbs(pat):
		return pat
	}
	return filepath.Join(m.project, pat)
}

// matchPath matches an absolute path pattern against an absolute path,
// component by component; ** matches any number of components.
func matchPath(pat, p string) bool {
	return matchParts(strings.Split(strings.Trim(pat, "/"), "/"), strings.Split(strings.Trim(p, "/"), "/"))
}

func matchParts(pat, p []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(p); i++ {
				if matchParts(pat[1:], p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], p[0]); !ok {
			return false
		}
		pat, p = pat[1:], p[1:]
	}
	return len(p) == 0
}

// hasMeta reports whether s holds a pattern character.
func hasMeta(s string) bool {
	return strings.ContainsAny(s, "*?[")
}
