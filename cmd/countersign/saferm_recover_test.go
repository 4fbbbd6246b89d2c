package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// TestSafeRmRecoverable: in a guarded session, -r and -f alone are no
// reason to ask when what goes can be had back — a git-ignored log file,
// an ignored build directory — or is a temporary directory made by the
// same command line; the files are deleted at once without a request.
// With [rm] strict = true (the seed's rule) each of them asks.
func TestSafeRmRecoverable(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		testutil.Missing(t, "git is not on PATH")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		testutil.Missing(t, "sh is not on PATH")
	}
	w := srNewWorld(t)
	tmp := filepath.Join(filepath.Dir(w.dir), "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	env := w.env(true, "TMPDIR="+tmp, "PATH="+filepath.Dir(w.rm)+":"+os.Getenv("PATH"))
	repo := w.path("repo")
	srWriteTree(t, repo, map[string]string{".gitignore": "*.log\nbuild/\n", "src/main.go": "package main\n"})
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"}} {
		cmd := exec.Command(git, append([]string{"-C", repo}, args...)...)
		cmd.Env = append(w.b.env(), "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	files := map[string]string{"app.log": "log\n", "build/x.o": "obj", "build/y.o": "obj", "build/z.o": "obj"}
	mktemp := `d=$(mktemp -d) && echo x > "$d/f" && rm -rf "$d" && test ! -e "$d" && echo gone`
	cases := []struct {
		name string
		args []string // rm's, or sh -c's
		gone string
	}{
		{"an ignored file", []string{"-f", "repo/app.log"}, "repo/app.log"},
		{"an ignored directory", []string{"-r", "repo/build"}, "repo/build"},
		{"a temporary directory of the line", []string{"-c", mktemp}, ""},
	}
	run := func(args []string) *srProc {
		if args[0] != "-c" {
			return w.start(env, args...)
		}
		p := &srProc{t: t, args: args, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(sh, args...)
		p.cmd.Env, p.cmd.Dir = env, w.dir
		p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			err := p.cmd.Wait()
			p.res = result{stdout: p.stdout.String(), stderr: p.stderr.String()}
			if x, ok := err.(*exec.ExitError); ok {
				p.res.code = x.ExitCode()
			}
			close(p.done)
		}()
		return p
	}
	for _, c := range cases {
		srWriteTree(t, repo, files)
		res := run(c.args).wait()
		srWant(t, c.name, res, 0)
		if c.gone != "" {
			srGone(t, c.name, w.path(c.gone))
		} else if strings.TrimSpace(res.stdout) != "gone" {
			t.Errorf("%s: stdout %q, stderr %q", c.name, res.stdout, res.stderr)
		}
	}
	if n := len(w.list("")); n != 0 {
		t.Errorf("recoverable deletes made %d requests, want none", n)
	}

	cfg := filepath.Join(w.b.home, ".config", "countersign")
	srWriteTree(t, cfg, map[string]string{"config.toml": "[rm]\nstrict = true\n"})
	var seen []string
	for _, c := range cases {
		srWriteTree(t, repo, files)
		p := run(c.args)
		r := w.awaitPending(p, seen...)
		seen = append(seen, r.ID)
		if !strings.Contains(r.Preview, "recursive deletion") && !strings.Contains(r.Preview, "forced deletion") {
			t.Errorf("strict, %s: preview %q", c.name, r.Preview)
		}
		w.decide(r.ID, "deny", "")
		if res := p.wait(); res.code == 0 {
			t.Errorf("strict, %s: exit 0 after a denial", c.name)
		}
		if c.gone != "" && srSnapshot(t, w.path(c.gone)) == nil {
			t.Errorf("strict, %s: deleted after a denial", c.name)
		}
	}
}
