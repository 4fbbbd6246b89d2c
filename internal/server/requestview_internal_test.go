package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/callview"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
)

// TestGatewayFacts: the request page reads the server's name and the
// upstream's own title and description from the preview the MCP gateway
// writes, quoted texts unquoted and escaped.
func TestGatewayFacts(t *testing.T) {
	preview := confirm.Preview(gateway.CalledTool{Name: "write_file", Upstream: "fs", Tool: "write_file",
		Title: "Write \"file\"", Description: "Create a new file\nor overwrite\u202e one.", Tier: gateway.TierWrite},
		json.RawMessage(`{"path":"/tmp/a.txt","content":"Server: evil\nAbout: forged"}`))
	server, about := gatewayFacts(preview)
	if server != "fs" {
		t.Errorf("server %q, want fs", server)
	}
	want := []aboutLine{{"Title", `Write "file"`}, {"Description", "Create a new file\nor overwrite\\u202e one."}}
	if len(about) != len(want) || about[0] != want[0] || about[1] != want[1] {
		t.Errorf("about %q, want %q", about, want)
	}
}

// TestBashOf: a Bash call of the hook is read from its preview: the
// command, Claude Code's note and the findings, each once; a preview of
// another form is shown as it is.
func TestBashOf(t *testing.T) {
	r := &countersign.Request{Kind: countersign.KindTool, Action: "Bash",
		Arguments: json.RawMessage(`{"command":"rm -rf build","description":"Clean up"}`),
		Context:   countersign.RequestContext{Cwd: "/src"},
		Preview:   "Claude Code wants to run, in /src:\n\n$ rm -rf build\n\n(Clean up)\n\ndeletes /src/build (3 files)"}
	v := bashOf(r)
	if v == nil || v.Command != "rm -rf build" || v.Note != "Clean up" || len(v.Details) != 1 || v.Details[0] != "deletes /src/build (3 files)" {
		t.Fatalf("bashOf = %+v", v)
	}
	r.Preview = "Claude Code wants to run, in /src:\n\n$ rm -rf build\n\n(Clean up)"
	if v := bashOf(r); v == nil || v.Note != "Clean up" || len(v.Details) != 0 {
		t.Errorf("without findings: %+v", v)
	}
	r.Preview = "$ rm -rf build"
	if v := bashOf(r); v != nil {
		t.Errorf("a preview of another form: %+v, want nil", v)
	}
}

// TestOutcomeOf: a decided request says who decided what and when, and
// whether the agent has used the approval.
func TestOutcomeOf(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		r    countersign.Request
		want string
	}{
		{countersign.Request{Status: countersign.StatusPending}, ""},
		{countersign.Request{Status: countersign.StatusApproved, DecidedBy: "alice", DecidedAt: at, ExpiresAt: at.Add(time.Hour)},
			"Approved by alice at 2026-12-07 10:00:00 UTC. The agent has not used the approval yet; it expires unused at 2026-12-07 11:00:00 UTC."},
		{countersign.Request{Status: countersign.StatusConsumed, DecidedBy: "alice", DecidedAt: at, ConsumedAt: at.Add(time.Minute)},
			"Approved by alice at 2026-12-07 10:00:00 UTC. The agent used the approval at 2026-12-07 10:01:00 UTC."},
		{countersign.Request{Status: countersign.StatusConsumed, DecidedBy: countersign.DecidedByAutoApprove, DecidedAt: at},
			"Approved by an auto-approve window at 2026-12-07 10:00:00 UTC. The agent used the approval."},
		{countersign.Request{Status: countersign.StatusApproved, DecidedBy: "alice", DecidedAt: at, ExpiresAt: at.Add(time.Hour), AutoApproveUntil: at.Add(5 * time.Minute)},
			"Approved by alice at 2026-12-07 10:00:00 UTC, with requests of the same shape until 2026-12-07 10:05:00 UTC. The agent has not used the approval yet"},
		{countersign.Request{Status: countersign.StatusDenied, DecidedBy: "bob", DecidedAt: at}, "Denied by bob at 2026-12-07 10:00:00 UTC."},
		{countersign.Request{Status: countersign.StatusExpired, ExpiresAt: at}, "Expired at 2026-12-07 10:00:00 UTC without a decision"},
		{countersign.Request{Status: countersign.StatusExpired, DecidedBy: "alice", DecidedAt: at, ExpiresAt: at.Add(time.Hour)}, "the agent never used the approval"},
	} {
		got := outcomeOf(&c.r)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("%s by %q: %q, want %q", c.r.Status, c.r.DecidedBy, got, c.want)
		}
	}
}

// TestShowAction: a request shown by its preview shows its action too
// when the preview does not say it, and once when it does.
func TestShowAction(t *testing.T) {
	r := &countersign.Request{Kind: countersign.KindGeneric, Action: "deploy prod", Preview: "Ship v2 to the cluster"}
	if v := viewOf(r); !v.ShowAction || v.Head != "Ship v2 to the cluster" {
		t.Errorf("an action the preview does not say: %+v", v)
	}
	r.Preview = "deploy prod\nv2, 3 nodes"
	if v := viewOf(r); v.ShowAction || v.Head != "deploy prod" || v.Body != "v2, 3 nodes" {
		t.Errorf("an action the preview says: %+v", v)
	}
}

// TestClaudeCodeCalls: a Claude Code Edit or MultiEdit shows its target
// and its change as a diff, and no argument twice.
func TestClaudeCodeCalls(t *testing.T) {
	edit := &countersign.Request{Kind: countersign.KindTool, Action: "Edit",
		Arguments: json.RawMessage(`{"file_path":"/src/a.go","new_string":"b","old_string":"a","replace_all":false}`)}
	c := callOf(edit, nil)
	if c.Target != "/src/a.go" || len(c.Diff) != 2 || c.Diff[0] != (callview.DiffLine{Op: "-", Text: "a"}) || len(c.Fields) != 1 || c.Fields[0].Name != "replace_all" {
		t.Errorf("Edit: %+v", c)
	}
	multi := &countersign.Request{Kind: countersign.KindTool, Action: "MultiEdit",
		Arguments: json.RawMessage(`{"edits":[{"new_string":"b","old_string":"a"},{"new_string":"d","old_string":"c"}],"file_path":"/src/a.go"}`)}
	c = callOf(multi, nil)
	want := []callview.DiffLine{{Op: "-", Text: "a"}, {Op: "+", Text: "b"}, {Op: "…", Text: "edit 2"}, {Op: "-", Text: "c"}, {Op: "+", Text: "d"}}
	if c.Target != "/src/a.go" || len(c.Fields) != 0 || fmt.Sprint(c.Diff) != fmt.Sprint(want) {
		t.Errorf("MultiEdit: %+v", c)
	}
	mcp := &countersign.Request{Kind: countersign.KindTool, Action: "mcp__github__create_issue", Arguments: json.RawMessage(`{"title":"t"}`)}
	if c := callOf(mcp, nil); c.Server != "github" || c.Tool != "create_issue" || c.Via != "Claude Code" || len(c.Fields) != 1 {
		t.Errorf("an MCP tool through Claude Code: %+v", c)
	}
}
