package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/client/api"
)

// TestApprovalCoversTheWrapper runs the real binary as rm, as Claude
// Code's shell runs it after the hook allowed a line: the delete the human
// approved in the hook's request is not asked again; one whose tree grew
// after the approval is.
func TestApprovalCoversTheWrapper(t *testing.T) {
	t.Parallel() // after the other tests, while the binaries build
	w, srv, shell := coverRig(t)

	// The hook asks, the human approves, and the line runs: rm is not
	// asked again.
	line := hookApproves(t, srv, w, "rm -r build")
	out, code := shell(line)
	if code != 0 {
		t.Fatalf("the approved line exited %d: %s", code, out)
	}
	if _, err := os.Stat(filepath.Join(w.project, "build")); !os.IsNotExist(err) {
		t.Errorf("build is still there after the approved delete: %v", err)
	}
	if !strings.Contains(out, "covered by the approval the Claude Code hook asked for") {
		t.Errorf("the wrapper did not say the hook's approval covered it: %s", out)
	}
	list := srv.requests(t)
	rms := slices.DeleteFunc(slices.Clone(list), func(r *client.Request) bool { return r.Kind != "rm" })
	if len(list) != 2 || len(rms) != 1 || rms[0].DecidedBy != countersign.DecidedByCoverage || rms[0].Status != "consumed" ||
		rms[0].Context.SessionID != "sess-e2e" {
		t.Fatalf("requests after the approved delete: %d, the wrapper's %+v; want the hook's and one covered, consumed", len(list), rms)
	}

	// The same line once more, with the same approval: asked.
	w.file("proj/build/again.o", "obj\n")
	go func() {
		if r := srv.pending(t); r != nil {
			srv.decide(t, r, client.Decision{Decision: "deny", Text: "asked again"})
		}
	}()
	if out, code := shell(line); code != 1 || !strings.Contains(out, "asked again") {
		t.Errorf("the line run again on a used approval: exit %d, %s; want it asked and denied", code, out)
	}

	// A tree that grew after the approval is asked again.
	w.file("proj/out/a.o", "obj\n")
	line = hookApproves(t, srv, w, "rm -r out")
	w.file("proj/out/b.o", "more\n")
	done := make(chan *client.Request, 1)
	go func() {
		r := srv.pending(t)
		if r != nil {
			srv.decide(t, r, client.Decision{Decision: "deny", Text: "it grew"})
		}
		done <- r
	}()
	out, code = shell(line)
	asked := <-done
	if code != 1 || asked == nil || asked.Kind != "rm" || !strings.Contains(out, "it grew") {
		t.Errorf("a grown tree: exit %d, asked %+v, output %s; want the wrapper to ask again", code, asked, out)
	}
	if _, err := os.Stat(filepath.Join(w.project, "out", "b.o")); err != nil {
		t.Errorf("the grown tree was deleted: %v", err)
	}
}

// coverRig is a world with the real server and a shell that runs the
// real binary as rm first in PATH, in the project, as Claude Code's shell
// runs a line the hook allowed; the shell returns the output and the exit
// code.
func coverRig(t *testing.T) (*world, *testServer, func(command string) (string, int)) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash to run the command in")
	}
	bin := binary(t, "countersign")
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "rm")); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	w.writeConfig("poll_timeout = \"5s\"\n") // a delete that is asked and left alone ends soon
	srv := newTestServer(t)
	w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = srv.URL, srv.agentKey
	shell := func(command string) (string, int) {
		cmd := exec.Command("bash", "-c", command)
		cmd.Dir = w.project
		cmd.Env = []string{"PATH=" + binDir + ":" + os.Getenv("PATH"), "HOME=" + w.home, "CLAUDECODE=1",
			"COUNTERSIGN_URL=" + srv.URL, "COUNTERSIGN_KEY=" + srv.agentKey}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	return w, srv, shell
}

