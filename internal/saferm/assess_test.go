package saferm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// world is a temporary file system layout: a home directory, a working
// directory inside it, and room for other trees.
type world struct {
	root, home, cwd string
}

// newWorld builds root/home/u/work with real directories; root is resolved
// so that expected paths compare equal to resolved targets.
func newWorld(t *testing.T) world {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := world{root: root, home: filepath.Join(root, "home", "u")}
	w.cwd = filepath.Join(w.home, "work")
	mkdir(t, w.cwd)
	return w
}

// assessor returns an assessor for the world with no protected paths beyond
// those given.
func (w world) assessor(protected ...string) *Assessor {
	return &Assessor{
		Cwd: w.cwd, Home: w.home, Protected: protected,
		FileThreshold: 100, BytesThreshold: 100 << 20, Git: "/nonexistent/git",
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	mkdir(t, filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// makeTree creates dirs directories of files one-byte files each under
// root, one goroutine per directory: creating inodes is slow on some disks
// and the directories are independent.
func makeTree(tb testing.TB, root string, dirs, files int) {
	tb.Helper()
	sem := make(chan struct{}, 16)
	errs := make(chan error, dirs)
	for d := range dirs {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- makeDir(filepath.Join(root, fmt.Sprintf("d%03d", d)), files)
		}()
	}
	for range dirs {
		if err := <-errs; err != nil {
			tb.Fatal(err)
		}
	}
}

// makeDir creates one directory of files.
func makeDir(dir string, files int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for f := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", f)), []byte("x"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func TestAssessHardBlocks(t *testing.T) {
	w := newWorld(t)
	mkdir(t, filepath.Join(w.cwd, "a"))
	mkdir(t, filepath.Join(w.root, "elsewhere", "x"))
	symlink(t, "/", filepath.Join(w.cwd, "rootlink"))
	symlink(t, w.home, filepath.Join(w.cwd, "homelink"))
	symlink(t, filepath.Join(w.root, "elsewhere", "x"), filepath.Join(w.cwd, "far"))
	writeFile(t, filepath.Join(w.cwd, "ok.txt"), "x")
	tests := []struct {
		name string
		args []string
		want string // in BlockReason
	}{
		{"root", []string{"-rf", "/"}, "hard-blocked"},
		{"double slash", []string{"-rf", "//"}, "hard-blocked"},
		{"root through /./", []string{"-rf", "/./"}, "last component is ."},
		{"root through /tmp/..", []string{"-rf", "/tmp/.."}, "last component is .."},
		{"tilde", []string{"-rf", "~"}, "hard-blocked"},
		{"tilde slash", []string{"-rf", "~/"}, "hard-blocked"},
		{"dot", []string{"-rf", "."}, "hard-blocked"},
		{"dot slash", []string{"-rf", "./"}, "hard-blocked"},
		{"dotdot", []string{"-rf", ".."}, "hard-blocked"},
		{"literal $HOME", []string{"-rf", "$HOME"}, "hard-blocked"},
		{"literal ${HOME}", []string{"-rf", "${HOME}/"}, "hard-blocked"},
		{"a/.. is the working directory", []string{"-rf", "a/.."}, "last component is .."},
		{"far/.. leaves through a symlink", []string{"-rf", "far/.."}, "last component is .."},
		{"the working directory by path", []string{"-rf", w.cwd}, "is the working directory"},
		{"the working directory by ../work", []string{"-rf", "../work"}, "is the working directory"},
		{"the working directory through a/../", []string{"-r", "a/../../work"}, "is the working directory"},
		{"the home directory", []string{"-rf", w.home}, "is the home directory"},
		{"a parent of home", []string{"-rf", filepath.Join(w.root, "home")}, "contains the home directory"},
		{"a symlink to /", []string{"-rf", "rootlink"}, "resolves to /"},
		{"a symlink to / with slash", []string{"-rf", "rootlink/"}, "resolves to /"},
		{"a symlink to home", []string{"homelink"}, "is the home directory"},
		{"a glob matching the working directory", []string{"-rf", w.home + "/wor*"}, "is the working directory"},
		{"blocked among harmless targets", []string{"ok.txt", "/", "a"}, "hard-blocked"},
		{"after --", []string{"-rf", "--", "/"}, "hard-blocked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := w.assessor().Assess(context.Background(), tt.args)
			if !res.Blocked || res.Verdict() != VerdictBlock {
				t.Fatalf("Assess(%q) not blocked: %+v", tt.args, res)
			}
			if !strings.Contains(res.BlockReason, tt.want) {
				t.Errorf("BlockReason = %q, want it to contain %q", res.BlockReason, tt.want)
			}
			if res.NeedsApproval {
				t.Error("a blocked command must not ask")
			}
		})
	}
}

func TestAssessResolvesTargets(t *testing.T) {
	w := newWorld(t)
	other := filepath.Join(w.root, "other")
	writeFile(t, filepath.Join(other, "f.txt"), "x")
	symlink(t, other, filepath.Join(w.cwd, "ln"))
	symlink(t, other, filepath.Join(w.cwd, "dirlink"))
	writeFile(t, filepath.Join(w.cwd, "b.txt"), "x")
	writeFile(t, filepath.Join(w.cwd, "c.txt"), "x")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"relative", []string{"b.txt"}, []string{filepath.Join(w.cwd, "b.txt")}},
		{"parent symlink resolved", []string{"ln/f.txt"}, []string{filepath.Join(other, "f.txt")}},
		{"final symlink kept", []string{"dirlink"}, []string{filepath.Join(w.cwd, "dirlink")}},
		{"final symlink with slash followed", []string{"-r", "dirlink/"}, []string{other}},
		{"unexpanded glob expanded", []string{"*.txt"}, []string{filepath.Join(w.cwd, "b.txt"), filepath.Join(w.cwd, "c.txt")}},
		{"glob matching nothing kept literally", []string{"-f", "*.nothing"}, []string{filepath.Join(w.cwd, "*.nothing")}},
		{"duplicates once", []string{"b.txt", "./b.txt", "*.txt"}, []string{filepath.Join(w.cwd, "b.txt"), filepath.Join(w.cwd, "c.txt")}},
		{"dash file after --", []string{"--", "-x"}, []string{filepath.Join(w.cwd, "-x")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := w.assessor().Assess(context.Background(), tt.args)
			if res.Blocked {
				t.Fatalf("blocked: %s", res.BlockReason)
			}
			if !reflect.DeepEqual(res.Targets, tt.want) {
				t.Errorf("Targets = %q, want %q", res.Targets, tt.want)
			}
		})
	}
}

