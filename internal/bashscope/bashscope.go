// Package bashscope tells, from a Bash command line alone, which paths the
// line's deletes name: the operands of rm and unlink and the roots of
// find -delete, resolved against the working directory the line starts
// in and the cd commands before them. It reads the line with the parser
// the Claude Code hook uses (mvdan.cc/sh) and looks at no file system, so
// that the server can check the paths a hook's request says its line
// deletes without the agent's files.
//
// It is stricter than the hook, never looser: a delete it cannot follow
// (behind sudo, xargs, bash -c or a function, of a computed or ~ path, or
// after a cd it cannot follow) names nothing, and a path the hook found
// through a symbolic link does not match the line's own words. Such a
// path is then not tied to the line, and what relies on the tie does not
// happen: the human is asked again.
package bashscope

import (
	"path"
	"slices"
	"strings"

	"github.com/countersign/countersign/internal/shellword"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Bounds of what is followed, so that a long or deep line costs little:
// beyond them the line names nothing.
const (
	maxDepth    = 64  // nesting of compound commands
	maxOperands = 256 // delete operands in the line
	maxBraces   = 64  // words one brace expansion makes, as the hook
)

// Ties reports whether every path of claims is a path the line deletes:
// the absolute, clean path of a delete operand (resolved against cwd when
// relative), or one that a glob operand matches. No claims, a line that
// does not parse, or one path that is not tied: false.
func Ties(line, cwd string, claims []string) bool {
	if len(claims) == 0 {
		return false
	}
	d, ok := deletes(line, cwd)
	if !ok {
		return false
	}
	for _, c := range claims {
		if !d.names(c) {
			return false
		}
	}
	return true
}

// Deletes returns what the line's deletes name, as Ties reads them: the
// absolute, clean paths and the absolute glob patterns of the operands
// of rm and unlink and the roots of find -delete, each sorted. all is
// false when some delete operand names nothing the walk can follow (one
// computed when the line runs, or relative from a directory it cannot
// know); ok is false when the line does not parse or is beyond the
// bounds. Deletes behind sudo, xargs, bash -c or a function are not seen
// at all: a caller that judges a line's risk checks for those itself.
func Deletes(line, cwd string) (paths, patterns []string, all, ok bool) {
	d, w, ok := walk(line, cwd)
	if !ok {
		return nil, nil, false, false
	}
	for p := range d.exact {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	patterns = slices.Clone(d.patterns)
	slices.Sort(patterns)
	return paths, slices.Compact(patterns), w.unfollowed == 0, true
}

// named is what a line's deletes name: exact paths and glob patterns, all
// absolute.
type named struct {
	exact    map[string]bool
	patterns []string
}

// names reports whether p is one of the paths.
func (n *named) names(p string) bool {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return false
	}
	if n.exact[p] {
		return true
	}
	for _, pat := range n.patterns {
		if ok, err := path.Match(pat, p); err == nil && ok {
			return true
		}
	}
	return false
}

// deletes parses the line and collects what its deletes name; ok is false
// when the line does not parse or is beyond the bounds.
func deletes(line, cwd string) (*named, bool) {
	d, _, ok := walk(line, cwd)
	return d, ok
}

// walk parses the line and follows its commands.
func walk(line, cwd string) (*named, *walker, bool) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(line), "")
	if err != nil {
		return nil, nil, false
	}
	w := &walker{funcs: map[string]bool{}, out: &named{exact: map[string]bool{}}}
	w.scan(f)
	st := &state{}
	if path.IsAbs(cwd) && path.Clean(cwd) == cwd {
		st.cwd = cwd
	}
	w.stmts(f.Stmts, st)
	if w.over {
		return nil, nil, false
	}
	return w.out, w, true
}

// walker follows a line's commands.
type walker struct {
	funcs    map[string]bool // functions the line defines: a call of one may do anything
	cdpath   bool            // the line sets CDPATH: a relative cd goes who knows where
	depth    int
	operands int
	over     bool // a bound was passed
	// unfollowed counts the delete operands that name nothing: computed,
	// or relative from an unknown directory.
	unfollowed int
	out        *named
}

// state is what the walk knows of the shell at a point.
type state struct {
	cwd string // "" when it cannot be known
}

// scan notes, before the walk, the functions the line defines and
// whether it sets CDPATH: both change what a later command does.
func (w *walker) scan(f *syntax.File) {
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.FuncDecl:
			w.funcs[n.Name.Value] = true
		case *syntax.Assign:
			if n.Name != nil && n.Name.Value == "CDPATH" {
				w.cdpath = true
			}
		}
		return true
	})
}

