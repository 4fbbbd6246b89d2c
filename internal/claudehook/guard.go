package claudehook

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// wrapperNames are the programs an rm wrapper link may lead to: the full
// binary and the small agent one.
var wrapperNames = []string{"countersign", "countersign-agent"}

// WrapperLinks returns the rm wrapper's links found in pathEnv (PATH) and
// the programs they lead to: an rm that is this very program, one of its
// siblings (countersign beside countersign-agent), or any program named
// like them. Removing or replacing one of them, or writing over the
// program, takes the wrapper away from every shell.
func WrapperLinks(pathEnv string) []string {
	var progs []os.FileInfo
	var out []string
	if exe, err := os.Executable(); err == nil {
		for _, p := range append([]string{exe}, siblings(exe)...) {
			if fi, err := os.Stat(p); err == nil {
				progs, out = append(progs, fi), append(out, resolvePath(p))
			}
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if !filepath.IsAbs(dir) {
			continue
		}
		l := filepath.Join(dir, "rm")
		fi, err := os.Stat(l)
		if err != nil {
			continue
		}
		same := slices.ContainsFunc(progs, func(p os.FileInfo) bool { return os.SameFile(p, fi) })
		if real := resolvePath(l); same || slices.Contains(wrapperNames, filepath.Base(real)) {
			out = append(out, linkName(l), real)
		}
	}
	return out
}

// siblings are the other wrapper programs beside exe.
func siblings(exe string) []string {
	var out []string
	for _, n := range wrapperNames {
		if p := filepath.Join(filepath.Dir(exe), n); p != exe {
			out = append(out, p)
		}
	}
	return out
}

// guarded returns why changing the file at path (absolute) would switch
// countersign off, or "": it is Claude Code's or Gemini CLI's settings
// file, which holds the hooks, a Gemini CLI policy file, which lets calls
// run that would be asked, a GitHub Copilot CLI hooks or settings file
// (copilotGuarded), a Codex hooks or configuration file (codexGuarded),
// or the rm wrapper's link or program. whole is set when the
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
		case parent == ".gemini" && base == "settings.json":
			return "changes " + f + ", Gemini CLI's settings, which can switch its hooks off"
		case parent == "policies" && filepath.Base(filepath.Dir(filepath.Dir(f))) == ".gemini" && strings.HasSuffix(base, ".toml"):
			return "changes " + f + ", a Gemini CLI policy file, which decides what runs without a question"
		case whole && (base == ".gemini" || base == "policies" && parent == ".gemini"):
			return "changes " + f + ", which holds Gemini CLI's settings or policies and can switch its hooks off"
		}
		if why := copilotGuarded(f, whole); why != "" {
			return why
		}
		if why := codexGuarded(f, whole); why != "" {
			return why
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
	pt.raise(Ask, why+notAsking(c))
}

// codexGuarded returns why changing the file at path would switch the
// Codex CLI's hooks off, or "": its hooks.json, which holds them, or its
// config.toml, which holds their trust and its features, in a .codex
// folder (~/.codex, a project's) or in Codex's system folder. whole is set
// when the change takes everything under path too.
func codexGuarded(path string, whole bool) string {
	base, dir := filepath.Base(path), filepath.Dir(path)
	codexDir := filepath.Base(dir) == ".codex" || dir == codexSystemDir
	switch {
	case codexDir && (base == "hooks.json" || base == "config.toml" || base == "requirements.toml"):
		return "changes " + path + ", the Codex CLI's hooks or configuration, which can switch its hooks off"
	case whole && (base == ".codex" || path == codexSystemDir):
		return "changes " + path + ", which holds the Codex CLI's hooks and configuration and can switch its hooks off"
	}
	return ""
}
