package claudehook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/server"
)

var update = flag.Bool("update", false, "rewrite the golden .out.json files")

// goldenCase is the optional NAME.case file of a golden case: one
// "key: value" per line.
//
//	server: up | down | none | file   the countersign server (default up);
//	                             file: up, named in NAME.toml ({{SERVER}}, {{KEY}})
//	human: approve | deny TEXT | respond TEXT | stop | expire | window | none
//	args: --timeout 3            the hook's flags
//	late: 1500ms                 the hook's timeout began this long before it
//	                             runs (Env.Start in the past, as after a
//	                             hand-off from countersign-agent)
//	exit: 2                      the exit status (default 0)
//	status: consumed             the request's status on the server afterwards
//	window: rm -r build          first the hook asks for this Bash command in
//	                             the same session, and the human approves it
//	                             with a 15-minute window (human: window then
//	                             says the case's call is auto-approved)
//	file: proj/x.log = TEXT      a file under the home directory (TEXT: "data\n"
//	                             when not given; \n is a newline)
//	link: proj/rc -> ~/.bashrc   a symlink under the home directory (~ is the home)
//	git: proj                    a git repository there, everything committed
//	path: bin                    a directory first in PATH holding rm, a link to
//	                             the running program (the rm wrapper)
//
// The world's set-up lines run in order.
// Without a human line the call must be decided locally: the server must
// have no request afterwards.
type goldenCase struct {
	server, human, text, status string
	args                        []string
	exit                        int
	late                        time.Duration
	window                      string
	setup                       [][2]string // key, value
}

func readCase(t *testing.T, path string) goldenCase {
	t.Helper()
	c := goldenCase{server: "up"}
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return c
	} else if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch strings.TrimSpace(k) {
		case "server":
			c.server = v
		case "human":
			c.human, c.text, _ = strings.Cut(v, " ")
		case "args":
			c.args = strings.Fields(v)
		case "exit":
			c.exit, _ = strconv.Atoi(v)
		case "late":
			if c.late, err = time.ParseDuration(v); err != nil {
				t.Fatalf("%s: late: %v", path, err)
			}
		case "status":
			c.status = v
		case "window":
			c.window = v
		case "file", "link", "git", "path":
			c.setup = append(c.setup, [2]string{strings.TrimSpace(k), v})
		default:
			t.Fatalf("%s: unknown key %q", path, k)
		}
	}
	return c
}

// TestGolden runs every testdata/golden/NAME.in.json through the hook, with
// NAME.toml as the configuration file when present, against a real server,
// and compares standard output with NAME.out.json (empty: no output) and
// the exit status with NAME.case. Paths, the server's address, reference
// codes and inbox URLs are written as {{PROJECT}}, {{HOME}}, {{CONFIG}},
// {{SERVER}}, {{REF}} and {{INBOX}}.
//
// Each case whose server is up runs a second time through the server's
// HTTP hook, POST /api/v1/hooks/claude, which must answer alike: the same
// policy, the same requests, the same JSON ({} for no answer). Cases of a
// server that is down or missing, of a late start or of an exit status
// are the command hook's own.
func TestGolden(t *testing.T) {
	ins, err := filepath.Glob("testdata/golden/*.in.json")
	if err != nil || len(ins) < 30 {
		t.Fatalf("golden inputs: %d, %v", len(ins), err)
	}
	var viaHTTP int
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.json")
		base := strings.TrimSuffix(in, ".in.json")
		c := readCase(t, base+".case")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runGolden(t, base, false)
		})
		if (c.server == "up" || c.server == "file") && c.late == 0 && c.exit == 0 && !*update {
			viaHTTP++
			t.Run(name+"/http", func(t *testing.T) {
				t.Parallel()
				runGolden(t, base, true)
			})
		}
	}
	if viaHTTP < 60 {
		t.Errorf("only %d golden cases run through the HTTP hook", viaHTTP)
	}
}

