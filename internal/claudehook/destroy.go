package claudehook

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/saferm"
)

// Destroyers are commands that lose data without rm: code that deletes
// (python -c 'shutil.rmtree(…)'), dd of=, shred, truncate, > over an
// existing file, git checkout -- ., git restore, git stash drop|clear, git
// branch -D, rsync --delete, mv over an existing file, chmod -R 000. The
// hook leaves them to Claude Code's prompt where Claude Code has one; in a
// permission mode where it will not ask (bypassPermissions, dontAsk,
// auto), the hook asks a human instead. A rule still decides them.
//
// Two more switch countersign itself off: writing Claude Code's settings
// (.claude/settings*.json, which hold the hooks) and removing or replacing
// the rm wrapper's link. No rule allows those; they are Claude Code's to
// ask in a mode where it asks, and a human's through countersign
// otherwise.

// modeAsks reports whether Claude Code asks a human itself, in the call's
// permission mode, for a call of tool that no rule of its own allows. A
// Bash call names its command too ("Bash mv"): acceptEdits accepts file
// edits unasked, and mkdir, touch, rm, rmdir, mv, cp and sed with them. An
// unknown or missing mode counts as one that does not ask.
func modeAsks(mode, tool string) bool {
	switch mode {
	case "default", "plan":
		return true
	case "acceptEdits":
		cmd, _ := strings.CutPrefix(tool, "Bash ")
		return !slices.Contains(writeTools, tool) && !slices.Contains([]string{"mkdir", "touch", "rm", "rmdir", "mv", "cp", "sed"}, cmd)
	}
	return false
}

// destroyer records a command of a destroying class; name is the
// command's.
func (a *analyzer) destroyer(subjects []subject, name, why string) {
	a.add(a.pol.destroyerPart(subjects, why, a.call, "Bash "+name))
}

// destroyerPart is the part of a destroying call: left to Claude Code
// where it asks, asked otherwise; a rule replaces either.
func (p *Policy) destroyerPart(subjects []subject, why string, c *Call, tool string) part {
	if modeAsks(c.Mode, tool) {
		return part{subjects: subjects, def: Prompt, defWhy: []string{why}}
	}
	return part{subjects: subjects, def: Ask, defWhy: []string{why + notAsking(c)}}
}

// notAsking says why the hook asks what the agent c would: it does not
// ask in its permission mode.
func notAsking(c *Call) string {
	mode := c.Mode
	if mode == "" {
		mode = "unknown"
	}
	return " (" + agentTitle(c.Agent) + " does not ask in permission mode " + mode + ")"
}

// agentTitle is how a human reads the name of a coding agent.
func agentTitle(agent string) string {
	if t := countersign.CodingAgents[agent]; t != "" {
		return t
	}
	return countersign.CodingAgents[countersign.AgentClaudeCode]
}

// deletingCode matches code that deletes or empties files, in the
// interpreters' usual spellings. It is compiled on first use: most calls
// never need it, and every hook start would pay for it.
var deletingCode = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`rmtree|remove_tree|os\.remove|os\.unlink|removedirs|os\.rmdir|\.unlink\(|\.rmdir\(|rmSync|rmdirSync|unlinkSync|fs\.(promises\.)?(rm|rmdir|unlink)\b|rimraf|\bunlink\b|\brm_r|FileUtils\.rm|File\.delete|\btruncate`)
})

// interpreterCode returns the program an interpreter is given on its
// command line (-c, -e, -E, -r, --eval, -p) or in a here-document, whether
// it is fixed by the text alone, and whether there is one.
func interpreterCode(c *cmdCtx) (code string, static, ok bool) {
	args := c.w[1:]
	for i, w := range args {
		switch v := w.text(); {
		case slices.Contains([]string{"-c", "-e", "-E", "-r", "--eval", "-p", "--print"}, v) && i+1 < len(args):
			return args[i+1].text(), args[i+1].static, true
		case strings.HasPrefix(v, "--eval="):
			return strings.TrimPrefix(v, "--eval="), w.static, true
		case v != "-" && !strings.HasPrefix(v, "-"):
			return "", false, false // a script file
		}
	}
	if c.in.doc != nil && readsCode(args) {
		_, static := heredoc(c.in.doc)
		return printWord(c.in.doc), static, true
	}
	return "", false, false
}

// interpreter reports whether name runs programs (python3.12 too).
func interpreter(name string) bool {
	return slices.Contains(interpreters, name) || strings.HasPrefix(name, "python") || strings.HasPrefix(name, "pypy")
}

// destroys judges the destroying classes among other commands; it
// reports whether it recorded one.
func (a *analyzer) destroys(c *cmdCtx, name string) bool {
	args := c.w[1:]
	if a.guardOperands(c, name) {
		return true
	}
	why := ""
	switch {
	case interpreter(name):
		switch code, static, ok := interpreterCode(c); {
		case ok && deletingCode().MatchString(code):
			why = name + " runs code that deletes files"
		case ok && !static:
			why = name + " runs code computed only when it runs, which may delete files"
		}
	case name == "dd":
		for _, w := range args {
			if v := w.text(); strings.HasPrefix(v, "of=") && !isDevice(strings.TrimPrefix(v, "of=")) {
				why = "dd writes over " + strings.TrimPrefix(v, "of=")
			}
		}
	case name == "shred":
		why = "shred destroys the contents of files"
	case name == "truncate":
		why = "truncate cuts files short"
	case name == "rsync":
		if slices.ContainsFunc(args, func(w word) bool {
			v := w.text()
			return strings.HasPrefix(v, "--delete") || v == "--remove-source-files"
		}) {
			why = "rsync deletes files at the destination (--delete) or the source"
		}
	case name == "chmod":
		if chmodNone(args) {
			why = "chmod -R takes every permission away from a tree"
		}
	case name == "mv":
		why = a.mvOver(c)
	}
	if why == "" {
		return false
	}
	a.destroyer(c.subjects(), name, why)
	return true
}

