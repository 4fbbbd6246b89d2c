package claudehook

import (
	"path/filepath"
	"strings"
)

// ln records the links a command line makes: a later write or delete
// through one of them lands where the link will point when it runs, which
// the file system does not show yet (ln -s ../outside o && rm -rf o/).
// ln itself is left to Claude Code.
func (a *analyzer) ln(c *cmdCtx) {
	if !a.guardOperands(c, "ln") {
		a.add(c.part(Prompt, "left to Claude Code's permissions"))
	}
	ops, dir, noDir, ok := lnArgs(c.w[1:])
	if !ok {
		a.someLink = true
		return
	}
	var names []string
	switch {
	case dir != "":
		for _, op := range ops {
			names = append(names, dir+"/"+filepath.Base(op))
		}
	case len(ops) == 1:
		names = []string{filepath.Base(ops[0])}
	case len(ops) > 1:
		last := ops[len(ops)-1]
		if noDir || c.st.cwd == "" || !isDir(absUnder(c.st.cwd, last)) {
			names = []string{last}
			break
		}
		for _, op := range ops[:len(ops)-1] {
			names = append(names, last+"/"+filepath.Base(op))
		}
	}
	for _, n := range names {
		if !filepath.IsAbs(n) && c.st.cwd == "" {
			a.someLink = true
			continue
		}
		a.links = append(a.links, linkName(absUnder(c.st.cwd, n)))
	}
}

// lnArgs reads ln's arguments: the operands, the -t directory and -T. ok
// is false when a word is computed only when it runs.
func lnArgs(args []word) (ops []string, dir string, noDir, ok bool) {
	end := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !w.static {
			return nil, "", false, false
		}
		switch v := w.val; {
		case end || v == "-" || !strings.HasPrefix(v, "-"):
			ops = append(ops, v)
		case v == "--":
			end = true
		case v == "--target-directory" || v == "--suffix":
			i++
			if v == "--target-directory" && i < len(args) {
				dir, ok = args[i].val, args[i].static
				if !ok {
					return nil, "", false, false
				}
			}
		case strings.HasPrefix(v, "--target-directory="):
			dir = strings.TrimPrefix(v, "--target-directory=")
		case v == "--no-target-directory":
			noDir = true
		case strings.HasPrefix(v, "--"):
		default:
			noDir = noDir || strings.Contains(v, "T")
			if k := strings.IndexAny(v, "tS"); k > 0 {
				val := v[k+1:]
				if val == "" && i+1 < len(args) {
					i++
					val = args[i].val
					if !args[i].static {
						return nil, "", false, false
					}
				}
				if v[k] == 't' {
					dir = val
				}
			}
		}
	}
	return ops, dir, noDir, true
}

// linkName is the path of a link to be made: its parent resolved, its own
// name not, since it is replaced.
func linkName(p string) string {
	return filepath.Join(resolvePath(filepath.Dir(p)), filepath.Base(p))
}

// throughLink returns the link made earlier in the line that p (absolute,
// as written) goes through, or "": p lies under the link, or is the link
// and follow is set (a write, or a delete of "link/"). A line that makes
// a link of unknown name leads every later path through it.
func (a *analyzer) throughLink(p string, follow bool) string {
	if a.someLink {
		return "a link"
	}
	forms := []string{filepath.Clean(p), resolvePath(p), linkName(p)}
	for _, l := range a.links {
		for _, f := range forms {
			if strings.HasPrefix(f, l+"/") || (follow && f == l) {
				return l
			}
		}
	}
	return ""
}