func TestAssessMissingTargets(t *testing.T) {
	w := newWorld(t)
	writeFile(t, filepath.Join(w.cwd, "here.txt"), "x")
	tests := []struct {
		args    []string
		reasons []string
		missing int
	}{
		{[]string{"-f", "gone.txt"}, nil, 1},
		{[]string{"-rf", "gone"}, nil, 1},
		{[]string{"here.txt"}, nil, 0},
		{[]string{"-f", "here.txt", "gone.txt"}, []string{"forced deletion (-f)"}, 1},
		{[]string{"-r", "here.txt"}, []string{"recursive deletion (-r/-R)"}, 0},
	}
	for _, tt := range tests {
		res := w.assessor().Assess(context.Background(), tt.args)
		if !slices.Equal(res.Reasons, tt.reasons) || len(res.Missing) != tt.missing {
			t.Errorf("Assess(%q): reasons %q missing %q; want reasons %q and %d missing", tt.args, res.Reasons, res.Missing, tt.reasons, tt.missing)
		}
		if res.NeedsApproval != (len(tt.reasons) > 0) {
			t.Errorf("Assess(%q).NeedsApproval = %t", tt.args, res.NeedsApproval)
		}
	}
}

func TestAssessProtected(t *testing.T) {
	w := newWorld(t)
	srv := filepath.Join(w.root, "srv")
	www := filepath.Join(srv, "www")
	writeFile(t, filepath.Join(www, "site", "index.html"), "x")
	writeFile(t, filepath.Join(srv, "notes.txt"), "x")
	symlink(t, www, filepath.Join(w.cwd, "site"))
	tests := []struct {
		name string
		args []string
		want string // the protection reason, "" for none
	}{
		{"the protected path", []string{"-r", www}, "protected path: " + www},
		{"inside it", []string{filepath.Join(www, "site", "index.html")}, "protected path: " + www},
		{"containing it", []string{"-r", srv}, fmt.Sprintf("protected path: %s (inside %s)", www, srv)},
		{"through a symlinked parent", []string{"site/site/index.html"}, "protected path: " + www},
		{"a missing file inside it", []string{"-f", filepath.Join(www, "nope")}, "protected path: " + www},
		{"a sibling", []string{filepath.Join(srv, "notes.txt")}, ""},
		{"the symlink itself", []string{"site"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := w.assessor(www).Assess(context.Background(), tt.args)
			got := ""
			for _, r := range res.Reasons {
				if strings.HasPrefix(r, "protected path") {
					got = r
				}
			}
			if got != tt.want {
				t.Errorf("protection reason = %q, want %q (all: %q)", got, tt.want, res.Reasons)
			}
			if tt.want != "" && !res.NeedsApproval {
				t.Error("a protected path must ask")
			}
			if res.Protected != (tt.want != "") {
				t.Errorf("Protected = %v, want %v", res.Protected, tt.want != "")
			}
		})
	}
}