// guardOperands records a command that would switch countersign off by
// moving, replacing or editing in place (sed -i, perl -i) Claude Code's
// settings or the rm wrapper, and reports whether it did.
func (a *analyzer) guardOperands(c *cmdCtx, name string) bool {
	if !slices.Contains([]string{"mv", "cp", "ln", "install", "rsync", "chmod", "chown", "sed", "perl"}, name) || c.st.cwd == "" {
		return false
	}
	pt := c.part(Prompt, "left to Claude Code's permissions")
	for _, w := range c.w[1:] {
		if w.static && !isOption(w.val) {
			a.pol.guard(&pt, a.pol.guarded(absUnder(c.st.cwd, w.val), name == "mv"), a.call, "Bash "+name)
		}
	}
	if pt.floor == Allow {
		return false
	}
	a.add(pt)
	return true
}

// chmodNone reports whether chmod arguments take every permission from a
// tree: -R with 000 or a=, a-rwx and their kind.
func chmodNone(args []word) bool {
	recursive := hasFlag(args, 'R', "--recursive")
	for _, w := range args {
		v := w.text()
		if strings.HasPrefix(v, "-") && !strings.ContainsAny(v[1:], "rwxXst=") {
			continue // an option, not a mode such as -rwx
		}
		if strings.Trim(v, "0") == "" && v != "" || slices.Contains([]string{"a=", "=", "ugo=", "a-rwx", "-rwx", "ugo-rwx", "a-rwxXst"}, v) {
			return recursive
		}
	}
	return false
}

// mvOver returns why mv replaces an existing file, or "": its destination
// (or a source's name in the destination directory) exists, and neither
// -n nor a backup keeps it. A destination known only when it runs counts.
func (a *analyzer) mvOver(c *cmdCtx) string {
	ops, dir, noDir, why := mvArgs(c.w[1:])
	if why != "" || dir == "" && len(ops) < 2 {
		return why
	}
	srcs := ops
	if dir == "" {
		last := ops[len(ops)-1]
		if !last.static {
			return "mv to a destination known only when it runs: " + last.src
		}
		dir, srcs = last.val, ops[:len(ops)-1]
	}
	if c.st.cwd == "" && !filepath.IsAbs(dir) {
		return "mv to " + dir + " in a directory that cannot be known before it runs"
	}
	dest := absUnder(c.st.cwd, dir)
	if noDir || !isDir(dest) {
		if exists(dest) && len(srcs) == 1 {
			return "mv replaces the existing " + dest
		}
		return ""
	}
	for _, s := range srcs {
		if !s.static {
			return "mv of a file named only when it runs into " + dest
		}
		if t := filepath.Join(dest, filepath.Base(s.val)); exists(t) {
			return "mv replaces the existing " + t
		}
	}
	return ""
}

// mvArgs reads mv's arguments: the operands, the -t directory and -T.
// No operands come back when an option keeps existing files (-n, -b); why
// is set when the -t directory is computed only when it runs.
func mvArgs(args []word) (ops []word, dir string, noDir bool, why string) {
	end := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		v := w.text()
		switch {
		case end || !w.static || !strings.HasPrefix(v, "-") || v == "-":
			ops = append(ops, w)
		case v == "--":
			end = true
		case v == "-n" || v == "--no-clobber" || v == "--update=none" || strings.HasPrefix(v, "-b") || strings.HasPrefix(v, "--backup"):
			return nil, "", false, ""
		case v == "-t" || v == "--target-directory":
			if i++; i < len(args) {
				if !args[i].static {
					return nil, "", false, "mv into a directory known only when it runs"
				}
				dir = args[i].val
			}
		case strings.HasPrefix(v, "--target-directory="):
			dir = strings.TrimPrefix(v, "--target-directory=")
		case v == "-T" || v == "--no-target-directory":
			noDir = true
		case !strings.HasPrefix(v, "--") && strings.ContainsAny(v, "nb"):
			return nil, "", false, ""
		}
	}
	return ops, dir, noDir, ""
}

// exists reports whether anything is at p.
func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// overwrites reports whether emptying the file at p loses data: it is a
// regular file with contents, and git does not ignore it (tracked, or
// untracked, or outside any work tree: nothing else brings it back).
func (a *analyzer) overwrites(p string) bool {
	fi, err := os.Stat(p)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(a.ctx, saferm.DefaultGitTimeout)
	defer cancel()
	git, err := exec.LookPath("git")
	if err != nil {
		return true
	}
	cmd := exec.CommandContext(ctx, git, "-C", filepath.Dir(p), "-c", "core.fsmonitor=false", "check-ignore", "-q", "--", filepath.Base(p))
	cmd.Env = noGitEnv()
	return cmd.Run() != nil // 0: ignored; 1: not; 128: no work tree
}

// noGitEnv is the environment without GIT_* variables, which would point
// git at another repository.
func noGitEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}