// stmts walks statements that share the shell's state.
func (w *walker) stmts(list []*syntax.Stmt, st *state) {
	for _, s := range list {
		w.stmt(s, st)
	}
}

// stmt walks one statement.
func (w *walker) stmt(s *syntax.Stmt, st *state) {
	if s == nil || s.Cmd == nil || w.over {
		return
	}
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > maxDepth {
		w.over = true
		return
	}
	w.command(s.Cmd, st)
}

// command walks one command of any kind. Those not named here (arithmetic,
// tests, declarations, coprocesses) delete nothing the walk follows and
// do not change the working directory.
func (w *walker) command(cmd syntax.Command, st *state) {
	switch c := cmd.(type) {
	case *syntax.CallExpr:
		w.call(c, st)
	case *syntax.BinaryCmd:
		w.binary(c, st)
	case *syntax.Subshell:
		sub := *st
		w.stmts(c.Stmts, &sub)
	case *syntax.Block:
		w.stmts(c.Stmts, st)
	case *syntax.IfClause:
		w.branching(st, func(s *state) {
			for ic := c; ic != nil; ic = ic.Else {
				w.stmts(ic.Cond, s)
				w.stmts(ic.Then, s)
			}
		})
	case *syntax.WhileClause:
		w.branching(st, func(s *state) {
			w.stmts(c.Cond, s)
			w.stmts(c.Do, s)
		})
	case *syntax.ForClause:
		w.branching(st, func(s *state) { w.stmts(c.Do, s) })
	case *syntax.CaseClause:
		w.branching(st, func(s *state) {
			for _, item := range c.Items {
				w.stmts(item.Stmts, s)
			}
		})
	case *syntax.TimeClause:
		w.stmt(c.Stmt, st)
	}
}

// branching walks code that may or may not run: a directory change in it
// leaves the working directory unknown after it.
func (w *walker) branching(st *state, walk func(*state)) {
	inner := *st
	walk(&inner)
	if inner.cwd != st.cwd {
		st.cwd = ""
	}
}