func TestAssessSafePatterns(t *testing.T) {
	w := newWorld(t)
	build := filepath.Join(w.root, "tmp")
	for _, d := range []string{"build-1", "build-2", "keep"} {
		writeFile(t, filepath.Join(build, d, "out.o"), "x")
	}
	prot := filepath.Join(w.root, "etc")
	writeFile(t, filepath.Join(prot, "passwd"), "x")
	symlink(t, prot, filepath.Join(build, "build-evil"))
	safe := []string{filepath.Join(build, "build-*")}
	tests := []struct {
		name   string
		args   []string
		exempt bool
	}{
		{"every target matches", []string{"-rf", build + "/build-1", build + "/build-2"}, true},
		{"inside a matching directory", []string{"-rf", build + "/build-1/out.o"}, true},
		{"the glob itself", []string{"-rf", build + "/build-[12]"}, true},
		{"one target does not match", []string{"-rf", build + "/build-1", build + "/keep"}, false},
		{"a symlink smuggling a protected path", []string{"-f", build + "/build-evil/passwd"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := w.assessor(prot)
			a.SafePatterns = safe
			res := a.Assess(context.Background(), tt.args)
			if res.Exempt != tt.exempt || res.NeedsApproval == tt.exempt {
				t.Errorf("Exempt = %t NeedsApproval = %t, want exempt %t (reasons %q)", res.Exempt, res.NeedsApproval, tt.exempt, res.Reasons)
			}
		})
	}
	// A safe pattern never lifts a hard block.
	a := w.assessor()
	a.SafePatterns = []string{"/*", "/"}
	if res := a.Assess(context.Background(), []string{"-rf", "/"}); !res.Blocked {
		t.Error("safe pattern lifted the block of /")
	}
}

func TestAssessCountCapped(t *testing.T) {
	w := newWorld(t)
	big := filepath.Join(w.cwd, "big")
	makeTree(t, big, 11, 100)
	small := filepath.Join(w.cwd, "small")
	makeTree(t, small, 1, 47)
	tests := []struct {
		name      string
		args      []string
		threshold int
		count     int
		capped    bool
		reason    string
	}{
		{"1100 files stop at 1000", []string{"-r", "big"}, 100, 1000, true, "large deletion: at least 1000 files (threshold 100)"},
		{"capped counts as over any threshold", []string{"-r", "big"}, 5000, 1000, true, "large deletion: at least 1000 files (threshold 5000)"},
		{"47 files under the threshold", []string{"-r", "small"}, 100, 47, false, ""},
		{"47 files over a threshold of 10", []string{"-r", "small"}, 10, 47, false, "large deletion: 47 files (threshold 10)"},
		{"without -r a directory is not walked", []string{"small"}, 10, 0, false, ""},
		{"the cap spans targets", []string{"-r", "small", "big"}, 100, 1000, true, "large deletion: at least 1000 files (threshold 100)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := w.assessor()
			a.FileThreshold = tt.threshold
			res := a.Assess(context.Background(), tt.args)
			if res.FileCount != tt.count || res.FileCountCapped != tt.capped {
				t.Errorf("FileCount = %d capped %t, want %d capped %t", res.FileCount, res.FileCountCapped, tt.count, tt.capped)
			}
			got := ""
			for _, r := range res.Reasons {
				if strings.HasPrefix(r, "large deletion") {
					got = r
				}
			}
			if got != tt.reason {
				t.Errorf("reason = %q, want %q", got, tt.reason)
			}
		})
	}
}

