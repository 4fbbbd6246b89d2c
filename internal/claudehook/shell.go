package claudehook

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign/internal/shellword"
	"mvdan.cc/sh/v3/syntax"
)

// analyzer walks a Bash command line and judges every command in it,
// wherever it sits: in a list, a pipeline, a subshell, a function, a
// command substitution, a script given to bash -c or eval, or behind
// sudo, env, xargs and their kind.
type analyzer struct {
	ctx       context.Context
	pol       *Policy
	call      *Call
	parts     []part
	depth     int             // nesting of scripts inside scripts
	downloads int             // downloading commands seen so far
	commands  int             // simple commands judged, against maxCommands
	deletes   int             // deletes assessed, against maxDeletes
	over      string          // why the analysis stopped short, or ""
	tainted   map[string]bool // variables the line assigns other than by mktemp -d
	links     []string        // the links the line makes (ln), parents resolved
	someLink  bool            // the line makes a link whose name is not known
}

// maxDepth bounds scripts nested in scripts (bash -c "bash -c '…'").
const maxDepth = 8

// shState is what the analysis knows of the shell at a point.
type shState struct {
	cwd    string          // "" when it cannot be known
	remote string          // where the commands run when not here: "on another host (ssh)"
	temps  map[string]bool // variables holding a directory the line made (mktemp -d); shared, never changed in place
}

// stdin is where a command's standard input comes from.
type stdin struct {
	pipe       bool         // the output of the previous pipeline stage
	downloaded bool         // … in which something was downloaded
	doc        *syntax.Word // a here-document or here-string
	file       bool         // a file (<)
}

// add records a part.
func (a *analyzer) add(p part) {
	a.parts = append(a.parts, p)
}

// ask records a part that asks for the reasons.
func (a *analyzer) ask(subjects []subject, why ...string) {
	p := part{subjects: subjects}
	p.raise(Ask, why...)
	a.add(p)
}

// bashSubject is the rule subject of a command line.
func bashSubject(line string) subject {
	return subject{tool: "Bash", kind: argCommand, arg: line}
}

// script parses and walks a shell script.
func (a *analyzer) script(src string, st *shState, in stdin) {
	if a.overBudget() {
		return
	}
	if nesting(src, maxNesting) > maxNesting {
		a.over = fmt.Sprintf("brackets nest more than %d deep in it", maxNesting)
		return
	}
	if a.depth >= maxDepth {
		a.ask([]subject{bashSubject(src)}, "shell commands nested too deeply to check")
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		a.ask([]subject{bashSubject(src)}, "the command does not parse as shell, so it cannot be checked: "+err.Error())
		return
	}
	if tooDeep(f, maxNesting) {
		a.over = fmt.Sprintf("its commands nest more than %d deep", maxNesting)
		return
	}
	a.taint(f)
	a.depth++
	a.stmts(f.Stmts, st, in)
	a.depth--
}

// stmts walks a list of statements that share the shell's state.
func (a *analyzer) stmts(list []*syntax.Stmt, st *shState, in stdin) {
	for _, s := range list {
		a.stmt(s, st, in)
	}
}

// stmt walks one statement: its redirections, then its command.
func (a *analyzer) stmt(s *syntax.Stmt, st *shState, in stdin) {
	if a.overBudget() {
		return
	}
	for _, r := range s.Redirs {
		if r.Word != nil {
			a.nested(r.Word, st)
		}
		if r.Hdoc != nil {
			a.nested(r.Hdoc, st)
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = stdin{doc: r.Hdoc}
		case syntax.WordHdoc:
			in = stdin{doc: r.Word}
		case syntax.RdrIn:
			in = stdin{file: true}
		case syntax.RdrOut, syntax.RdrClob, syntax.RdrAll, syntax.RdrAllClob:
			a.write(resolveWord(r.Word, a.pol.Config.Home)[0], st, true)
		case syntax.AppOut, syntax.AppClob, syntax.AppAll, syntax.AppAllClob, syntax.RdrInOut:
			a.write(resolveWord(r.Word, a.pol.Config.Home)[0], st, false)
		case syntax.DplOut:
			// >&2 duplicates a descriptor; >&file (bash) writes a file.
			if w := resolveWord(r.Word, a.pol.Config.Home)[0]; !w.static || !isFD(w.val) {
				a.write(w, st, true)
			}
		}
	}
	if s.Cmd != nil {
		a.command(s.Cmd, st, in)
	}
}