func runGolden(t *testing.T, base string, viaHTTP bool) {
	c := readCase(t, base+".case")
	w := newWorld(t)
	for _, kv := range c.setup {
		w.setup(kv[0], kv[1])
	}
	srv := newTestServerWith(t, func(cfg *server.Config) { cfg.ClaudeHook = &HTTPHook{Load: w.load()} })
	if cfg, err := os.ReadFile(base + ".toml"); err == nil {
		w.writeConfig(strings.NewReplacer("{{SERVER}}", srv.URL, "{{KEY}}", srv.agentKey).Replace(string(cfg)))
	}
	switch c.server {
	case "up":
		w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = srv.URL, srv.agentKey
	case "down":
		w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = "http://127.0.0.1:1", srv.agentKey
	}
	raw, err := os.ReadFile(base + ".in.json")
	if err != nil {
		t.Fatal(err)
	}
	input := strings.NewReplacer("{{PROJECT}}", w.project, "{{HOME}}", w.home).Replace(string(raw))
	var probe struct {
		SessionID string          `json:"session_id"`
		ToolName  string          `json:"tool_name"`
		ToolInput json.RawMessage `json:"tool_input"`
	}
	json.Unmarshal([]byte(input), &probe)
	opener := ""
	if c.window != "" {
		opener = openHookWindow(t, srv, w, probe.SessionID, c.window)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		actAsHuman(t, srv, c)
	}()
	var stdout, stderr bytes.Buffer
	start := time.Now().Add(-c.late)
	var code int
	if viaHTTP {
		stdout.Write(postHook(t, srv, c.args, w.project, cmp.Or(w.env["PATH"], os.Getenv("PATH")), input))
		if stdout.String() == "{}\n" {
			stdout.Reset() // no answer: the command hook writes nothing
		}
	} else {
		code = Run(context.Background(), &Env{Connect: connect,
			Args: c.args, Stdin: strings.NewReader(input), Stdout: &stdout, Stderr: &stderr,
			Getenv: w.getenv, Cwd: w.project, Start: start, Load: w.load(),
		})
	}
	elapsed := time.Since(start)
	<-done

	if code != c.exit {
		t.Errorf("exit %d, want %d; stderr %s", code, c.exit, stderr.String())
	}
	if srv.agentKey != "" && (strings.Contains(stdout.String(), srv.agentKey) || strings.Contains(stderr.String(), srv.agentKey)) {
		t.Errorf("the agent key was written out")
	}
	if o, err := ParseOptions("claude", c.args, &stderr); err == nil {
		// Always before the timeout; when nobody decides, at the deadline
		// (timeout minus the margin), not long before.
		if elapsed >= o.Timeout {
			t.Errorf("took %s, the timeout is %s", elapsed, o.Timeout)
		}
		if early := o.Timeout - Margin(o.Timeout) - 100*time.Millisecond; c.human == "none" && elapsed < early {
			t.Errorf("gave up after %s, before the deadline %s", elapsed, early)
		}
	}
	got := normalize(stdout.String(), w, srv)
	checkRequests(t, srv, c, opener, probe.ToolName, probe.SessionID, probe.ToolInput, w, &got)
	compareGolden(t, base+".out.json", got)
}

// postHook posts a hook input to the server's HTTP hook as Claude Code
// does, with the hook's flags as the URL's timeout, and returns the body
// of its answer, which must be a 200.
func postHook(t *testing.T, srv *testServer, args []string, project, path, input string) []byte {
	t.Helper()
	u := srv.URL + HTTPPath
	if len(args) == 2 && args[0] == "--timeout" {
		u += "?timeout=" + args[1]
	} else if len(args) > 0 {
		t.Fatalf("the HTTP hook takes no flags %v", args)
	}
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+srv.agentKey)
	req.Header.Set(ProjectDirHeader, project)
	req.Header.Set(PathHeader, path)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("the HTTP hook answered %d %s: %s %v", resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
	}
	return body
}

