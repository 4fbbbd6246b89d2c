package claudehook

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/testutil"
)

// TestAgentBinaryHandsOff: the small countersign-agent binary links no
// HTTP client. A call that must be asked is handed, input and all, to the
// countersign binary beside it, which asks the server; the human's
// approval reaches Claude Code as from countersign itself. Without
// countersign beside it, the call is refused and the message says what
// to install.
func TestAgentBinaryHandsOff(t *testing.T) {
	t.Parallel() // after the other tests, while the binaries build
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	binary(t, "countersign") // beside countersign-agent
	agent := binary(t, "countersign-agent")
	lone := filepath.Join(t.TempDir(), "countersign-agent")
	if err := os.Link(agent, lone); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t)
	w := newWorld(t)
	base := filepath.Join("testdata", "golden", "perm_rm_build_approve")
	in := strings.NewReplacer("{{PROJECT}}", w.project, "{{HOME}}", w.home).Replace(string(readFile(t, base+".in.json")))
	env := []string{"HOME=" + w.home, "CLAUDE_PROJECT_DIR=" + w.project, "PATH=" + os.Getenv("PATH"),
		"COUNTERSIGN_URL=" + srv.URL, "COUNTERSIGN_KEY=" + srv.agentKey}
	run := func(bin string) (string, string, int) {
		cmd := exec.Command(bin, "hook", "claude", "--timeout", "60")
		cmd.Env, cmd.Dir, cmd.Stdin = env, w.project, strings.NewReader(in)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.String(), stderr.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return stdout.String(), stderr.String(), 0
	}

	// The human approves the request the hook makes.
	done := make(chan struct{})
	go func() {
		defer close(done)
		testutil.Wait(func() bool {
			for _, r := range srv.requests(t) {
				if r.Status == "pending" {
					srv.decide(t, r, client.Decision{Decision: "approve"})
					return true
				}
			}
			return false
		}, testutil.EventuallyWithin)
	}()
	stdout, stderr, code := run(agent)
	<-done
	if want := string(readFile(t, base+".out.json")); code != 0 || stdout != want {
		t.Errorf("handed over: exit %d, stdout %q, want %q; stderr %s", code, stdout, want, stderr)
	}
	rs := srv.requests(t)
	if len(rs) != 1 || rs[0].Status != "consumed" || !strings.Contains(string(rs[0].Arguments), "find build") {
		t.Errorf("the server holds %d requests, want the consumed request of the call: %+v", len(rs), rs)
	}

	// Alone, it refuses what needs asking, and says why.
	stdout, _, code = run(lone)
	if code != 0 || !strings.Contains(stdout, `"behavior":"deny"`) || !strings.Contains(stdout, "asking the server takes the countersign binary, which is not beside") {
		t.Errorf("alone: exit %d, stdout %s", code, stdout)
	}
	if n := len(srv.requests(t)); n != 1 {
		t.Errorf("alone, the binary made requests: %d on the server", n)
	}
}
