package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
)

// TestHookQuorum: the real Claude Code hook (countersign hook claude) asks
// about a tool call that a team rule gives to two approvers; after the
// first approver's vote, through the API with her token, the hook still
// waits; the second approver's vote lets it answer allow.
func TestHookQuorum(t *testing.T) {
	t.Parallel()
	var key, alice, carol string
	e := startPasskeys(t, func(w *testutil.World, c *approval.Config) {
		w.Approver("carol", "acme")
		key, alice, carol = w.Key("acme", "hook"), w.Token("alice", "acme"), w.Token("carol", "acme")
		c.Teams = &approval.Teams{Rules: []approval.TeamRule{{AccountID: w.Acme.ID, Kind: countersign.KindTool, Tool: "mcp__github__*",
			Approvers: []string{"alice", "carol"}, Route: "group:release", Quorum: 2}}}
	})
	home, project := t.TempDir(), t.TempDir()
	config := filepath.Join(home, ".config", "countersign", "config.toml")
	if err := os.MkdirAll(filepath.Dir(config), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(config, []byte("[hook]\nask = [\"mcp__github__*\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	input := fmt.Sprintf(`{"session_id":"sess-q","transcript_path":%q,"cwd":%q,"permission_mode":"default","hook_event_name":"PermissionRequest",
"tool_name":"mcp__github__merge_pull_request","tool_input":{"repo":"acme/app","number":42}}`, filepath.Join(home, "t.jsonl"), project)

	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, binary(t), "hook", "claude", "--timeout", "120")
	cmd.Env = []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "PATH=" + os.Getenv("PATH"),
		"CLAUDE_PROJECT_DIR=" + project, "COUNTERSIGN_URL=" + e.base, "COUNTERSIGN_KEY=" + key}
	cmd.Dir, cmd.Stdin = project, strings.NewReader(input)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cancel(); <-exited })

	var r *countersign.Request
	if !testutil.Wait(func() bool {
		list, _ := e.store.Requests(t.Context(), countersign.RequestFilter{AccountID: mustAcme(t, e).ID, Status: countersign.StatusPending, Limit: 10})
		for _, x := range list {
			if x.Action == "mcp__github__merge_pull_request" {
				r = x
			}
		}
		return r != nil
	}, testutil.EventuallyWithin) {
		t.Fatalf("the hook filed no request:\n%s", out.String())
	}
	e.waiters(t, 1, "the hook's long poll")

	decide := func(token string) string {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", e.base+"/api/v1/requests/"+r.ID+"/decision", strings.NewReader(`{"decision":"approve"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("vote: %d", resp.StatusCode)
		}
		return string(e.status(t, r.ID))
	}
	if st := decide(alice); st != "pending" {
		t.Fatalf("after alice's vote: %s, want pending", st)
	}
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("the hook answered after one vote (%v):\n%s", err, out.String())
	default:
	}
	// The waiting hook may consume the approval before the status is read.
	if st := decide(carol); st != "approved" && st != "consumed" {
		t.Fatalf("after carol's vote: %s, want approved (or consumed by the hook)", st)
	}
	err := <-exited
	exited <- err // for the cleanup
	if err != nil {
		t.Fatalf("the hook: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), `"behavior":"allow"`) {
		t.Fatalf("the hook answered:\n%s", out.String())
	}
}

func mustAcme(t *testing.T, e *pkEnv) *countersign.Account {
	t.Helper()
	a, err := e.store.AccountByName(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return a
}