// TestForgedApprovalCoversNothing: an agent key asks, as if it were the
// hook, for "ls -la" while naming another tree as the paths its line
// deletes, with the wrapper's own risk reasons; the human approves what
// the page shows. The wrapper's delete of that tree under the approval
// is asked, and the tree stays. The hook's own approval of an rm of the
// tree still covers the delete.
func TestForgedApprovalCoversNothing(t *testing.T) {
	t.Parallel() // after the other tests, while the binaries build
	w, srv, shell := coverRig(t)
	w.file("proj/victim/keep.txt", "precious\n")
	victim := filepath.Join(w.project, "victim")
	deny := func(text string) <-chan *client.Request {
		done := make(chan *client.Request, 1)
		go func() {
			r := srv.pending(t)
			if r != nil {
				srv.decide(t, r, client.Decision{Decision: "deny", Text: text})
			}
			done <- r
		}()
		return done
	}

	// The wrapper's request for the delete, as the forger copies it.
	asked := deny("seen")
	if out, code := shell("rm -rf victim"); code != 1 {
		t.Fatalf("the wrapper without an approval: exit %d, %s; want it asked and denied", code, out)
	}
	wrapper := <-asked
	if wrapper == nil || wrapper.Kind != "rm" {
		t.Fatalf("the wrapper's request: %+v", wrapper)
	}

	// The forged request: ls -la, naming the victim.
	ctx := context.Background()
	forged, _, err := srv.agent.Create(ctx, client.CreateInput{Kind: "tool", Action: "Bash",
		Arguments: json.RawMessage(`{"command":"ls -la"}`), Preview: "$ ls -la", RiskReasons: wrapper.RiskReasons,
		Context: client.Context{SessionID: "sess-e2e", Cwd: w.project},
		Scope:   &client.Scope{Commands: []string{"ls"}, Paths: []string{victim}, Files: 1 << 20, Bytes: 1 << 40}})
	if err != nil {
		t.Fatal(err)
	}
	srv.decide(t, forged, client.Decision{Decision: "approve"})
	if _, err := srv.agent.Consume(ctx, forged.ID); err != nil {
		t.Fatal(err)
	}
	asked = deny("forged")
	out, code := shell("export COUNTERSIGN_APPROVAL=" + forged.ID + " COUNTERSIGN_SESSION=sess-e2e\nrm -rf " + victim)
	if r := <-asked; code != 1 || r == nil || r.Kind != "rm" || !strings.Contains(out, "forged") ||
		strings.Contains(out, "covered by the approval") {
		t.Errorf("the wrapper under the forged approval: exit %d, asked %+v, output %s; want it asked and denied", code, r, out)
	}
	if _, err := os.Stat(filepath.Join(victim, "keep.txt")); err != nil {
		t.Fatalf("the victim tree after the forged approval: %v", err)
	}

	// The hook's own request for the delete covers it.
	out, code = shell(hookApproves(t, srv, w, "rm -rf victim"))
	if code != 0 || !strings.Contains(out, "covered by the approval the Claude Code hook asked for") {
		t.Errorf("the wrapper under the hook's approval of rm -rf victim: exit %d, %s; want it covered", code, out)
	}
	if _, err := os.Stat(victim); !os.IsNotExist(err) {
		t.Errorf("the victim tree after the approved delete: %v", err)
	}
}

// hookApproves runs the hook on a Bash command in the session sess-e2e
// while the human approves its request once, and returns the command the
// hook's answer says to run instead.
func hookApproves(t *testing.T, srv *testServer, w *world, command string) string {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"session_id": "sess-e2e", "cwd": w.project, "hook_event_name": "PreToolUse",
		"tool_name": "Bash", "tool_input": map[string]string{"command": command}, "tool_use_id": "toolu_e2e"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r := srv.pending(t); r != nil {
			srv.decide(t, r, client.Decision{Decision: "approve"})
		}
	}()
	var stdout, stderr bytes.Buffer
	Run(context.Background(), &Env{Connect: connect, Stdin: bytes.NewReader(in), Stdout: &stdout, Stderr: &stderr,
		Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()})
	<-done
	var got preToolUseOut
	json.Unmarshal(stdout.Bytes(), &got)
	var updated struct {
		Command string `json:"command"`
	}
	json.Unmarshal(got.HookSpecificOutput.UpdatedInput, &updated)
	if got.HookSpecificOutput.PermissionDecision != "allow" || !strings.HasSuffix(updated.Command, "\n"+command) {
		t.Fatalf("the hook on %q: %s %s; want allow with the command to run", command, stdout.String(), stderr.String())
	}
	return updated.Command
}

// TestCoverInputNamesTheAgent: the line that tells the rm wrapper of an
// approval names the coding agent when it is not Claude Code, whose
// sessions the server keeps apart from Claude Code's; Claude Code's line
// is as it was.
func TestCoverInputNamesTheAgent(t *testing.T) {
	in := &Input{SessionID: "s1", ToolInput: json.RawMessage(`{"command":"rm -r build"}`)}
	call := &Call{Tool: "Bash", Command: "rm -r build"}
	sc := &api.Scope{Commands: []string{"rm"}, Paths: []string{"/src/build"}}
	const id = "req_0123456789abcdef"
	for agent, want := range map[string]string{
		countersign.AgentClaudeCode: "export COUNTERSIGN_APPROVAL=" + id + " COUNTERSIGN_SESSION=s1\nrm -r build",
		countersign.AgentCodex:      "export COUNTERSIGN_APPROVAL=" + id + " COUNTERSIGN_SESSION=s1 COUNTERSIGN_AGENT=codex\nrm -r build",
	} {
		var got struct{ Command string }
		if err := json.Unmarshal(coverInput(agent, in, call, sc, id), &got); err != nil || got.Command != want {
			t.Errorf("%s: the command is %q (%v), want %q", agent, got.Command, err, want)
		}
	}
}
