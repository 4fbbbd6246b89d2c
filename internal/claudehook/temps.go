package claudehook

import (
	"maps"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign/internal/shellword"
	"mvdan.cc/sh/v3/syntax"
)

// Temporary directories the line makes (d=$(mktemp -d)): deleting one
// later in the same line (rm -rf "$d") loses nothing the line did not make,
// so it is no reason to ask by itself. The hook trusts $d only while it
// surely holds what mktemp printed: the assignment ran on every path to
// the delete, and no script of the line assigns d in any other way (read
// d, for d in, d=…, ${d:=…}, eval 'd=…', a function that does). Under
// [rm] strict = true nothing is trusted, as in the seed.

// withTemp returns temps with name set (ok) or cleared, leaving the
// original unchanged: states share maps.
func withTemp(temps map[string]bool, name string, ok bool) map[string]bool {
	if temps[name] == ok {
		return temps
	}
	out := maps.Clone(temps)
	if out == nil {
		out = map[string]bool{}
	}
	if ok {
		out[name] = true
	} else {
		delete(out, name)
	}
	return out
}

// keepCommon returns the names set in both: after code that may or may
// not have run, a directory is known only when it was before and still is.
func keepCommon(before, after map[string]bool) map[string]bool {
	out := before
	for name := range before {
		if !after[name] {
			out = withTemp(out, name, false)
		}
	}
	return out
}

// assignedTemps follows the assignments of a command made of assignments
// only: a mktemp -d one records its variable, any other clears it.
func (a *analyzer) assignedTemps(assigns []*syntax.Assign, st *shState) {
	for _, as := range assigns {
		if as.Name != nil {
			st.temps = withTemp(st.temps, as.Name.Value, mktempAssign(as))
		}
	}
}

// mktempAssign reports whether an assignment is NAME=$(mktemp -d …), and
// the directory it makes is absolute (in $TMPDIR, or a -p or template
// directory given as an absolute path), so that a later cd does not change
// what the name points to.
func mktempAssign(as *syntax.Assign) bool {
	if as.Append || as.Index != nil || as.Array != nil || as.Value == nil || len(as.Value.Parts) != 1 {
		return false
	}
	part := as.Value.Parts[0]
	if dq, ok := part.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		part = dq.Parts[0]
	}
	cs, ok := part.(*syntax.CmdSubst)
	if !ok || len(cs.Stmts) != 1 || len(cs.Stmts[0].Redirs) > 0 || cs.Stmts[0].Negated || cs.Stmts[0].Background {
		return false
	}
	call, ok := cs.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(call.Assigns) > 0 || len(call.Args) == 0 {
		return false
	}
	var args []string
	for _, w := range call.Args {
		v, ok := shellword.Literal(w, "")
		if !ok {
			return false
		}
		args = append(args, v)
	}
	return args[0] == "mktemp" && mktempDirArgs(args[1:])
}

// mktempDirArgs reports whether mktemp's arguments make a directory at an
// absolute path: -d, no -u (which only prints a name), and a template
// that is absolute or goes to the temporary directory (-t, -p ABS).
func mktempDirArgs(args []string) bool {
	dir, tmp, template := false, false, ""
	for i := 0; i < len(args); i++ {
		switch v := args[i]; {
		case v == "-d" || v == "--directory":
			dir = true
		case v == "-q" || v == "--quiet":
		case v == "-t" || v == "--tmpdir":
			tmp = true
		case v == "-dt" || v == "-td" || v == "-dq" || v == "-qd":
			dir, tmp = true, tmp || strings.Contains(v, "t")
		case v == "-p" || strings.HasPrefix(v, "--tmpdir="):
			p := strings.TrimPrefix(v, "--tmpdir=")
			if v == "-p" {
				if i++; i == len(args) {
					return false
				}
				p = args[i]
			}
			if !filepath.IsAbs(p) {
				return false
			}
			tmp = true
		case strings.HasPrefix(v, "-") || template != "":
			return false // -u, --dry-run, --suffix, and anything else
		default:
			template = v
		}
	}
	return dir && (template == "" || filepath.IsAbs(template) || tmp && !strings.Contains(template, "/"))
}

// taint records the names a script assigns other than by mktemp -d, or
// may assign: every word equal to a name or holding "name=", "name+=" or
// "name[" (read d, let d=1, eval 'd=/', ((d=1))), loop variables and
// ${d:=…}. It over-counts: a trusted name only avoids a question.
func (a *analyzer) taint(f *syntax.File) {
	mark := func(v string) {
		if a.tainted == nil {
			a.tainted = map[string]bool{}
		}
		for _, field := range strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune(" \t\n;&|()`{}", r) }) {
			if i := strings.IndexAny(field, "+=["); i > 0 {
				field = field[:i]
			}
			if plainName(field) {
				a.tainted[field] = true
			}
		}
	}
	skip := map[*syntax.Lit]bool{} // names that are not words (d=, $d) and command names
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			skip[n.Name] = true
			if n.Name != nil && !mktempAssign(n) {
				mark(n.Name.Value)
			}
		case *syntax.CallExpr:
			if len(n.Args) > 0 && len(n.Args[0].Parts) == 1 {
				if l, ok := n.Args[0].Parts[0].(*syntax.Lit); ok {
					skip[l] = true // a command's name assigns nothing
				}
			}
		case *syntax.Lit:
			if !skip[n] {
				mark(n.Value)
			}
		case *syntax.SglQuoted:
			mark(n.Value)
		case *syntax.WordIter:
			mark(n.Name.Value)
		case *syntax.ParamExp:
			skip[n.Param] = true
			if n.Exp != nil && n.Param != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) {
				mark(n.Param.Value)
			}
		}
		return true
	})
}

// tempOperand returns the variable of a delete operand that is exactly a
// trusted temporary directory in double quotes ("$d", "${d}"), or "".
// Only the bare variable counts: "$d"/x would be /x had mktemp failed; and
// only quoted: $d splits and globs where $TMPDIR holds a space.
func (a *analyzer) tempOperand(w word, st *shState) string {
	if w.static || a.pol.Config.Strict {
		return ""
	}
	s := w.src
	if len(s) < 3 || s[0] != '"' || s[len(s)-1] != '"' {
		return ""
	}
	name, ok := strings.CutPrefix(s[1:len(s)-1], "$")
	if !ok {
		return ""
	}
	if inner, ok := strings.CutPrefix(name, "{"); ok {
		name, ok = strings.CutSuffix(inner, "}")
		if !ok {
			return ""
		}
	}
	// A line that names mktemp otherwise (a function, an alias, hash -p)
	// or sets PATH may run another mktemp, which prints what it likes.
	if !plainName(name) || !st.temps[name] || a.tainted[name] || a.tainted["mktemp"] || a.tainted["PATH"] {
		return ""
	}
	return name
}

// tempFile reports whether a word names a file inside a trusted temporary
// directory: "$d/f", "$d"/f, "${d}"/a/b, with a literal rest and no "..".
// Writing there changes nothing the line did not make.
func (a *analyzer) tempFile(w word, st *shState) bool {
	if !strings.HasPrefix(w.src, `"$`) {
		return false
	}
	head, rest, ok := strings.Cut(strings.ReplaceAll(w.src, `"`, ""), "/")
	if !ok || rest == "" || strings.ContainsAny(rest, "$`'\\*?[{") {
		return false
	}
	for _, part := range strings.Split(rest, "/") {
		if part == ".." {
			return false
		}
	}
	return a.tempOperand(word{src: `"` + head + `"`}, st) != ""
}
