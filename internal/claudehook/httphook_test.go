package claudehook

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/server"
)

// TestHTTPHookFailsClosed: Claude Code takes an HTTP hook's failure (a
// status other than 2xx) as no decision and runs the call, so every
// refusal of the server's hook route is a 200 whose JSON denies the call,
// and nothing is asked or run: no key, a key the server refuses, a server
// that does not answer hooks, a bad timeout, an input that is not JSON.
func TestHTTPHookFailsClosed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	on := newTestServerWith(t, func(c *server.Config) { c.ClaudeHook = &HTTPHook{Load: w.load()} })
	off := newTestServer(t)
	input := `{"session_id":"s","cwd":"` + w.project + `","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -r build"},"tool_use_id":"t"}`
	perm := strings.Replace(input, `"PreToolUse"`, `"PermissionRequest"`, 1)
	tests := []struct {
		name, url, key, body, want string
	}{
		{"no key", on.URL + HTTPPath, "", input, "sent no agent key"},
		{"wrong key", on.URL + HTTPPath, "csk_wrong_key_never_printed", input, "refused the agent key the HTTP hook sent"},
		{"hook off", off.URL + HTTPPath, off.agentKey, input, "does not answer Claude Code's HTTP hook"},
		{"bad timeout", on.URL + HTTPPath + "?timeout=soon", on.agentKey, input, "timeout must be whole seconds"},
		{"permission request", on.URL + HTTPPath + "?timeout=0", on.agentKey, perm, "timeout must be whole seconds"},
		{"not JSON", on.URL + HTTPPath, on.agentKey, "{", "the hook input is not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, tt.url, strings.NewReader(tt.body))
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200 (Claude Code runs the call on any other): %s", resp.StatusCode, body)
			}
			var out struct {
				Decision string `json:"decision"`
				Reason   string `json:"reason"`
				HSO      struct {
					HookEventName            string `json:"hookEventName"`
					PermissionDecision       string `json:"permissionDecision"`
					PermissionDecisionReason string `json:"permissionDecisionReason"`
					Decision                 struct {
						Behavior string `json:"behavior"`
						Message  string `json:"message"`
					} `json:"decision"`
				} `json:"hookSpecificOutput"`
			}
			if err := json.Unmarshal(body, &out); err != nil {
				t.Fatalf("not JSON: %s", body)
			}
			var event, denied, reason string
			switch {
			case tt.name == "permission request":
				event, denied, reason = out.HSO.HookEventName, out.HSO.Decision.Behavior, out.HSO.Decision.Message
			case tt.body == "{":
				event, denied, reason = "(any)", out.Decision, out.Reason
				if denied == "block" {
					denied = "deny"
				}
			default:
				event, denied, reason = out.HSO.HookEventName, out.HSO.PermissionDecision, out.HSO.PermissionDecisionReason
			}
			if denied != "deny" || !strings.Contains(reason, tt.want) || event == "" {
				t.Errorf("answer %s; want a deny of the event saying %q", body, tt.want)
			}
			if strings.Contains(string(body), "never_printed") || (on.agentKey != "" && strings.Contains(string(body), on.agentKey)) {
				t.Error("the answer holds the key")
			}
		})
	}
	if n := len(on.requests(t)) + len(off.requests(t)); n != 0 {
		t.Errorf("refused hook calls made %d requests", n)
	}
}

// TestProjectDirHeader: the server reads the header install writes.
func TestProjectDirHeader(t *testing.T) {
	if server.ProjectDirHeader != ProjectDirHeader {
		t.Errorf("the server reads %s, install writes %s", server.ProjectDirHeader, ProjectDirHeader)
	}
}