// isFD reports whether a >& target names a descriptor or closes one.
func isFD(v string) bool {
	v = strings.TrimSuffix(v, "-")
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// command walks one command of any kind.
func (a *analyzer) command(cmd syntax.Command, st *shState, in stdin) {
	switch c := cmd.(type) {
	case *syntax.CallExpr:
		a.callExpr(c, st, in)
	case *syntax.BinaryCmd:
		a.binary(c, st, in)
	case *syntax.Subshell:
		sub := *st
		a.stmts(c.Stmts, &sub, in)
	case *syntax.Block:
		a.stmts(c.Stmts, st, in)
	case *syntax.IfClause:
		a.branching(st, func(s *shState) {
			for ic := c; ic != nil; ic = ic.Else {
				a.stmts(ic.Cond, s, in)
				a.stmts(ic.Then, s, in)
			}
		})
	case *syntax.WhileClause:
		a.branching(st, func(s *shState) {
			a.stmts(c.Cond, s, in)
			a.stmts(c.Do, s, in)
		})
	case *syntax.ForClause:
		a.nested(c.Loop, st)
		a.branching(st, func(s *shState) { a.stmts(c.Do, s, in) })
	case *syntax.CaseClause:
		a.nested(c.Word, st)
		a.branching(st, func(s *shState) {
			for _, item := range c.Items {
				for _, p := range item.Patterns {
					a.nested(p, s)
				}
				a.stmts(item.Stmts, s, in)
			}
		})
	case *syntax.FuncDecl:
		// A function's body is judged where it is defined, as if called.
		body := *st
		a.stmt(c.Body, &body, stdin{})
	case *syntax.ArithmCmd, *syntax.LetClause:
		if arithmOnVariables(c) {
			a.prompt("evaluates arithmetic on variables, which runs the commands a variable's value may hold")
		}
		a.nested(c, st)
	case *syntax.TestClause:
		if arithmTest(c.X) {
			a.prompt("compares variables as numbers, which runs the commands a variable's value may hold")
		}
		if subscriptTest(c.X) {
			a.prompt("tests a variable by a name known only when it runs, which runs the commands a subscript may hold")
		}
		a.nested(c, st)
	case *syntax.DeclClause:
		a.declared(c)
		a.nested(c, st)
	case *syntax.TimeClause:
		if c.Stmt != nil {
			a.stmt(c.Stmt, st, in)
		}
	case *syntax.CoprocClause:
		co := *st
		a.stmt(c.Stmt, &co, in)
	default:
		a.ask([]subject{bashSubject("")}, "a shell construct the hook does not check")
	}
}

// branching walks code that may or may not run: a directory change inside
// it leaves the working directory unknown after it.
func (a *analyzer) branching(st *shState, walk func(*shState)) {
	inner := *st
	walk(&inner)
	if inner.cwd != st.cwd {
		st.cwd = ""
	}
	st.temps = keepCommon(st.temps, inner.temps)
}

// binary walks a && b, a || b and pipelines.
func (a *analyzer) binary(c *syntax.BinaryCmd, st *shState, in stdin) {
	switch c.Op {
	case syntax.AndStmt:
		a.stmt(c.X, st, in)
		temps := st.temps
		a.stmt(c.Y, st, in)
		st.temps = keepCommon(temps, st.temps) // b may not run
	case syntax.OrStmt:
		before := st.cwd
		a.stmt(c.X, st, in)
		// b runs when a failed, perhaps before a's cd — unless b leaves.
		if st.cwd != before && !exits(c.Y) {
			st.cwd = ""
		}
		temps := st.temps
		a.stmt(c.Y, st, in)
		st.temps = keepCommon(temps, st.temps)
	default: // | and |&: every stage in its own subshell
		x, y := *st, *st
		seen := a.downloads
		a.stmt(c.X, &x, in)
		a.stmt(c.Y, &y, stdin{pipe: true, downloaded: in.downloaded || a.downloads > seen})
	}
}

// exits reports whether a statement is a plain exit or return.
func exits(s *syntax.Stmt) bool {
	call, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 {
		return false
	}
	name, ok := shellword.Literal(call.Args[0], "")
	return ok && (name == "exit" || name == "return")
}

// nested walks the command substitutions and process substitutions inside
// a node that is not itself a command: they run too. Expansions that
// evaluate a variable's value as arithmetic or as a prompt can run commands
// held in that value, which the hook cannot see: they leave the line to
// Claude Code.
func (a *analyzer) nested(n syntax.Node, st *shState) {
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParamExp:
			if riskyExpansion(n) {
				a.prompt("expands a variable in a way that runs the commands its value may hold")
			}
		case *syntax.ArithmExp, *syntax.CStyleLoop:
			if arithmOnVariables(n) {
				a.prompt("evaluates arithmetic on variables, which runs the commands a variable's value may hold")
			}
		case *syntax.CmdSubst:
			sub := *st
			a.stmts(n.Stmts, &sub, stdin{})
			return false
		case *syntax.ProcSubst:
			sub := *st
			a.stmts(n.Stmts, &sub, stdin{})
			return false
		}
		return true
	})
}

