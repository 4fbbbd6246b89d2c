package claudehook

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestBinary runs the real binaries as Claude Code does: `countersign hook
// claude`, and the same role of the small countersign-agent binary, with
// the event on standard input. Both answer alike. A call allowed locally
// must not reach the server, even when one is configured.
func TestBinary(t *testing.T) {
	t.Parallel() // after the other tests, while the binaries build
	if testing.Short() {
		t.Skip("builds the binary")
	}
	for _, name := range []string{"countersign", "countersign-agent"} {
		t.Run(name, func(t *testing.T) {
			// Alone in its directory, as each was built before.
			bin := filepath.Join(t.TempDir(), name)
			if err := os.Link(binary(t, name), bin); err != nil {
				t.Fatal(err)
			}
			testBinary(t, bin)
		})
	}
}

// testBinary runs the hook role of bin on the cases every binary answers
// alike.
func testBinary(t *testing.T, bin string) {
	// Installed from the small binary, the hook is that binary.
	block := printedBlock
	if filepath.Base(bin) == "countersign-agent" {
		block = strings.ReplaceAll(block, `"countersign hook claude`, `"`+bin+` hook claude`)
	}
	var hits atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "no", http.StatusTeapot)
	}))
	defer ts.Close()
	w := newWorld(t)
	env := []string{"HOME=" + w.home, "CLAUDE_PROJECT_DIR=" + w.project, "PATH=" + os.Getenv("PATH"),
		"COUNTERSIGN_URL=" + ts.URL, "COUNTERSIGN_KEY=csk_test_never_printed"}

	tests := []struct {
		name   string
		args   []string
		golden string // a golden case's input and output
		stdin  string
		exit   int
		want   string // in stdout, when no golden case
	}{
		{name: "read", args: []string{"hook", "claude"}, golden: "pre_read_default_prompt"},
		{name: "echo rm", args: []string{"hook", "claude", "--timeout", "30"}, golden: "pre_bash_echo_rm_default_prompt"},
		{name: "deny", args: []string{"hook", "claude"}, golden: "perm_rm_root_deny"},
		{name: "prompt", args: []string{"hook", "claude"}, golden: "pre_write_inside_prompt"},
		{name: "other event", args: []string{"hook", "claude"}, golden: "post_tool_use_ignored"},
		{name: "not JSON", args: []string{"hook", "claude"}, stdin: "x", exit: 2},
		{name: "bad flag", args: []string{"hook", "claude", "--timeout", "soon"}, stdin: "{}", exit: 2},
		{name: "no claude", args: []string{"hook"}, exit: 2},
		{name: "install", args: []string{"hook", "claude", "install"}, want: block},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdin, want := tt.stdin, tt.want
			if tt.golden != "" {
				base := filepath.Join("testdata", "golden", tt.golden)
				stdin = strings.NewReplacer("{{PROJECT}}", w.project, "{{HOME}}", w.home).Replace(string(readFile(t, base+".in.json")))
				want = string(readFile(t, base+".out.json"))
			}
			cmd := exec.Command(bin, tt.args...)
			cmd.Env, cmd.Dir = env, w.project
			cmd.Stdin = strings.NewReader(stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			code := 0
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.exit {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.exit, stderr.String())
			}
			if got := strings.ReplaceAll(stdout.String(), w.project, "{{PROJECT}}"); got != want {
				t.Errorf("stdout %q, want %q", got, want)
			}
			if strings.Contains(stdout.String()+stderr.String(), "csk_test_never_printed") {
				t.Error("the agent key was written out")
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server was called %d times for calls decided locally", n)
	}
}
