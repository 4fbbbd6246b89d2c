package claudehook

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/client/api"
)

// editNext waits for the rig's next request and approves it as the
// approver edited it (editAsItComes).
func (r *claudeRig) editNext(command string, then ...client.Decision) func() {
	return r.srv.editAsItComes(r.t, r.exited, command, then...)
}

// editAsItComes waits for the server's next request and approves it as
// the approver edited it: its tool input with the command replaced,
// through the API with the approver's token; then it decides the
// requests that come after it, the decisions in turn, until the agent
// exits (exited closes). It returns a wait for that.
func (s *testServer) editAsItComes(t testing.TB, exited <-chan struct{}, command string, then ...client.Decision) func() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		q := s.nextPending(exited)
		if q == nil {
			t.Errorf("no request was pending before the agent exited")
			return
		}
		var in map[string]any
		if err := json.Unmarshal(q.Arguments, &in); err != nil {
			t.Errorf("the request's arguments: %v", err)
			return
		}
		in["command"] = command
		args, _ := json.Marshal(in)
		s.decide(t, q, client.Decision{Decision: "approve", Edit: &api.Edit{Arguments: args}})
		for _, d := range then {
			if q = s.nextPending(exited); q == nil {
				t.Errorf("no request to %s was pending before the agent exited", d.Decision)
				return
			}
			s.decide(t, q, d)
		}
	}()
	return func() { <-done }
}

// TestClaudeCodeEdited drives the real Claude Code with the hook, as a
// command hook and as the HTTP hook: the model asks to run a risky Bash
// command, the approver edits the command before approving it, and the
// edited command is what Claude Code runs (the file it makes is there,
// the asked delete did not happen). The server records that what ran is
// what was approved: the edit.
func TestClaudeCodeEdited(t *testing.T) {
	t.Parallel()
	for _, kind := range hookKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			r := newClaudeRig(t, rigOptions{http: kind.http})
			wait := r.editNext("touch edited.txt")
			out, results := r.run(nil, bash("rm -r build"))
			wait()
			res := oneResult(t, out, results)
			q := r.askedOnce("Bash")
			if res.IsError || !exists(filepath.Join(r.w.project, "edited.txt")) || !exists(filepath.Join(r.w.project, "build", "x.o")) {
				t.Fatalf("the model got %+v; want the edited command run and the asked delete not", res)
			}
			if !q.Edited || q.Original == nil || !strings.Contains(string(q.Original.Arguments), "rm -r build") ||
				!strings.Contains(string(q.Arguments), "touch edited.txt") {
				t.Errorf("the request: edited %v, arguments %s, original %+v; want both versions", q.Edited, q.Arguments, q.Original)
			}
			if got := r.ranEvents()[q.ID]; len(got) != 1 || got[0].Event != countersign.AuditRanAsApproved {
				t.Errorf("the audit log holds %+v of what ran; want one ran_as_approved", got)
			}
		})
	}
	// An edit that keeps fewer of a delete's targets: the edited command
	// runs (with the hook's cover line), and the rm wrapper in it, which
	// the edit's approval does not cover (the server cannot count what
	// an edited line deletes), asks once more; approved, it deletes the
	// kept target only.
	t.Run("a narrowed delete", func(t *testing.T) {
		t.Parallel()
		r := newClaudeRig(t, rigOptions{})
		wait := r.editNext("rm -r build/x.o", client.Decision{Decision: "approve"})
		out, results := r.run(nil, bash("rm -r build src"))
		wait()
		res := oneResult(t, out, results)
		var q *client.Request
		for _, got := range r.srv.requests(t) {
			if got.Kind == "rm" && got.Action != "rm -r build/x.o" {
				t.Errorf("the rm wrapper asked about %q; want rm -r build/x.o", got.Action)
			}
			if got.Kind == "tool" {
				q = got
			}
		}
		if q == nil || !q.Edited {
			t.Fatalf("no edited Bash request: %+v", q)
		}
		p := r.w.project
		if res.IsError || exists(filepath.Join(p, "build", "x.o")) || !exists(filepath.Join(p, "build", "y.o")) || !exists(filepath.Join(p, "src", "main.go")) {
			t.Fatalf("the model got %+v; want only build/x.o deleted", res)
		}
		if got := r.ranEvents()[q.ID]; len(got) != 1 || got[0].Event != countersign.AuditRanAsApproved {
			t.Errorf("the audit log holds %+v of what ran; want one ran_as_approved", got)
		}
	})
}

