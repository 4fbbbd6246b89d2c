package claudehook

import (
	"os"
	"path/filepath"
	"strings"
)

// WrapperLinks returns the rm wrapper's links found in pathEnv (PATH): an
// rm that is this very program, and the program itself. Removing or
// replacing one of them, or writing over the program, takes the wrapper
// away from every shell.
func WrapperLinks(pathEnv string) []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	self, err := os.Stat(exe)
	if err != nil {
		return nil
	}
	out := []string{resolvePath(exe)}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue
		}
		l := filepath.Join(dir, "rm")
		if fi, err := os.Stat(l); err == nil && os.SameFile(fi, self) {
			out = append(out, linkName(l))
		}
	}
	return out
}

// guarded returns why changing the file at path (absolute) would switch
// countersign off, or "": it is Claude Code's settings file, which holds
// the hooks, or the rm wrapper's link or program. whole is set when the
// change takes everything under path too (rm -r, mv of a directory).
func (p *Policy) guarded(path string, whole bool) string {
	forms := []string{filepath.Clean(path), linkName(path), resolvePath(path)}
	for _, f := range forms {
		base, parent := filepath.Base(f), filepath.Base(filepath.Dir(f))
		switch {
		case parent == ".claude" && strings.HasPrefix(base, "settings") && strings.HasSuffix(base, ".json"):
			return "changes " + f + ", Claude Code's settings, which can switch its hooks off"
		case whole && base == ".claude":
			return "changes " + f + ", which holds Claude Code's settings and can switch its hooks off"
		}
		for _, l := range p.Wrappers {
			if f == l || whole && inside(l, f) {
				return "removes or replaces " + l + ", countersign's rm wrapper"
			}
		}
	}
	return ""
}

// guard raises pt for a change that would switch countersign off: no rule
// goes below Claude Code's prompt where it asks, nor below a human's
// approval where it does not.
func (p *Policy) guard(pt *part, why string, c *Call, tool string) {
	if why == "" {
		return
	}
	if modeAsks(c.Mode, tool) {
		pt.raise(Prompt, why)
		return
	}
	pt.raise(Ask, why+notAsking(c.Mode))
}
