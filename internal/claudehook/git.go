package claudehook

import (
	"slices"
	"strings"
)

// git judges git: read-only subcommands are allowed; git clean (unless a
// dry run) deletes untracked files, which no commit holds, so it is asked
// like a risky rm and no rule loosens that; git push --force and git reset
// --hard are asked by default.
func (a *analyzer) git(c *cmdCtx) {
	args := c.w[1:]
	i := 0
	for i < len(args) && args[i].static && isOption(args[i].val) {
		v := args[i].val
		name, _, has := strings.Cut(v, "=")
		if v == "-C" || v == "-c" || (!has && slices.Contains([]string{"--git-dir", "--work-tree", "--namespace", "--config-env", "--super-prefix"}, name)) {
			i++
		}
		i++
	}
	if i >= len(args) || !args[i].static {
		a.add(c.part(Prompt, "left to Claude Code's permissions"))
		return
	}
	sub, rest := args[i].val, args[i+1:]
	switch {
	case sub == "clean":
		p := c.part(Allow, "git clean -n only lists")
		if !hasFlag(rest, 'n', "--dry-run") {
			why := "git clean deletes untracked files, which git cannot bring back"
			if hasFlag(rest, 'x', "") {
				why += "; with -x also the ignored ones (build output, .env files)"
			}
			p.raise(Ask, why)
		}
		a.add(p)
	case sub == "push" && pushForce(rest):
		a.add(c.part(Ask, "git push --force replaces the history of the remote branch"))
	case sub == "push" && pushDelete(rest):
		a.add(c.part(Ask, "git push deletes a remote branch or tag"))
	case sub == "reset" && hasFlag(rest, 0, "--hard"):
		a.add(c.part(Ask, "git reset --hard throws away uncommitted changes"))
	case gitDestroys(sub, rest, c.st.cwd) != "":
		a.destroyer(c.subjects(), "git", gitDestroys(sub, rest, c.st.cwd))
	case gitReadOnly(sub, rest):
		a.add(c.part(Allow, "reads only"))
	default:
		a.add(c.part(Prompt, "left to Claude Code's permissions"))
	}
}

// hasFlag reports whether the arguments hold the short option (also in a
// cluster) or the long one.
func hasFlag(args []word, short byte, long string) bool {
	for _, w := range args {
		v := w.text()
		switch {
		case long != "" && (v == long || strings.HasPrefix(v, long+"=")):
			return true
		case short != 0 && len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.IndexByte(v[1:], short) >= 0:
			return true
		}
	}
	return false
}

// pushForce reports whether git push arguments force: -f, --force,
// --force-with-lease, --mirror, or a +refspec.
func pushForce(args []word) bool {
	if hasFlag(args, 'f', "--force") || hasFlag(args, 0, "--force-with-lease") || hasFlag(args, 0, "--mirror") {
		return true
	}
	for _, w := range args {
		if v := w.text(); strings.HasPrefix(v, "+") && len(v) > 1 {
			return true
		}
	}
	return false
}

// pushDelete reports whether git push arguments delete remote refs:
// --delete, -d, --prune, or a :refspec.
func pushDelete(args []word) bool {
	if hasFlag(args, 'd', "--delete") || hasFlag(args, 0, "--prune") {
		return true
	}
	for _, w := range args {
		if v := w.text(); strings.HasPrefix(v, ":") && len(v) > 1 {
			return true
		}
	}
	return false
}

// gitReadOnly reports whether a git subcommand with these arguments only
// reads.
func gitReadOnly(sub string, rest []word) bool {
	if hasFlag(rest, 0, "--output") {
		return false // git diff --output=FILE writes
	}
	switch sub {
	case "status", "diff", "log", "show", "blame", "rev-parse", "ls-files", "ls-tree", "grep",
		"describe", "shortlog", "cat-file", "rev-list", "show-ref", "whatchanged", "merge-base":
		return true
	case "branch", "tag", "remote", "stash", "config":
		return gitListing(sub, rest)
	}
	return false
}

// gitListing reports whether branch, tag, remote, stash or config only
// list with these arguments.
func gitListing(sub string, rest []word) bool {
	allowed := map[string][]string{
		"branch": {"-a", "-r", "-v", "-vv", "-l", "--list", "--all", "--remotes", "--verbose", "--show-current", "--no-color"},
		"tag":    {"-l", "--list", "-n"},
		"remote": {"-v", "--verbose", "show", "get-url"},
		"stash":  {"list", "show"},
		"config": {"--get", "--get-all", "--get-regexp", "--list", "-l", "--show-origin"},
	}[sub]
	if sub == "stash" && len(rest) == 0 {
		return false // git stash alone stashes the changes away
	}
	for i, w := range rest {
		v := w.text()
		if slices.Contains(allowed, v) {
			continue
		}
		// After a listing subcommand or option, the rest names what to list.
		if i > 0 && slices.Contains(allowed, rest[i-1].text()) && sub != "branch" {
			continue
		}
		return false
	}
	return true
}

// gitDestroys returns why a git subcommand throws work away that no
// commit holds, or "": checkout or restore of paths (their uncommitted
// changes), a forced checkout or switch, git stash drop and clear, and git
// branch -D (a branch that may be merged nowhere).
func gitDestroys(sub string, rest []word, cwd string) string {
	switch sub {
	case "checkout":
		if hasFlag(rest, 'f', "--force") || checkoutPaths(rest, cwd) {
			return "git checkout of paths throws away their uncommitted changes"
		}
	case "switch":
		if hasFlag(rest, 'f', "--force") || hasFlag(rest, 0, "--discard-changes") {
			return "git switch --discard-changes throws away uncommitted changes"
		}
	case "restore":
		if !hasFlag(rest, 'S', "--staged") || hasFlag(rest, 'W', "--worktree") {
			return "git restore throws away uncommitted changes"
		}
	case "stash":
		if len(rest) > 0 && (rest[0].text() == "drop" || rest[0].text() == "clear") {
			return "git stash " + rest[0].text() + " deletes stashed changes"
		}
	case "branch":
		if hasFlag(rest, 'D', "") || (hasFlag(rest, 'd', "--delete") && hasFlag(rest, 'f', "--force")) {
			return "git branch -D deletes a branch, merged or not"
		}
	}
	return ""
}

// checkoutPaths reports whether git checkout is given paths: after --, a
// ".", or a word naming a file or directory that exists where it runs.
func checkoutPaths(rest []word, cwd string) bool {
	for i, w := range rest {
		v := w.text()
		switch {
		case v == "--":
			return i+1 < len(rest)
		case v == "." || strings.HasSuffix(v, "/.") || v == ":/":
			return true
		case !strings.HasPrefix(v, "-") && w.static && cwd != "" && exists(absUnder(cwd, v)):
			return true
		}
	}
	return false
}
