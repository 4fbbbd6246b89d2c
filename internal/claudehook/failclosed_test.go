package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestInputNeverEnds: a hook whose standard input stays open answers
// before its timeout, blocking the call with the reason, in process and
// as the real binary; Claude Code never has to time it out.
func TestInputNeverEnds(t *testing.T) {
	w := newWorld(t)
	r, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	var out, errs bytes.Buffer
	code := Run(context.Background(), &Env{Args: []string{"--timeout", "1"}, Stdin: r, Stdout: &out, Stderr: &errs,
		Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()})
	if code != ExitBlock || out.Len() != 0 || !strings.Contains(errs.String(), "standard input still open") {
		t.Fatalf("in process: exit %d, stdout %q, stderr %q; want 2 with the reason", code, out.String(), errs.String())
	}

	if testing.Short() {
		return
	}
	cmd := exec.Command(binary(t, "countersign"), "hook", "claude", "--timeout", "1")
	cmd.Env = []string{"HOME=" + w.home, "PATH=" + os.Getenv("PATH")}
	cmd.Dir = w.project
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close() })
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin.Write([]byte(`{"hook_event_name":"PreToolUse",`))
	err = cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != ExitBlock || !strings.Contains(stderr.String(), "standard input still open") {
		t.Fatalf("the binary: %v, stderr %q; want exit 2 with the reason", err, stderr.String())
	}
}

// TestClaudeCodeBlocksAFailedHook: the real Claude Code blocks a call
// whose hook, as `hook claude install` wrote it, fails (here: a hook that
// exits 1, as a killed or broken one does), instead of running it.
func TestClaudeCodeBlocksAFailedHook(t *testing.T) {
	t.Parallel()
	r := newClaudeRig(t, rigOptions{})
	broken := filepath.Join(r.w.root, "broken-hook")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'the hook broke' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(r.w.home, ".claude", "settings.json")
	cmd := exec.Command(binary(t, "countersign"), "hook", "claude", "install", "--settings", settings, "--timeout", "60", "--command", broken)
	cmd.Env = []string{"HOME=" + r.w.home, "PATH=" + r.path}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	var v struct {
		Hooks map[string][]groupJSON `json:"hooks"`
	}
	if err := json.Unmarshal(readFile(t, settings), &v); err != nil {
		t.Fatal(err)
	}
	pre := v.Hooks[EventPreToolUse]
	if len(pre) != 1 || len(pre[0].Hooks) != 1 || !strings.HasPrefix(pre[0].Hooks[0].Command, broken) {
		t.Fatalf("the reinstalled PreToolUse hooks: %+v", pre)
	}

	marker := filepath.Join(r.w.project, "ran")
	// Claude Code's own rules allow the call: only the hook stands in
	// its way.
	out, results := r.run([]string{"--allowedTools", "Bash(touch:*)"}, bash("touch "+marker))
	res := oneResult(t, out, results)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the call ran though its hook failed; the model saw %+v", res)
	}
	if !res.IsError || !strings.Contains(res.Text, "the hook broke") {
		t.Errorf("the model saw %+v; want the call blocked with the hook's error", res)
	}
}
