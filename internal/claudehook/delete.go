package claudehook

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/countersign/countersign/internal/saferm"
)

// rm judges a delete with the rm wrapper's assessment of the targets,
// resolved where the shell will be: hard-blocked → deny, risky → ask, and
// targets that cannot be resolved before the command runs → ask. A delete
// the rm policy lets through is left to Claude Code.
func (a *analyzer) rm(c *cmdCtx, args []word) {
	p := c.part(Prompt, "a delete the rm policy lets through")
	if c.st.remote != "" {
		p.raise(Ask, "deletes files "+c.st.remote+", where the paths cannot be checked")
		a.add(p)
		return
	}
	if !a.spend(true) {
		return
	}
	var temps []string
	if c.fromStdin == "" {
		args, temps = a.tempOperands(args, c.st)
	}
	static, unknown := splitOperands(args, c.st.cwd)
	if c.fromStdin != "" {
		unknown = append(unknown, c.fromStdin)
	}
	as := a.pol.assessor(a.cwdOr(c.st)).Assess(a.ctx, static)
	switch {
	case as.Blocked:
		p.raise(Deny, as.BlockReason)
	case as.NeedsApproval:
		p.raise(Ask, as.Reasons...)
	}
	if len(unknown) > 0 {
		p.raise(Ask, "delete targets that cannot be resolved before the command runs: "+strings.Join(unknown, " "))
	}
	a.protectProject(&p, as.Targets)
	a.deleteThrough(&p, static, c.st)
	for _, t := range as.Targets {
		a.pol.guard(&p, a.pol.guarded(t, as.Recursive), a.call, "Bash rm")
	}
	p.details = append(p.details, deleteDetail(as))
	p.deleted = as
	if len(temps) > 0 {
		p.details = append(p.details, "deletes the temporary "+plural(len(temps), "directory", "directories")+" "+strings.Join(temps, " ")+" that this command line made")
	}
	a.add(p)
}

// tempOperands sets aside the operands that are a temporary directory the
// line made ("$d" after d=$(mktemp -d)).
func (a *analyzer) tempOperands(args []word, st *shState) (rest []word, temps []string) {
	for _, w := range args {
		if name := a.tempOperand(w, st); name != "" {
			temps = append(temps, "$"+name)
			continue
		}
		rest = append(rest, w)
	}
	return rest, temps
}

// plural picks the word for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// deleteThrough asks before a delete through a link the line makes
// earlier: what it removes is known only when it runs.
func (a *analyzer) deleteThrough(p *part, operands []string, st *shState) {
	if len(a.links) == 0 && !a.someLink {
		return
	}
	for _, op := range operands {
		if isOption(op) || op == "--" {
			continue
		}
		abs := op
		if !filepath.IsAbs(abs) {
			abs = a.cwdOr(st) + "/" + op
		}
		follow := strings.HasSuffix(op, "/") || filepath.Base(op) == "." || filepath.Base(op) == ".."
		if l := a.throughLink(abs, follow); l != "" {
			p.raise(Ask, "deletes through "+l+", a link this command line makes before, so what it removes cannot be known before it runs")
			return
		}
	}
}

// splitOperands separates the words rm can be assessed on from those that
// cannot be resolved: computed words, and relative paths when the working
// directory is unknown.
func splitOperands(args []word, cwd string) (static, unknown []string) {
	operands := false
	for _, w := range args {
		switch {
		case !w.static:
			unknown = append(unknown, w.src)
		case cwd == "" && !filepath.IsAbs(w.val) && (operands || !isOption(w.val)):
			unknown = append(unknown, w.val)
		default:
			static = append(static, w.val)
		}
		if w.static && w.val == "--" {
			operands = true
		}
	}
	return static, unknown
}

// isOption reports whether an argument looks like an option.
func isOption(v string) bool {
	return len(v) > 1 && v[0] == '-'
}

// cwdOr is the shell's working directory, or the call's when unknown (the
// assessor needs one; every relative operand was set aside then).
func (a *analyzer) cwdOr(st *shState) string {
	if st.cwd != "" {
		return st.cwd
	}
	return a.call.Cwd
}