// binary walks a && b, a || b and pipelines, as the hook does.
func (w *walker) binary(c *syntax.BinaryCmd, st *state) {
	switch c.Op {
	case syntax.AndStmt:
		w.stmt(c.X, st)
		w.stmt(c.Y, st)
	case syntax.OrStmt:
		before := st.cwd
		w.stmt(c.X, st)
		// b runs when a failed, perhaps before a's cd, unless b leaves.
		if st.cwd != before && !exits(c.Y) {
			st.cwd = ""
		}
		w.stmt(c.Y, st)
	default: // | and |&: every stage in its own subshell
		x, y := *st, *st
		w.stmt(c.X, &x)
		w.stmt(c.Y, &y)
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

// stateChangers are the builtins besides cd that may change the working
// directory, or what a later cd or rm runs, in ways the walk does not
// follow.
var stateChangers = map[string]bool{
	"pushd": true, "popd": true, "eval": true, "source": true, ".": true, "builtin": true,
	"command": true, "alias": true, "shopt": true, "trap": true, "enable": true,
}

// call walks a simple command: a delete is noted, a cd followed, and
// anything that may move the shell elsewhere makes the working directory
// unknown.
func (w *walker) call(c *syntax.CallExpr, st *state) {
	if len(c.Args) == 0 {
		return // assignments only
	}
	args := w.words(c.Args)
	if len(args) == 0 || !args[0].ok {
		st.cwd = "" // a computed command: it may be cd
		return
	}
	name := args[0].val
	switch {
	case w.funcs[name] || stateChangers[name]:
		st.cwd = ""
	case name == "cd":
		st.cwd = w.cd(args[1:], st)
	case path.Base(name) == "rm":
		w.rm(args[1:], st, false)
	case path.Base(name) == "unlink":
		w.rm(args[1:], st, true)
	case path.Base(name) == "find":
		w.find(args[1:], st)
	}
}

// rm notes the operands of rm (after its options, or all of them for
// unlink). An operand known only when the line runs names nothing.
func (w *walker) rm(args []word, st *state, all bool) {
	operands := all
	for _, a := range args {
		switch {
		case !a.ok:
			w.unfollowed++
		case !operands && a.val == "--":
			operands = true
		case !operands && len(a.val) > 1 && a.val[0] == '-':
		default:
			w.target(a.val, st)
		}
	}
}

// findActions are find's actions that take the words up to ; or + as a
// command: a -delete among them is that command's word.
var findActions = map[string]bool{"-exec": true, "-execdir": true, "-ok": true, "-okdir": true}

// find notes the roots of a find that deletes (-delete), as the hook
// names them: the words before the expression, or . when none.
func (w *walker) find(args []word, st *state) {
	i := 0
	for i < len(args) && args[i].ok && (args[i].val == "-H" || args[i].val == "-L" || args[i].val == "-P" || args[i].val == "-D") {
		if args[i].val == "-D" {
			i++
		}
		i++
	}
	var roots []word
	for ; i < len(args); i++ {
		if v := args[i]; v.ok && (strings.HasPrefix(v.val, "-") || v.val == "(" || v.val == "!") {
			break
		}
		roots = append(roots, args[i])
	}
	deletes := false
	for j := i; j < len(args); j++ {
		switch a := args[j]; {
		case a.ok && findActions[a.val]:
			for j+1 < len(args) && !(args[j+1].ok && (args[j+1].val == ";" || args[j+1].val == "+")) {
				j++
			}
		case a.ok && a.val == "-delete":
			deletes = true
		}
	}
	if !deletes {
		return
	}
	if len(roots) == 0 {
		roots = []word{{val: ".", ok: true}}
	}
	for _, r := range roots {
		if r.ok {
			w.target(r.val, st)
		} else {
			w.unfollowed++
		}
	}
}

// cd returns the directory cd goes to, or "" when the walk cannot tell:
// no operand (the home directory), -, a stack entry, a pattern, or a
// relative path from an unknown directory or under CDPATH.
func (w *walker) cd(args []word, st *state) string {
	for len(args) > 0 && args[0].ok && len(args[0].val) > 1 && args[0].val[0] == '-' {
		args = args[1:] // -L, -P, -e, --
	}
	if len(args) == 0 || !args[0].ok {
		return ""
	}
	v := args[0].val
	if v == "" || v == "-" || strings.HasPrefix(v, "+") || hasMeta(v) {
		return ""
	}
	if !path.IsAbs(v) {
		if st.cwd == "" || w.cdpath {
			return ""
		}
		v = st.cwd + "/" + v
	}
	return path.Clean(v)
}

// target notes one operand of a delete: its absolute, clean path, or the
// absolute pattern of a glob. A relative operand from an unknown
// directory names nothing.
func (w *walker) target(v string, st *state) {
	if v == "" {
		return // rm fails on an empty name and deletes nothing
	}
	w.operands++
	if w.operands > maxOperands {
		w.over = true
		return
	}
	if !path.IsAbs(v) && st.cwd == "" {
		w.unfollowed++
		return
	}
	if hasMeta(v) {
		pat := v
		if !path.IsAbs(v) {
			pat = escapeMeta(st.cwd) + "/" + v
		}
		w.out.patterns = append(w.out.patterns, path.Clean(pat))
		return
	}
	abs := v
	if !path.IsAbs(v) {
		abs = st.cwd + "/" + v
	}
	w.out.exact[path.Clean(abs)] = true
}

// word is one word of a command after brace expansion: its value when it
// is made only of literal parts.
type word struct {
	val string
	ok  bool
}

// words resolves a command's words, brace expansion included, as the
// hook does.
func (w *walker) words(ws []*syntax.Word) []word {
	var out []word
	for _, sw := range ws {
		cp := *sw // SplitBraces replaces the parts
		if !syntax.SplitBraces(&cp) {
			v, ok := shellword.Literal(sw, "")
			out = append(out, word{v, ok})
			continue
		}
		n := 0
		for bw, err := range expand.BracesSeq(nil, &cp) {
			if err != nil || n == maxBraces {
				out = append(out, word{})
				break
			}
			v, ok := shellword.Literal(bw, "")
			out = append(out, word{v, ok})
			n++
		}
	}
	return out
}

// hasMeta reports whether an operand holds a glob character, which the
// rm assessment expands (quoted or not, as the hook reads it).
func hasMeta(s string) bool {
	return strings.ContainsAny(s, "*?[")
}

// escapeMeta quotes the pattern characters of a literal path, so that a
// directory named "[x]" is not read as a pattern.
func escapeMeta(p string) string {
	var b strings.Builder
	for _, c := range p {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}
