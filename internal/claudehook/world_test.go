package claudehook

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/saferm"
	"github.com/countersign/countersign/internal/testutil"
)

// world is a home directory with a project in it, a configuration file
// and an environment, all in a temporary directory.
type world struct {
	t       testing.TB
	root    string
	home    string
	project string
	config  string
	env     map[string]string
}

// newWorld builds the world: ~/proj with a.txt, src/main.go, and build/
// holding three object files.
func newWorld(t testing.TB) *world {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, root: root, home: filepath.Join(root, "home")}
	w.project = filepath.Join(w.home, "proj")
	w.config = filepath.Join(w.home, ".config", "countersign", "config.toml")
	w.env = map[string]string{"HOME": w.home, "CLAUDE_PROJECT_DIR": w.project}
	w.file("proj/a.txt", "a\n")
	w.file("proj/src/main.go", "package main\n")
	for _, f := range []string{"x.o", "y.o", "z.o"} {
		w.file("proj/build/"+f, "obj\n")
	}
	return w
}

// file writes a file under the home directory.
func (w *world) file(rel, content string) string {
	w.t.Helper()
	p := filepath.Join(w.home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// writeConfig writes the configuration file.
func (w *world) writeConfig(content string) {
	w.t.Helper()
	w.file(strings.TrimPrefix(w.config, w.home+"/"), content)
}

// getenv is the world's environment.
func (w *world) getenv(k string) string { return w.env[k] }

// load is how the world loads the configuration: no system files.
func (w *world) load() saferm.LoadOptions {
	return saferm.LoadOptions{
		Getenv:       w.getenv,
		Home:         w.home,
		SystemConfig: filepath.Join(w.root, "etc", "config.toml"),
		SafeRmConf:   filepath.Join(w.root, "etc", "safe-rm.conf"),
	}
}

// policy loads the world's policy.
func (w *world) policy() *Policy {
	w.t.Helper()
	cfg, err := saferm.LoadConfig(saferm.Invocation{}, w.load())
	if err != nil {
		w.t.Fatal(err)
	}
	rules, err := ParseRules(cfg.Hook)
	if err != nil {
		w.t.Fatal(err)
	}
	return &Policy{Rules: rules, Config: cfg}
}

// bash decides a Bash command run in the project.
func (w *world) bash(p *Policy, command string) Verdict {
	return p.Decide(context.Background(), &Call{Tool: "Bash", Command: command, Cwd: w.project, Project: w.project, Mode: "default"})
}

// setup changes the world as a golden case's set-up line says.
func (w *world) setup(key, v string) {
	w.t.Helper()
	switch key {
	case "file":
		rel, text, ok := strings.Cut(v, " = ")
		if !ok {
			text = "data\n"
		}
		w.file(strings.TrimSpace(rel), strings.ReplaceAll(text, `\n`, "\n"))
	case "link":
		rel, target, _ := strings.Cut(v, " -> ")
		if t, ok := strings.CutPrefix(target, "~"); ok {
			target = w.home + t
		}
		p := filepath.Join(w.home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			w.t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			w.t.Fatal(err)
		}
	case "git":
		w.git(filepath.Join(w.home, v))
	case "path": // the rm wrapper: a link named rm to this program
		dir := filepath.Join(w.home, v)
		exe, err := os.Executable()
		if err != nil {
			w.t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			w.t.Fatal(err)
		}
		if err := os.Symlink(exe, filepath.Join(dir, "rm")); err != nil {
			w.t.Fatal(err)
		}
		w.env["PATH"] = dir + ":" + os.Getenv("PATH")
	default:
		w.t.Fatalf("unknown set-up %q", key)
	}
}

// git makes dir a git repository with everything in it committed.
func (w *world) git(dir string) {
	w.t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testutil.Missing(w.t, "git is not on PATH")
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"}} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+w.home, "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			w.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}