// protectProject asks before a delete that takes the project directory or
// Claude Code's working directory with it: the rm policy blocks only the
// shell's current directory, which a cd may have moved.
func (a *analyzer) protectProject(p *part, targets []string) {
	for _, dir := range []string{a.call.Project, a.call.Cwd} {
		real := resolvePath(dir)
		for _, t := range targets {
			if inside(dir, t) || inside(real, t) {
				p.raise(Ask, "deletes the project directory "+dir)
				return
			}
		}
	}
}

// deleteDetail says what a delete removes, for the human.
func deleteDetail(as *saferm.Assessment) string {
	if len(as.Targets) == 0 {
		return ""
	}
	shown := as.Targets
	more := ""
	if len(shown) > 5 {
		shown, more = shown[:5], fmt.Sprintf(" and %d more", len(as.Targets)-5)
	}
	count := fmt.Sprintf("%d files", as.FileCount)
	if as.FileCount == 1 {
		count = "1 file"
	}
	if as.FileCountCapped {
		count = "at least " + count
	}
	return fmt.Sprintf("deletes %s%s (%s, %s)", strings.Join(shown, ", "), more, count, saferm.FormatBytes(as.Bytes))
}

// find judges find: read-only unless it deletes (-delete) or runs commands
// (-exec and its kind, judged as commands whose {} is unknown), or writes
// files (-fprint and its kind).
func (a *analyzer) find(c *cmdCtx) {
	args := c.w[1:]
	i := 0
	for i < len(args) && args[i].static && slices.Contains([]string{"-H", "-L", "-P", "-D"}, args[i].val) {
		if args[i].val == "-D" {
			i++
		}
		i++
	}
	var roots []word
	for ; i < len(args); i++ {
		if v := args[i]; v.static && (strings.HasPrefix(v.val, "-") || v.val == "(" || v.val == "!") {
			break
		}
		roots = append(roots, args[i])
	}
	if len(roots) == 0 {
		roots = []word{lit(".")}
	}
	a.add(c.part(Allow, "find reads only, without -delete, -exec or -fprint"))
	if a.findExpr(c, args[i:]) {
		a.findDelete(c, roots)
	}
}

// findExpr walks a find expression and reports whether it deletes.
func (a *analyzer) findExpr(c *cmdCtx, expr []word) (deletes bool) {
	for j := 0; j < len(expr); j++ {
		e := expr[j]
		if !e.static {
			continue // a computed test or value: only an action matters
		}
		switch e.val {
		case "-delete":
			deletes = true
		case "-exec", "-execdir", "-ok", "-okdir":
			end := j + 1
			for end < len(expr) && !(expr[end].static && (expr[end].val == ";" || expr[end].val == "+")) {
				end++
			}
			inner := replaced(expr[j+1:end], "{}")
			sub := *c.st
			if e.val == "-execdir" || e.val == "-okdir" {
				sub.cwd = "" // each match's directory
			}
			if len(inner) > 0 {
				a.simple(&cmdCtx{w: inner, st: &sub, outer: c.subjects()})
			}
			j = end
		case "-fprint", "-fprint0", "-fls", "-fprintf":
			if j+1 < len(expr) {
				a.write(expr[j+1], c.st, true)
			}
		}
	}
	return deletes
}

// replaced marks the words holding a placeholder as unknown: find and
// xargs put run-time values there.
func replaced(ws []word, placeholder string) []word {
	out := make([]word, len(ws))
	for i, w := range ws {
		out[i] = w
		if placeholder != "" && w.static && strings.Contains(w.val, placeholder) {
			out[i] = word{src: w.val}
		}
	}
	return out
}

