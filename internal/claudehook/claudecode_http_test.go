package claudehook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaudeCodeHTTPHookKey runs the real Claude Code with the HTTP hook
// and a key the server refuses: the call is denied, with the reason, and
// does not run. The installed settings hold no key, only the name of the
// variable Claude Code reads it from.
func TestClaudeCodeHTTPHookKey(t *testing.T) {
	t.Parallel()
	r := newClaudeRig(t, rigOptions{http: true})
	settings, err := os.ReadFile(filepath.Join(r.w.home, ".claude", "settings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(settings), r.srv.agentKey) || !strings.Contains(string(settings), `"Bearer $COUNTERSIGN_KEY"`) {
		t.Errorf("settings.json: %s; want the variable, not the key", settings)
	}
	r.key = "csk_refused_key"
	out, results := r.run(nil, bash("rm -r build"))
	res := oneResult(t, out, results)
	if !res.IsError || !strings.Contains(res.Text, "refused the agent key the HTTP hook sent") || !exists(filepath.Join(r.w.project, "build")) {
		t.Errorf("the model got %+v; want the refusal and build kept", res)
	}
	if n := len(r.srv.requests(t)); n != 0 {
		t.Errorf("%d requests with a refused key", n)
	}
}

// TestClaudeCodeHTTPHookServerDown records what Claude Code does when the
// HTTP hook's server cannot be reached: no decision, so its own
// permission rules decide (in -p, a command that needs approval is
// refused), and the rm wrapper, which asks the same server, refuses the
// delete that Claude Code's acceptEdits mode runs unasked. The command
// hook denies instead (TestGolden's server: down cases): where an outage
// must block every call, the command hook is the one to install.
func TestClaudeCodeHTTPHookServerDown(t *testing.T) {
	t.Parallel()
	r := newClaudeRig(t, rigOptions{http: true})
	r.down()
	out, results := r.run(nil, bash("git push --force origin main"))
	if res := oneResult(t, out, results); !res.IsError || !strings.Contains(res.Text, "requires approval") {
		t.Errorf("default mode, server down: the model got %+v; want Claude Code's own refusal", res)
	}
	out, results = r.run([]string{"--permission-mode", "acceptEdits"}, bash("rm -r build"))
	res := oneResult(t, out, results)
	if !res.IsError || !strings.Contains(res.Text, "countersign rm: cannot reach the countersign server") ||
		!strings.Contains(res.Text, "nothing was deleted") || !exists(filepath.Join(r.w.project, "build", "x.o")) {
		t.Errorf("acceptEdits, server down: the model got %+v; want the wrapper's refusal and build kept", res)
	}
}
