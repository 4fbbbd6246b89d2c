package claudehook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
)

func TestPreview(t *testing.T) {
	w := newWorld(t)
	p := w.policy()
	tests := []struct {
		tool  string
		input string
		want  []string
	}{
		{"Bash", `{"command":"rm -rf build","description":"Clean up"}`,
			[]string{"Claude Code wants to run, in " + w.project + ":", "$ rm -rf build", "(Clean up)", "deletes " + w.project + "/build (3 files, 12 B)"}},
		{"Write", `{"file_path":"/etc/motd","content":"one\ntwo\n"}`,
			[]string{"Claude Code wants to write /etc/motd (8 bytes, 3 lines):", "one\ntwo"}},
		{"Edit", `{"file_path":"/etc/hosts","old_string":"a\nb","new_string":"c","replace_all":true}`,
			[]string{"edit /etc/hosts (every occurrence):", "- a\n- b\n+ c"}},
		{"mcp__github__delete_repo", `{"owner":"acme","repo":"app"}`,
			[]string{"the tool delete_repo of the MCP server github", `"repo": "app"`}},
	}
	for _, tt := range tests {
		in := &Input{ToolName: tt.tool, ToolInput: json.RawMessage(tt.input)}
		call, err := callOf(in, w)
		if err != nil {
			t.Fatal(err)
		}
		got := preview(in, call, p.Decide(context.Background(), call))
		for _, want := range tt.want {
			if !strings.Contains(got, want) {
				t.Errorf("%s preview lacks %q:\n%s", tt.tool, want, got)
			}
		}
	}
}

// callOf parses an input as the hook does.
func callOf(in *Input, w *world) (*Call, error) {
	in.Event, in.Cwd = EventPreToolUse, w.project
	data, _ := json.Marshal(in)
	_, c, err := parseCall(data, w.project, w.project)
	return c, err
}

// TestLargeWrite asks about a Write whose content is larger than the
// server takes as arguments: the arguments carry its SHA-256 instead, the
// preview an excerpt, and the approved call is allowed.
func TestLargeWrite(t *testing.T) {
	w := newWorld(t)
	srv := newTestServer(t)
	w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = srv.URL, srv.agentKey
	var content strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&content, "line %d of a large generated file\n", i)
	}
	input, _ := json.Marshal(map[string]any{
		"session_id": "s", "cwd": w.project, "hook_event_name": "PreToolUse", "tool_name": "Write",
		"tool_input": map[string]string{"file_path": "/etc/large.conf", "content": content.String()},
	})
	go func() {
		if r := srv.pending(t); r != nil {
			srv.decide(t, r, client.Decision{Decision: "approve"})
		}
	}()
	var out bytes.Buffer
	code := Run(context.Background(), &Env{Connect: connect, Stdin: bytes.NewReader(input), Stdout: &out, Stderr: &out,
		Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()})
	if code != 0 || !strings.Contains(out.String(), `"permissionDecision":"allow"`) {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	r := srv.requests(t)[0]
	sum := sha256.Sum256([]byte(content.String()))
	if r.Status != "consumed" || !strings.Contains(string(r.Arguments), hex.EncodeToString(sum[:])) || !strings.Contains(string(r.Arguments), "/etc/large.conf") {
		t.Errorf("request %s, arguments %.200s", r.Status, r.Arguments)
	}
	if len(r.Preview) > maxPreview || !strings.Contains(r.Preview, "more lines") {
		t.Errorf("preview of %d bytes: %.300s", len(r.Preview), r.Preview)
	}
}

func TestArgumentsSmallUnchanged(t *testing.T) {
	raw := json.RawMessage(`{"command":"ls"}`)
	if got := arguments(raw); string(got) != string(raw) {
		t.Errorf("arguments = %s", got)
	}
	if got := clip("ééé", 5); got != "é…" {
		t.Errorf("clip = %q", got)
	}
}

// TestRequestTextAndFacts: what Claude Code sent reaches the server with
// its hidden characters written as escapes, which the server requires (a
// Write of text with a carriage return and a direction override is asked
// about, not refused), and a delete of a protected path says so as a
// fact of the request, which the server's rules read.
func TestRequestTextAndFacts(t *testing.T) {
	w := newWorld(t)
	srv := newTestServer(t)
	w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = srv.URL, srv.agentKey
	ask := func(tool string, toolInput map[string]string) *client.Request {
		t.Helper()
		input, _ := json.Marshal(map[string]any{"session_id": "s", "cwd": w.project, "hook_event_name": "PreToolUse",
			"tool_name": tool, "tool_input": toolInput})
		done := make(chan *client.Request, 1)
		go func() {
			r := srv.pending(t)
			if r != nil {
				srv.decide(t, r, client.Decision{Decision: "deny"})
			}
			done <- r
		}()
		var out bytes.Buffer
		code := Run(context.Background(), &Env{Connect: connect, Stdin: bytes.NewReader(input), Stdout: &out, Stderr: &out,
			Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()})
		if code != 0 || !strings.Contains(out.String(), `"permissionDecision":"deny"`) || !strings.Contains(out.String(), "denied") {
			t.Fatalf("%s: exit %d: %s", tool, code, out.String())
		}
		r := <-done
		if r == nil {
			t.Fatalf("%s: no request", tool)
		}
		return r
	}
	r := ask("Write", map[string]string{"file_path": "/etc/motd", "content": "hello\r\nworld \u202eexe.txt"})
	if !strings.Contains(r.Preview, `hello\x0d`) || !strings.Contains(r.Preview, `\u202eexe.txt`) || strings.ContainsAny(r.Preview, "\r\u202e") || r.Protected {
		t.Errorf("the Write's request: protected %v, preview %q", r.Protected, r.Preview)
	}
	r = ask("Bash", map[string]string{"command": "rm -rf ~/.ssh"})
	if !r.Protected || !slices.ContainsFunc(r.RiskReasons, func(s string) bool { return strings.HasPrefix(s, "protected path:") }) {
		t.Errorf("the delete of ~/.ssh: protected %v, reasons %q", r.Protected, r.RiskReasons)
	}
}
