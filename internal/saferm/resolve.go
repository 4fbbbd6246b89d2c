package saferm

import (
	"fmt"
	"path/filepath"
	"strings"
)

// assessEnv is an Assessor's paths prepared once per assessment: the
// working and home directories and the protected paths, each in literal and
// symlink-resolved form.
type assessEnv struct {
	cwd, home []string
	protected []string
}

// env prepares the assessment environment.
func (a *Assessor) env() assessEnv {
	e := assessEnv{protected: withResolved(a.Protected)}
	e.cwd = bothForms(a.Cwd)
	if a.Home != "" {
		e.home = bothForms(a.Home)
	}
	return e
}

// bothForms returns p cleaned and symlink-resolved (once if they agree).
func bothForms(p string) []string {
	c := filepath.Clean(p)
	if r := evalExisting(c); r != c {
		return []string{c, r}
	}
	return []string{c}
}

// block tells why deleting target (or full, its complete resolution) is
// hard-blocked, or returns "": the root, the home directory, the working
// directory, and anything containing one of them — deleting /home deletes
// the home directory, and ".." contains the working directory.
func (e assessEnv) block(op, target, full string) string {
	for _, p := range []string{target, full} {
		if p == "/" {
			return fmt.Sprintf("refusing to delete %s: it resolves to / (the root directory)", ShellQuote(op))
		}
		if why := containsOne(p, e.home, "home directory"); why != "" {
			return fmt.Sprintf("refusing to delete %s: %s", ShellQuote(op), why)
		}
		if why := containsOne(p, e.cwd, "working directory"); why != "" {
			return fmt.Sprintf("refusing to delete %s: %s", ShellQuote(op), why)
		}
	}
	return ""
}

// containsOne says whether p is or contains one of dirs, named what.
func containsOne(p string, dirs []string, what string) string {
	for _, d := range dirs {
		switch {
		case p == d:
			return fmt.Sprintf("%s is the %s", displayPath(p), what)
		case strings.HasPrefix(d, p+"/"):
			return fmt.Sprintf("%s contains the %s %s", displayPath(p), what, displayPath(d))
		}
	}
	return ""
}

// resolve turns an operand into the absolute path rm will remove (target)
// and that path with every symlink resolved (full). Symlinks in the parent
// are resolved but not the final component — rm removes a symlink, not what
// it points to — unless the operand ends in "/", ".", or "..", where the
// kernel resolves the last component too (rm -r link/ empties the target).
func resolve(cwd, op string) (target, full string) {
	p := op
	if !filepath.IsAbs(p) {
		p = cwd + "/" + p
	}
	trimmed := strings.TrimRight(p, "/")
	if trimmed == "" {
		return "/", "/"
	}
	dir, base := filepath.Split(trimmed)
	if len(trimmed) < len(p) || base == "." || base == ".." {
		r := evalExisting(trimmed)
		return r, r
	}
	target = filepath.Join(evalExisting(dir), base)
	return target, evalExisting(target)
}

// evalExisting resolves the symlinks of p as far as p exists, keeping the
// missing rest lexically. Resolution is physical: "a/.." where a is a
// symlink leads to the parent of a's target, as in the kernel.
func evalExisting(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	parent := filepath.Dir(p)
	if parent == p {
		return p
	}
	return filepath.Join(evalExisting(parent), filepath.Base(p))
}
