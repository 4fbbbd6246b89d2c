package saferm

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestAssessRecoverable checks that -r and -f are reasons only for what
// nothing could bring back: files git ignores or holds committed and
// unchanged are not, unless Strict (the seed's rule).
func TestAssessRecoverable(t *testing.T) {
	git := requireGit(t)
	w := newWorld(t)
	repo := filepath.Join(w.cwd, "repo")
	writeFile(t, filepath.Join(repo, ".gitignore"), "*.log\nbuild/\n")
	writeFile(t, filepath.Join(repo, "src", "main.go"), "package main\n")
	writeFile(t, filepath.Join(repo, "notes.txt"), "v1")
	gitRun(t, git, repo, "init", "-q")
	gitRun(t, git, repo, "add", ".")
	gitRun(t, git, repo, "commit", "-q", "-m", "init")
	writeFile(t, filepath.Join(repo, "app.log"), "log")
	for _, f := range []string{"x.o", "y.o", "z.o"} {
		writeFile(t, filepath.Join(repo, "build", f), "obj")
	}
	writeFile(t, filepath.Join(repo, "new.txt"), "untracked")
	writeFile(t, filepath.Join(w.cwd, "outside.txt"), "no git")
	for _, other := range []string{"other", "parent/inner"} {
		dir := filepath.Join(w.cwd, other)
		writeFile(t, filepath.Join(dir, "f.txt"), "committed")
		gitRun(t, git, dir, "init", "-q")
		gitRun(t, git, dir, "add", ".")
		gitRun(t, git, dir, "commit", "-q", "-m", "init")
	}

	a := w.assessor()
	a.Git, a.Cwd = git, repo
	recursive, forced := "recursive deletion (-r/-R)", "forced deletion (-f)"
	tests := []struct {
		args []string
		want []string // nil: no question
	}{
		{[]string{"-f", "app.log"}, nil},
		{[]string{"-r", "build"}, nil},
		{[]string{"-rf", "src"}, nil},
		{[]string{"-f", "app.log", "build/x.o", "notes.txt"}, nil},
		{[]string{"-f", "new.txt"}, []string{forced, "uncommitted changes in git work tree " + repo + " (1 path)"}},
		{[]string{"-f", "../outside.txt"}, []string{forced}},
		{[]string{"-rf", "app.log", "../outside.txt"}, []string{recursive, forced}},
		{[]string{"-rf", "../other"}, []string{recursive, forced}}, // a whole repository, history and all
		{[]string{"-r", "../parent"}, []string{recursive}},         // one inside
	}
	for _, strict := range []bool{false, true} {
		a.Strict = strict
		for _, tt := range tests {
			res := a.Assess(context.Background(), tt.args)
			want := tt.want
			if strict && want == nil {
				for _, arg := range tt.args {
					if arg == "-r" || arg == "-rf" {
						want = append(want, recursive)
					}
					if arg == "-f" || arg == "-rf" {
						want = append(want, forced)
					}
				}
			}
			if !slices.Equal(res.Reasons, want) || res.NeedsApproval != (want != nil) {
				t.Errorf("strict %v, rm %q: reasons %q (asks %v), want %q", strict, tt.args, res.Reasons, res.NeedsApproval, want)
			}
		}
	}
	// A change to a committed file makes it a reason again.
	a.Strict = false
	writeFile(t, filepath.Join(repo, "notes.txt"), "v2")
	if res := a.Assess(context.Background(), []string{"-f", "notes.txt"}); !slices.Contains(res.Reasons, forced) {
		t.Errorf("changed file: reasons %q", res.Reasons)
	}
}

// TestAssessFreshTemp checks that a directory the command line made in the
// temporary directory is not a reason, and one made before it started is.
func TestAssessFreshTemp(t *testing.T) {
	before := time.Now().Add(-time.Second)
	tmp := t.TempDir() // in os.TempDir
	t.Setenv("TMPDIR", filepath.Dir(tmp))
	d, err := os.MkdirTemp(filepath.Dir(tmp), "line-*")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(d)
	writeFile(t, filepath.Join(d, "sub", "f"), "x")
	mkdir(t, filepath.Join(d, "clone", ".git")) // the line's own clone
	if _, _, ok := birth(d); !ok {
		t.Skip("this file system does not record birth times")
	}
	w := newWorld(t)
	a := w.assessor()
	for _, tt := range []struct {
		name   string
		start  time.Time
		strict bool
		asks   bool
	}{
		{"made by the line", before, false, false},
		{"made before the line", time.Now().Add(time.Second), false, true},
		{"line unknown", time.Time{}, false, true},
		{"strict", before, true, true},
	} {
		a.LineStart, a.Strict = tt.start, tt.strict
		if res := a.Assess(context.Background(), []string{"-rf", d}); res.NeedsApproval != tt.asks {
			t.Errorf("%s: asks %v (%q), want %v", tt.name, res.NeedsApproval, res.Reasons, tt.asks)
		}
	}
	// Only a directory directly in the temporary directory counts.
	a.LineStart, a.Strict = before, false
	if res := a.Assess(context.Background(), []string{"-rf", filepath.Join(d, "sub")}); !res.NeedsApproval {
		t.Errorf("a directory inside it: %q", res.Reasons)
	}
}

// TestConfigStrict reads [rm] strict into the assessor; it is off by
// default.
func TestConfigStrict(t *testing.T) {
	c := newConfigWorld(t)
	cfg, err := c.load(Invocation{}, nil)
	if err != nil || cfg.Strict || cfg.Assessor("/tmp").Strict {
		t.Fatalf("default: strict %v, %v", cfg != nil && cfg.Strict, err)
	}
	writeFile(t, c.userConfig(), "[rm]\nstrict = true\n")
	if cfg, err = c.load(Invocation{}, nil); err != nil || !cfg.Assessor("/tmp").Strict {
		t.Errorf("strict = true: %+v, %v", cfg, err)
	}
	writeFile(t, c.userConfig(), "[rm]\nstrict = \"yes\"\n")
	if _, err = c.load(Invocation{}, nil); err == nil {
		t.Error(`strict = "yes" was accepted`)
	}
}

// TestParentStart reads when the parent process started: before now, and
// not long before the test binary itself (its parent, go test, started it).
func TestParentStart(t *testing.T) {
	got := ParentStart()
	if got.IsZero() {
		t.Skip("no /proc")
	}
	if now := time.Now(); got.After(now) || got.Before(now.Add(-24*time.Hour)) {
		t.Errorf("ParentStart() = %v, now %v", got, now)
	}
}