// callExpr walks a simple command.
func (a *analyzer) callExpr(c *syntax.CallExpr, st *shState, in stdin) {
	for _, as := range c.Assigns {
		a.assigned(as)
		a.nested(as, st)
	}
	for _, w := range c.Args {
		a.nested(w, st)
	}
	if len(c.Args) == 0 {
		a.assignedTemps(c.Assigns, st) // assignments only: they stay
		return
	}
	a.simple(&cmdCtx{w: words(c.Args, a.pol.Config.Home), st: st, in: in})
}

// write judges a file the shell writes (a redirection, tee), emptying
// it first when truncates is set.
func (a *analyzer) write(w word, st *shState, truncates bool) {
	sub := []subject{{tool: "Write", kind: argPath, arg: w.text()}}
	switch {
	case a.tempFile(w, st):
		a.add(part{subjects: sub, def: Prompt, defWhy: []string{"writes in a temporary directory the line made"}})
	case !w.static:
		a.ask(sub, "writes to a file named only when the command runs: "+w.src)
	case isDevice(w.val):
	case st.remote != "":
		a.add(part{subjects: sub, def: Prompt, defWhy: []string{"writes a file " + st.remote}})
	case st.cwd == "" && !filepath.IsAbs(w.val):
		a.ask(sub, "writes to "+w.val+" in a directory that cannot be known before the command runs")
	default:
		p := w.val // not cleaned: "link/.." is resolved after the link
		if !filepath.IsAbs(p) {
			p = st.cwd + "/" + p
		}
		pt := a.pol.writePart("Write", p, a.call)
		if l := a.throughLink(p, true); l != "" {
			pt.raise(Ask, "writes through "+l+", a link this command line makes before, so where it lands cannot be known before it runs")
		}
		a.add(pt)
		if truncates && !modeAsks(a.call.Mode, "Bash") && a.overwrites(resolvePath(p)) {
			a.destroyer(pt.subjects, "", "replaces the contents of the existing file "+resolvePath(p))
		}
	}
}

// isDevice reports whether writing p goes to a terminal, a standard
// stream or nowhere.
func isDevice(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	return strings.HasPrefix(p, "/dev/fd/")
}

// prompt records a part that leaves the whole line to Claude Code's own
// permissions, whatever the rules say: the line can run commands, or change
// what its commands run, in ways the hook does not follow. A rule may still
// raise it, never lower it. In a permission mode where Claude Code asks
// nothing, leaving it would let it run unasked: a human is asked instead.
func (a *analyzer) prompt(why string) {
	floor := Prompt
	if !modeAsks(a.call.Mode, "Bash") {
		floor, why = Ask, why+notAsking(a.call)
	}
	a.add(part{subjects: []subject{bashSubject("")}, def: floor, floor: floor, floorWhy: []string{why}})
}

// inertVars are variables no program takes a program, a path to load or
// code from: setting one of them to a literal changes nothing the rules
// and checks rely on.
var inertVars = map[string]bool{
	"CGO_ENABLED": true, "GOOS": true, "GOARCH": true, "CI": true, "NODE_ENV": true,
	"TZ": true, "LANG": true, "LC_ALL": true, "NO_COLOR": true, "FORCE_COLOR": true,
	"TERM": true, "COLUMNS": true, "RUST_BACKTRACE": true, "PYTHONUNBUFFERED": true,
}

// assigned judges an assignment, of a command's environment or of the
// shell's variables: a variable other than the inert ones may make a
// program run another (PATH, LD_PRELOAD, GIT_SSH_COMMAND, PAGER, …), or
// hold commands that arithmetic on it runs later in the line.
func (a *analyzer) assigned(as *syntax.Assign) {
	if as.Name == nil {
		return // a flag of declare, export, …
	}
	if !inertVars[as.Name.Value] || as.Index != nil || as.Array != nil {
		a.prompt("sets " + as.Name.Value + ", which the commands and expansions after it may run")
		return
	}
	if as.Value != nil {
		if _, ok := shellword.Literal(as.Value, ""); !ok {
			a.prompt("sets " + as.Name.Value + " to a value known only when the line runs")
		}
	}
}

// riskyExpansion reports whether an expansion evaluates a variable's value
// as a name, an arithmetic expression or a prompt: ${!x}, ${a[i]},
// ${a:off:len}, ${x@P}. ${a[@]}, ${a[*]} and offsets and lengths that are
// numbers evaluate nothing.
func riskyExpansion(n *syntax.ParamExp) bool {
	switch {
	case n.Excl:
		return true
	case n.Index != nil:
		w, ok := n.Index.(*syntax.Word)
		return !ok || w.Lit() != "@" && w.Lit() != "*" && !isNumber(w.Lit())
	case n.Slice != nil:
		return !numberExpr(n.Slice.Offset) || !numberExpr(n.Slice.Length)
	case n.Exp != nil:
		return n.Exp.Op == syntax.OtherParamOps
	}
	return false
}

