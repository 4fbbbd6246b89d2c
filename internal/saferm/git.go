package saferm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// DefaultGitTimeout bounds each `git status`: a slow repository must not
// hold rm for long, and a timeout counts as "could not check".
const DefaultGitTimeout = 3 * time.Second

// maxGitChecks bounds how many work trees one assessment runs git in.
const maxGitChecks = 16

// gitCheck is one work tree to ask about: the whole tree when a target is
// or contains it, else only the pathspecs of the targets inside it.
type gitCheck struct {
	whole bool
	specs []string
}

// gitWork collects, per work tree root, what to check.
type gitWork map[string]*gitCheck

// add records that the targets delete the whole tree at root (whole) or
// the path rel inside it.
func (w gitWork) add(root, rel string, whole bool) {
	c := w[root]
	if c == nil {
		c = &gitCheck{}
		w[root] = c
	}
	if whole {
		c.whole = true
	} else {
		c.specs = append(c.specs, rel)
	}
}

// findWorkTree returns the nearest directory at or above p that holds a
// .git entry, or "". cache remembers directories already looked at.
func findWorkTree(p string, cache map[string]bool) string {
	for d := p; ; d = filepath.Dir(d) {
		has, ok := cache[d]
		if !ok {
			_, err := os.Lstat(filepath.Join(d, ".git"))
			has = err == nil
			cache[d] = has
		}
		if has {
			return d
		}
		if d == "/" || d == "." {
			return ""
		}
	}
}

// inGitDir reports whether p is a .git entry or lies inside one.
func inGitDir(p string) bool {
	return slices.Contains(strings.Split(p, string(filepath.Separator)), ".git")
}

// gitReasons runs git status in each work tree the deletion touches and
// returns the risk reasons: uncommitted changes, or that they could not be
// checked (git missing, failing or slow — fail towards asking).
func (a *Assessor) gitReasons(ctx context.Context, w gitWork) []string {
	roots := make([]string, 0, len(w))
	for r := range w {
		roots = append(roots, r)
	}
	slices.Sort(roots)
	var reasons []string
	for i, root := range roots {
		if i == maxGitChecks {
			reasons = append(reasons, fmt.Sprintf("git work trees (could not check for uncommitted changes): %d more not checked", len(roots)-i))
			break
		}
		n, err := a.gitStatus(ctx, root, w[root])
		switch {
		case err != nil:
			reasons = append(reasons, "git work tree (could not check for uncommitted changes): "+displayPath(root))
		case n > 0:
			reasons = append(reasons, fmt.Sprintf("uncommitted changes in git work tree %s (%d %s)", displayPath(root), n, plural(n, "path", "paths")))
		}
	}
	return reasons
}

// gitStatus counts the uncommitted changes `git status --porcelain` lists
// for c in the work tree at root. Ignored files do not count.
func (a *Assessor) gitStatus(ctx context.Context, root string, c *gitCheck) (int, error) {
	git := a.Git
	if git == "" {
		var err error
		if git, err = exec.LookPath("git"); err != nil {
			return 0, err
		}
	}
	timeout := a.GitTimeout
	if timeout <= 0 {
		timeout = DefaultGitTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// core.fsmonitor=false: never start a monitor daemon from rm.
	// --literal-pathspecs: file names are names, not patterns.
	args := []string{"-C", root, "-c", "core.fsmonitor=false", "--literal-pathspecs", "status", "--porcelain"}
	if !c.whole {
		args = append(append(args, "--"), c.specs...)
	}
	cmd := exec.CommandContext(ctx, git, args...)
	cmd.Env = gitEnv()
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return 0, err
	}
	return bytes.Count(out, []byte{'\n'}), nil
}

// gitEnv is the environment without GIT_* variables — rm run from a git
// hook inherits GIT_DIR, which would point git at another repository — and
// with GIT_OPTIONAL_LOCKS=0 so that status does not write the index.
func gitEnv() []string {
	env := []string{"GIT_OPTIONAL_LOCKS=0"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return env
}