func TestAssessEmptyDirectoriesAreBounded(t *testing.T) {
	// The tally also stops after ten times the cap of entries of any kind,
	// so that a tree of empty directories cannot make it walk forever.
	w := newWorld(t)
	deep := filepath.Join(w.cwd, "deep")
	for i := range 120 {
		mkdir(t, filepath.Join(deep, fmt.Sprintf("%d", i%10), fmt.Sprintf("%d", i)))
	}
	a := w.assessor()
	a.FileCap = 10
	res := a.Assess(context.Background(), []string{"-r", "deep"})
	if res.FileCount != 0 || !res.FileCountCapped {
		t.Errorf("FileCount = %d capped %t, want 0 and capped", res.FileCount, res.FileCountCapped)
	}
	a.FileCap = 1000
	if res := a.Assess(context.Background(), []string{"-r", "deep"}); res.FileCountCapped {
		t.Error("130 directories capped a tally of 1000")
	}
}

func TestAssessBytes(t *testing.T) {
	w := newWorld(t)
	mkdir(t, filepath.Join(w.cwd, "d"))
	for i := range 3 {
		f, err := os.Create(filepath.Join(w.cwd, "d", fmt.Sprintf("blob%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(1 << 20); err != nil { // sparse: the size without the disk
			t.Fatal(err)
		}
		f.Close()
	}
	tests := []struct {
		args      []string
		threshold int64
		bytes     int64
		reason    bool
	}{
		{[]string{"-r", "d"}, 2 << 20, 3 << 20, true},
		{[]string{"-r", "d"}, 4 << 20, 3 << 20, false},
		{[]string{"d/blob0"}, 512 << 10, 1 << 20, true}, // large files ask without -r too
		{[]string{"d/blob0"}, 2 << 20, 1 << 20, false},
	}
	for _, tt := range tests {
		a := w.assessor()
		a.BytesThreshold = tt.threshold
		res := a.Assess(context.Background(), tt.args)
		if res.Bytes != tt.bytes {
			t.Errorf("Assess(%q).Bytes = %d, want %d", tt.args, res.Bytes, tt.bytes)
		}
		want := ""
		if tt.reason {
			want = fmt.Sprintf("large deletion: %s (threshold %s)", FormatBytes(tt.bytes), FormatBytes(tt.threshold))
		}
		got := ""
		for _, r := range res.Reasons {
			if strings.HasPrefix(r, "large deletion") {
				got = r
			}
		}
		if got != want {
			t.Errorf("Assess(%q) reason = %q, want %q", tt.args, got, want)
		}
	}
}

func TestAssessNoOperands(t *testing.T) {
	w := newWorld(t)
	res := w.assessor().Assess(context.Background(), []string{"-rf"})
	if res.Blocked || res.NeedsApproval || len(res.Targets) != 0 || res.Verdict() != VerdictPass {
		t.Errorf("Assess(-rf) = %+v, want a pass with no targets", res)
	}
}

func TestAssessOddNames(t *testing.T) {
	w := newWorld(t)
	// A working directory whose name looks like a pattern.
	weird := filepath.Join(w.cwd, "we[ir]d")
	writeFile(t, filepath.Join(weird, "a.txt"), "x")
	writeFile(t, filepath.Join(weird, "b.txt"), "x")
	a := w.assessor()
	a.Cwd = weird
	res := a.Assess(context.Background(), []string{"*.txt"})
	if want := []string{filepath.Join(weird, "a.txt"), filepath.Join(weird, "b.txt")}; !slices.Equal(res.Targets, want) {
		t.Errorf("glob in a bracketed directory: Targets = %q, want %q", res.Targets, want)
	}

	// An empty name deletes nothing; it is not the working directory.
	if res := w.assessor().Assess(context.Background(), []string{"-f", ""}); res.Blocked || len(res.Targets) != 0 {
		t.Errorf("rm -f '': %+v", res)
	}

	// A newline in a path cannot forge a line of the reasons.
	odd := filepath.Join(w.root, "odd\nprotected path: none")
	mkdir(t, odd)
	res = w.assessor(odd).Assess(context.Background(), []string{"-r", odd})
	want := "protected path: " + ShellQuote(odd)
	if !slices.Contains(res.Reasons, want) || strings.Contains(strings.Join(res.Reasons, ""), "\n") {
		t.Errorf("Reasons = %q, want %q and no raw newline", res.Reasons, want)
	}
}