// numberExpr reports whether an arithmetic expression is absent or a number
// (maybe negative).
func numberExpr(x syntax.ArithmExpr) bool {
	switch x := x.(type) {
	case nil:
		return true
	case *syntax.Word:
		return isNumber(x.Lit())
	case *syntax.UnaryArithm:
		return x.Op == syntax.Minus && numberExpr(x.X)
	case *syntax.ParenArithm:
		return numberExpr(x.X)
	}
	return false
}

// specialParam reports whether an expansion is a plain $#, $?, $$, $!, $-
// or positional parameter: the shell sets them to numbers or flags, not an
// agent to an expression.
func specialParam(n *syntax.ParamExp) bool {
	if n.Param == nil || n.Excl || n.Length || n.Index != nil || n.Slice != nil || n.Repl != nil || n.Exp != nil {
		return false
	}
	switch v := n.Param.Value; {
	case v == "#" || v == "?" || v == "$" || v == "!" || v == "-":
		return true
	default:
		return isNumber(v) && !strings.ContainsAny(v, "xX#abcdefABCDEF")
	}
}

// arithmOnVariables reports whether arithmetic in n names a variable: bash
// evaluates a variable's value as arithmetic in turn, and a subscript in it
// (a[$(cmd)]) runs cmd.
func arithmOnVariables(n syntax.Node) bool {
	found := false
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParamExp:
			if !specialParam(n) {
				found = true
			}
			return false
		case *syntax.Word:
			if lit := n.Lit(); lit != "" && !isNumber(lit) {
				found = true
			}
		}
		return !found
	})
	return found
}

// subscriptTest reports whether a test checks a variable (-v, -R) by
// anything but a plain literal name: a subscript in it is evaluated.
func subscriptTest(x syntax.TestExpr) bool {
	found := false
	syntax.Walk(x, func(n syntax.Node) bool {
		if u, ok := n.(*syntax.UnaryTest); ok && (u.Op == syntax.TsVarSet || u.Op == syntax.TsRefVar) {
			w, ok := u.X.(*syntax.Word)
			if !ok || !plainName(w.Lit()) {
				found = true
			}
		}
		return !found
	})
	return found
}

// plainName reports whether s is a shell variable name.
func plainName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// declOptions are the options of declare, export, local, readonly and
// typeset that change nothing a later command or expansion relies on.
var declOptions = map[string]bool{"-x": true, "-r": true, "-g": true, "-p": true, "-f": true, "-F": true, "--": true}

// declared judges declare, export, local, readonly and typeset: each
// assignment as any other, and any other word (a quoted 'NAME=VALUE', an
// option such as -n or -i that makes later assignments names or
// arithmetic) leaves the line to Claude Code.
func (a *analyzer) declared(c *syntax.DeclClause) {
	for _, as := range c.Args {
		if as.Name != nil {
			a.assigned(as)
			continue
		}
		if as.Value != nil {
			if v, ok := shellword.Literal(as.Value, ""); ok && declOptions[v] {
				continue
			}
		}
		a.prompt("declares variables in a way the hook does not follow")
	}
}

// arithmTest reports whether a test compares as numbers (-eq, -lt, …)
// anything but numbers and special parameters ($#, $?).
func arithmTest(x syntax.TestExpr) bool {
	found := false
	syntax.Walk(x, func(n syntax.Node) bool {
		if b, ok := n.(*syntax.BinaryTest); ok {
			switch b.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
				for _, side := range []syntax.TestExpr{b.X, b.Y} {
					if !numberWord(side) {
						found = true
					}
				}
			}
		}
		return !found
	})
	return found
}

// numberWord reports whether a test's operand is a number or a special
// parameter, maybe quoted.
func numberWord(x syntax.TestExpr) bool {
	w, ok := x.(*syntax.Word)
	if !ok || len(w.Parts) != 1 {
		return false
	}
	switch p := w.Parts[0].(type) {
	case *syntax.Lit:
		return isNumber(p.Value)
	case *syntax.ParamExp:
		return specialParam(p)
	case *syntax.DblQuoted:
		if len(p.Parts) == 1 {
			pe, ok := p.Parts[0].(*syntax.ParamExp)
			return ok && specialParam(pe)
		}
	}
	return false
}

// isNumber reports whether s is a number literal of bash arithmetic.
func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' || r == 'x' || r == 'X' || r == '#') {
			return false
		}
	}
	return s[0] >= '0' && s[0] <= '9'
}