// TestGeminiCLIEdited drives the real Gemini CLI: the approver edits the
// shell command before approving it, and Gemini CLI runs the edited
// command (its arguments as the hook wrote them back in its own names).
func TestGeminiCLIEdited(t *testing.T) {
	t.Parallel()
	r := newGeminiRig(t, false)
	wait := r.editNext("touch edited.txt")
	out, results := r.run(nil, geminiShell("rm -r build"))
	wait()
	res := oneResult(t, out, results)
	q := r.askedOnce("Bash")
	if res.IsError || !exists(filepath.Join(r.w.project, "edited.txt")) || !exists(filepath.Join(r.w.project, "build", "x.o")) {
		t.Fatalf("the model got %+v; want the edited command run and the asked delete not", res)
	}
	if !q.Edited || q.Status != "consumed" {
		t.Errorf("the request: edited %v, %s; want the edit consumed", q.Edited, q.Status)
	}
}

// TestCodexEdited drives the real Codex CLI: the approver edits the
// command before approving it, and Codex runs the edited command (the
// PreToolUse hook's updatedInput).
func TestCodexEdited(t *testing.T) {
	t.Parallel()
	r := newCodexRig(t, codexOptions{})
	wait := r.srv.editAsItComes(t, r.exited, "touch edited.txt")
	out, results := r.run(codexSandboxless, shellCall{Cmd: "rm -r build"})
	wait()
	res := oneOutput(t, out, results)
	q := r.askedCodex(1)[0]
	if !exists(filepath.Join(r.w.project, "edited.txt")) || !exists(filepath.Join(r.w.project, "build", "x.o")) {
		t.Fatalf("the model got %q; want the edited command run and the asked delete not", res)
	}
	if !q.Edited || q.Status != "consumed" {
		t.Errorf("the request: edited %v, %s; want the edit consumed", q.Edited, q.Status)
	}
}

// TestCopilotCLIEdited drives the real GitHub Copilot CLI: the approver
// edits the shell command before approving it, and Copilot runs the
// edited command (the preToolUse hook's modifiedArgs).
func TestCopilotCLIEdited(t *testing.T) {
	t.Parallel()
	r := newCopilotRig(t, "")
	wait := r.editNext("touch edited.txt")
	out, results := r.run(nil, shell("rm -r build"))
	wait()
	res := oneResult(t, out, results)
	q := r.askedCopilot("Bash")
	if strings.Contains(res.Text, "enied") || !exists(filepath.Join(r.w.project, "edited.txt")) || !exists(filepath.Join(r.w.project, "build", "x.o")) {
		t.Fatalf("the model got %+v; want the edited command run and the asked delete not", res)
	}
	if !q.Edited || q.Status != "consumed" {
		t.Errorf("the request: edited %v, %s; want the edit consumed", q.Edited, q.Status)
	}
}

// TestCodexEditedEscalation: in its sandbox with approvals, Codex asks
// the hook before a command that asks to leave the sandbox (PreToolUse).
// An approver's edit there is answered as updatedInput, and Codex 0.169.0
// then refuses the rewritten command itself ("approval policy is Never;
// reject command"), before its own prompt to leave the sandbox: neither
// the edit nor the asked command runs, and the model is told.
func TestCodexEditedEscalation(t *testing.T) {
	t.Parallel()
	r := newCodexRig(t, codexOptions{})
	wait := r.srv.editAsItComes(t, r.exited, "touch edited.txt")
	out, results := r.run(codexApproveForMe, shellCall{Cmd: "rm -r build", Escalate: true})
	wait()
	res := oneOutput(t, out, results)
	q := r.askedCodex(1)[0]
	p := r.w.project
	if !strings.Contains(res, "reject") || exists(filepath.Join(p, "edited.txt")) || !exists(filepath.Join(p, "build", "x.o")) {
		t.Errorf("the model got %q; want a refusal, and nothing run", res)
	}
	if !q.Edited || q.Status != "consumed" {
		t.Errorf("the request: edited %v, %s; want the edit consumed", q.Edited, q.Status)
	}
}