// actAsHuman waits for the hook's request and decides as the case says.
func actAsHuman(t *testing.T, srv *testServer, c goldenCase) {
	switch c.human {
	case "approve", "deny", "respond", "stop":
		if r := srv.pending(t); r != nil {
			srv.decide(t, r, client.Decision{Decision: c.human, Text: c.text})
		}
	case "expire":
		if srv.pending(t) != nil {
			srv.expire(t)
		}
	}
}

// checkRequests checks what the server holds afterwards.
func checkRequests(t *testing.T, srv *testServer, c goldenCase, opener, tool, session string, args json.RawMessage, w *world, got *string) {
	if c.server != "up" && c.server != "file" {
		return
	}
	list := srv.requests(t)
	list = slices.DeleteFunc(list, func(r *client.Request) bool { return r.ID == opener })
	if c.human == "" {
		if len(list) != 0 {
			t.Errorf("a locally decided call made %d requests", len(list))
		}
		return
	}
	if len(list) == 0 {
		t.Fatal("no request was made")
	}
	r := list[0]
	if c.human == "window" && !r.AutoApproved {
		t.Errorf("the request was not auto-approved: %+v", r)
	}
	if c.window != "" && c.human != "window" && r.AutoApproved {
		t.Errorf("the window on %q covered the request: %+v", c.window, r)
	}
	*got = strings.NewReplacer(r.InboxURL, "{{INBOX}}", r.Reference, "{{REF}}", r.ID, "{{ID}}").Replace(*got)
	if c.status != "" && r.Status != c.status {
		t.Errorf("request status %s, want %s", r.Status, c.status)
	}
	if r.Kind != "tool" || r.Action != tool || r.Context.SessionID != session || r.Context.Cwd != w.project || r.Preview == "" || r.Context.Agent != "claude-code" {
		t.Errorf("request kind %s action %s session %s cwd %s agent %q preview %q", r.Kind, r.Action, r.Context.SessionID, r.Context.Cwd, r.Context.Agent, r.Preview)
	}
	var want, have any
	json.Unmarshal(args, &want)
	json.Unmarshal(r.Arguments, &have)
	if c.human != "window" && !reflect.DeepEqual(want, have) {
		t.Errorf("arguments %s, want the tool input %s", r.Arguments, args)
	}
}

// openHookWindow runs the hook on a Bash command in the session while the
// human approves its request with a 15-minute window, as on the decision
// page, and returns that request's id.
func openHookWindow(t *testing.T, srv *testServer, w *world, session, command string) string {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"session_id": session, "cwd": w.project, "hook_event_name": "PreToolUse",
		"tool_name": "Bash", "tool_input": map[string]string{"command": command}, "tool_use_id": "toolu_window"})
	var id string
	done := make(chan struct{})
	go func() {
		defer close(done)
		if r := srv.pending(t); r != nil {
			id = r.ID
			srv.decide(t, r, client.Decision{Decision: "approve", AutoApproveMinutes: 15})
		}
	}()
	var stdout, stderr bytes.Buffer
	Run(context.Background(), &Env{Connect: connect, Stdin: bytes.NewReader(in), Stdout: &stdout, Stderr: &stderr,
		Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()})
	<-done
	if !strings.Contains(stdout.String(), `"permissionDecision":"allow"`) {
		t.Fatalf("the call that opens the window, %q, was not allowed: %s %s", command, stdout.String(), stderr.String())
	}
	return id
}

// normalize replaces the run's paths and addresses by placeholders.
func normalize(s string, w *world, srv *testServer) string {
	return strings.NewReplacer(srv.URL, "{{SERVER}}", w.config, "{{CONFIG}}", w.project, "{{PROJECT}}", w.home, "{{HOME}}").Replace(s)
}

// compareGolden compares with, or with -update rewrites, a golden file.
func compareGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("stdout differs from %s\n got: %s\nwant: %s", path, got, want)
	}
}
