package claudehook

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/client"
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
		{"no PATH", on.URL + HTTPPath, on.agentKey, input, "the HTTP hook sent no PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, tt.url, strings.NewReader(tt.body))
			if tt.key != "" {
				req.Header.Set("Authorization", "Bearer "+tt.key)
			}
			if tt.name != "no PATH" {
				req.Header.Set(PathHeader, "/usr/bin:/bin")
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
	if server.PathHeader != PathHeader {
		t.Errorf("the server reads %s, install writes %s", server.PathHeader, PathHeader)
	}
}

// postAs posts a PreToolUse input to srv's HTTP hook with key and the
// headers, as Claude Code does, and returns its decision ("" for none)
// and reason; the answer must be a 200 in JSON.
func postAs(t *testing.T, srv *testServer, key, input string, header map[string]string) (decision, reason string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+HTTPPath+"?timeout=60", strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the HTTP hook did not answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out struct {
		HSO struct {
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &out) != nil {
		t.Fatalf("the HTTP hook answered %d %s; want a 200 in JSON", resp.StatusCode, body)
	}
	return out.HSO.PermissionDecision, out.HSO.PermissionDecisionReason
}

// TestHTTPHookServesOneAccount: the HTTP hook's policy looks at the
// server machine's files (it counts what an rm's glob matches) and keeps
// what it saw in the key's account, so it serves the keys of the one
// account the operator named: a key of another account gets a deny, and
// neither account gets a request; a key of the named account is served.
func TestHTTPHookServesOneAccount(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	srv := newTestServerWith(t, func(c *server.Config) { c.ClaudeHook = &HTTPHook{Load: w.load()} })
	input := `{"session_id":"s","cwd":"/","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf '` +
		w.project + `/build/'*"},"tool_use_id":"t"}`
	header := map[string]string{ProjectDirHeader: w.project, PathHeader: "/usr/bin:/bin"}

	decision, reason := postAs(t, srv, srv.otherKey, input, header)
	if decision != "deny" || !strings.Contains(reason, "not of the account the server's hook serves") || strings.Contains(reason, "x.o") {
		t.Errorf("another account's key: %s %q; want a deny that names no file", decision, reason)
	}
	others, err := srv.otherHuman.List(t.Context(), "", 50)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(others) + len(srv.requests(t)); n != 0 || !exists(filepath.Join(w.project, "build", "x.o")) {
		t.Fatalf("another account's key made %d requests", n)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		if r := srv.pending(t); r != nil {
			srv.decide(t, r, client.Decision{Decision: "approve"})
		}
	}()
	decision, reason = postAs(t, srv, srv.agentKey, input, header)
	<-done
	if decision == "deny" {
		t.Errorf("the named account's key: denied: %s", reason)
	}
	if list := srv.requests(t); len(list) != 1 || list[0].Action != "Bash" || !strings.Contains(list[0].Preview, "x.o") {
		t.Errorf("the named account's key: requests %s; want the rm asked", testJSON(list))
	}
}

// farListener gives every connection a peer on another machine.
type farListener struct{ net.Listener }

func (l farListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return farConn{c}, nil
}

type farConn struct{ net.Conn }

func (farConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 40000} }

// TestHTTPHookLocalOnly: the HTTP hook serves only a client on the
// server's machine: a peer on another machine is denied, and so is a
// request a proxy forwarded, even from a trusted proxy on this machine
// that says the client is local; nothing is asked.
func TestHTTPHookLocalOnly(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	hook := func(c *server.Config) {
		c.ClaudeHook = &HTTPHook{Load: w.load()}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("192.0.2.0/24")}
	}
	far := newTestServerOn(t, hook, func(l net.Listener) net.Listener { return farListener{l} })
	near := newTestServerWith(t, hook)
	input := `{"session_id":"s","cwd":"` + w.project + `","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -r build"},"tool_use_id":"t"}`
	for _, tt := range []struct {
		name   string
		srv    *testServer
		header map[string]string
	}{
		{"another machine", far, nil},
		{"another machine, forwarded for this one", far, map[string]string{"X-Forwarded-For": "127.0.0.1"}},
		{"through a proxy on this machine", near, map[string]string{"X-Forwarded-For": "192.0.2.7"}},
		{"through a proxy on this machine, Forwarded", near, map[string]string{"Forwarded": "for=192.0.2.7"}},
	} {
		if tt.header == nil {
			tt.header = map[string]string{}
		}
		tt.header[ProjectDirHeader], tt.header[PathHeader] = w.project, "/usr/bin:/bin"
		decision, reason := postAs(t, tt.srv, tt.srv.agentKey, input, tt.header)
		if decision != "deny" || !strings.Contains(reason, "only for a client on its own machine") {
			t.Errorf("%s: %s %q; want the deny", tt.name, decision, reason)
		}
	}
	if n := len(far.requests(t)) + len(near.requests(t)); n != 0 {
		t.Errorf("%d requests from clients the hook does not serve", n)
	}
}