// findDelete judges find … -delete. Which files it deletes is decided when
// it runs, so it is asked unless every root is exempt by the rm policy's
// safe patterns or none exists; the rm assessment of the roots adds what
// it knows (protected paths, uncommitted changes).
func (a *analyzer) findDelete(c *cmdCtx, roots []word) {
	p := c.part(Prompt, "find -delete under paths exempt by the rm policy")
	if c.st.remote != "" {
		p.raise(Ask, "deletes files "+c.st.remote+", where the paths cannot be checked")
		a.add(p)
		return
	}
	if !a.spend(true) {
		return
	}
	static, unknown := splitOperands(roots, c.st.cwd)
	if len(unknown) > 0 {
		p.raise(Ask, "find -delete under paths that cannot be resolved before it runs: "+strings.Join(unknown, " "))
	}
	as := a.pol.assessor(a.cwdOr(c.st)).Assess(a.ctx, append([]string{"-r", "--"}, static...))
	if len(static) > 0 && !as.Exempt && (as.Blocked || len(as.Missing) < len(as.Targets)) {
		roots := make([]string, len(static))
		for i, r := range static {
			roots[i] = absUnder(a.cwdOr(c.st), r)
		}
		why := []string{"find -delete deletes whatever its expression matches when it runs, under " + strings.Join(roots, " ")}
		if as.Blocked {
			why = append(why, "the search covers a path the rm policy never deletes ("+as.BlockReason+")")
		}
		for _, r := range as.Reasons {
			if !strings.HasPrefix(r, "recursive deletion") {
				why = append(why, r)
			}
		}
		p.raise(Ask, why...)
	}
	a.protectProject(&p, as.Targets)
	a.deleteThrough(&p, append([]string{"--"}, addSlash(static)...), c.st)
	for _, t := range as.Targets {
		a.pol.guard(&p, a.pol.guarded(t, true), a.call, "Bash")
	}
	p.details = append(p.details, strings.Replace(deleteDetail(as), "deletes ", "may delete files in ", 1))
	p.deleted = as
	a.add(p)
}

// xargs runs a command with more arguments read from standard input: those
// are unknown, and so is every word holding the -I placeholder.
func (a *analyzer) xargs(c *cmdCtx) {
	a.add(c.part(Allow, "runs the command that follows"))
	args := c.w[1:]
	repl := ""
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		if !w.static {
			break
		}
		v := w.val
		if v == "--" {
			i++
			break
		}
		if strings.HasPrefix(v, "--") {
			name, val, has := strings.Cut(v, "=")
			switch {
			case name == "--replace":
				repl = "{}"
				if has {
					repl = val
				}
			case !has && slices.Contains([]string{"--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars", "--process-slot-var", "--max-lines"}, name):
				i++
			}
			continue
		}
		if !isOption(v) {
			break
		}
		i, repl = xargsShort(args, i, repl)
	}
	inner := args[min(i, len(args)):]
	if len(inner) == 0 {
		inner = []word{lit("echo")}
	}
	sub := &cmdCtx{w: replaced(inner, repl), st: c.st, outer: c.subjects(), fromStdin: "arguments read from standard input by xargs"}
	a.simple(sub)
}

// xargsShort reads one cluster of xargs's short options at args[i] and
// returns the index of its last word and the -I placeholder.
func xargsShort(args []word, i int, repl string) (int, string) {
	v := args[i].val
	for k := 1; k < len(v); k++ {
		rest := v[k+1:]
		switch v[k] {
		case 'a', 'd', 'E', 'L', 'n', 'P', 's', 'I':
			val := rest
			if val == "" && i+1 < len(args) {
				i++
				val = args[i].text()
			}
			if v[k] == 'I' {
				repl = val
			}
			return i, repl
		case 'i':
			repl = "{}"
			if rest != "" {
				repl = rest
			}
			return i, repl
		case 'e', 'l':
			return i, repl // an optional value, attached
		}
	}
	return i, repl
}

// absUnder makes a path absolute under dir.
func absUnder(dir, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// addSlash marks find's roots as followed: find descends into a root
// given as a link with -H, -L or a trailing slash.
func addSlash(roots []string) []string {
	out := make([]string, len(roots))
	for i, r := range roots {
		out[i] = strings.TrimSuffix(r, "/") + "/"
	}
	return out
}
