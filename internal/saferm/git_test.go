package saferm

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// requireGit returns the git executable, skipping the test when there is
// none — unless COUNTERSIGN_TEST_STRICT=1, where a skip would hide a gap.
func requireGit(t *testing.T) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		testutil.Missing(t, "git is not on PATH")
	}
	return git
}

// gitRun runs git in dir with a fixed identity and no user configuration.
func gitRun(t *testing.T, git, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(git, append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = append(gitEnv(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// gitReasonsOf returns the reasons of an assessment that are about git.
func gitReasonsOf(res *Assessment) []string {
	var out []string
	for _, r := range res.Reasons {
		if strings.Contains(r, "git") {
			out = append(out, r)
		}
	}
	return out
}

func TestAssessGitWorkTrees(t *testing.T) {
	git := requireGit(t)
	w := newWorld(t)
	projects := filepath.Join(w.cwd, "projects")
	repo := filepath.Join(projects, "repo")
	writeFile(t, filepath.Join(repo, "tracked.txt"), "v1")
	writeFile(t, filepath.Join(repo, "clean", "kept.txt"), "v1")
	writeFile(t, filepath.Join(repo, ".gitignore"), "build/\n")
	gitRun(t, git, repo, "init", "-q")
	gitRun(t, git, repo, "add", ".")
	gitRun(t, git, repo, "commit", "-q", "-m", "init")
	writeFile(t, filepath.Join(repo, "build", "out.o"), "ignored")
	cleanRepo := filepath.Join(projects, "cleanrepo")
	writeFile(t, filepath.Join(cleanRepo, "a.txt"), "a")
	gitRun(t, git, cleanRepo, "init", "-q")
	gitRun(t, git, cleanRepo, "add", ".")
	gitRun(t, git, cleanRepo, "commit", "-q", "-m", "init")

	a := w.assessor()
	a.Git = git
	assess := func(args ...string) []string {
		return gitReasonsOf(a.Assess(context.Background(), args))
	}
	dirty := func(n int) []string {
		return []string{fmt.Sprintf("uncommitted changes in git work tree %s (%d %s)", repo, n, plural(n, "path", "paths"))}
	}
	if got := assess("-r", repo); got != nil {
		t.Errorf("clean work tree: git reasons %q, want none", got)
	}
	writeFile(t, filepath.Join(repo, "tracked.txt"), "v2")
	writeFile(t, filepath.Join(repo, "new", "untracked.txt"), "x")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"the work tree itself", []string{"-r", repo}, dirty(2)},
		{"containing the work tree", []string{"-r", projects}, dirty(2)},
		{"a changed file inside", []string{filepath.Join(repo, "tracked.txt")}, dirty(1)},
		{"an untracked directory inside", []string{"-r", filepath.Join(repo, "new")}, dirty(1)},
		{"a committed directory inside", []string{"-r", filepath.Join(repo, "clean")}, nil},
		{"an ignored directory inside", []string{"-r", filepath.Join(repo, "build")}, nil},
		{"another, clean work tree", []string{"-r", cleanRepo}, nil},
		{"the repository data", []string{"-rf", filepath.Join(repo, ".git")}, []string{"git repository data (.git): " + filepath.Join(repo, ".git")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := assess(tt.args...); !slices.Equal(got, tt.want) {
				t.Errorf("git reasons = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAssessGitMissing(t *testing.T) {
	// Without git the check cannot run: the work tree itself is the reason.
	w := newWorld(t)
	repo := filepath.Join(w.cwd, "repo")
	mkdir(t, filepath.Join(repo, ".git"))
	writeFile(t, filepath.Join(repo, "f.txt"), "x")
	a := w.assessor()
	a.Git = filepath.Join(w.root, "no-such-git")
	for _, args := range [][]string{{"-r", "repo"}, {"repo/f.txt"}, {"-r", w.cwd + "/repo/"}} {
		res := a.Assess(context.Background(), args)
		want := []string{"git work tree (could not check for uncommitted changes): " + repo}
		if got := gitReasonsOf(res); !slices.Equal(got, want) {
			t.Errorf("Assess(%q) git reasons = %q, want %q", args, got, want)
		}
		if !res.NeedsApproval {
			t.Errorf("Assess(%q) does not ask", args)
		}
	}
}

func TestAssessGitSkippedWhenExempt(t *testing.T) {
	w := newWorld(t)
	repo := filepath.Join(w.cwd, "build-1")
	mkdir(t, filepath.Join(repo, ".git"))
	a := w.assessor()
	a.Git = filepath.Join(w.root, "no-such-git")
	a.SafePatterns = []string{filepath.Join(w.cwd, "build-*")}
	res := a.Assess(context.Background(), []string{"-rf", "build-1"})
	if !res.Exempt || res.NeedsApproval || gitReasonsOf(res) != nil {
		t.Errorf("exempt target: %+v", res)
	}
}