// TestHTTPHookWrapperOnClaudeCodesPath: the HTTP hook finds the rm
// wrapper's links on the PATH Claude Code sends (PathHeader), not on the
// server's own, which here lacks the wrapper's directory: removing or
// replacing the link is asked, as the command hook asks.
func TestHTTPHookWrapperOnClaudeCodesPath(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	srv := newTestServerWith(t, func(c *server.Config) { c.ClaudeHook = &HTTPHook{Load: w.load()} })
	// The wrapper is a countersign other than the server's program, as
	// when the server runs from another install.
	bin := filepath.Join(w.home, "bin")
	prog := w.file("opt/countersign", "#!/bin/sh\n")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(prog, filepath.Join(bin, "rm")); err != nil {
		t.Fatal(err)
	}
	if w.getenv("PATH") != "" {
		t.Fatal("the server's PATH must not hold the wrapper's directory")
	}
	header := map[string]string{ProjectDirHeader: w.project, PathHeader: bin + ":/usr/bin:/bin"}
	for _, command := range []string{"rm " + bin + "/rm", "ln -sf /bin/rm " + bin + "/rm"} {
		input := `{"session_id":"s","cwd":"` + w.project + `","permission_mode":"bypassPermissions","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"` + command + `"},"tool_use_id":"t"}`
		done := make(chan *client.Request, 1)
		go func() {
			r := srv.pending(t)
			if r != nil {
				srv.decide(t, r, client.Decision{Decision: "deny"})
			}
			done <- r
		}()
		decision, reason := postAs(t, srv, srv.agentKey, input, header)
		asked := <-done
		if decision != "deny" || asked == nil || !strings.Contains(strings.Join(asked.RiskReasons, "; "), "countersign's rm wrapper") {
			t.Errorf("%s: %s %q, asked %s; want the human asked about the wrapper and the call denied", command, decision, reason, testJSON(asked))
		}
	}
	if !exists(filepath.Join(bin, "rm")) {
		t.Error("the wrapper's link is gone")
	}
}

// TestHTTPHookPanicDenies: a policy that panics gets its call denied, not
// a dropped connection (which Claude Code takes as no decision, and runs
// the call), and the server logs the failure without the panic's value.
func TestHTTPHookPanicDenies(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	load := w.load()
	load.Getenv = func(k string) string { panic("the secret file /home/alice/plans.txt") }
	srv := newTestServerWith(t, func(c *server.Config) { c.ClaudeHook = &HTTPHook{Load: load} })
	input := `{"session_id":"s","cwd":"` + w.project + `","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -r build"},"tool_use_id":"t"}`
	decision, reason := postAs(t, srv, srv.agentKey, input, map[string]string{ProjectDirHeader: w.project, PathHeader: "/usr/bin:/bin"})
	if decision != "deny" || !strings.Contains(reason, "the hook failed inside the server") {
		t.Errorf("%s %q; want a deny", decision, reason)
	}
	logs := srv.log.String()
	if !strings.Contains(logs, "the Claude Code hook failed") || strings.Contains(logs, "plans.txt") || strings.Contains(logs, srv.agentKey) {
		t.Errorf("the log %q; want the failure without the panic's value or the key", logs)
	}
	if !exists(filepath.Join(w.project, "build")) || len(srv.requests(t)) != 0 {
		t.Error("the panicking hook ran or asked")
	}
}

func testJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
