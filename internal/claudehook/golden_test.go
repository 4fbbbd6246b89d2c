package claudehook

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
)

var update = flag.Bool("update", false, "rewrite the golden .out.json files")

// goldenCase is the optional NAME.case file of a golden case: one
// "key: value" per line.
//
//	server: up | down | none | file   the countersign server (default up);
//	                             file: up, named in NAME.toml ({{SERVER}}, {{KEY}})
//	human: approve | deny TEXT | respond TEXT | stop | expire | window | none
//	args: --timeout 3            the hook's flags
//	exit: 2                      the exit status (default 0)
//	status: consumed             the request's status on the server afterwards
//
// Without a human line the call must be decided locally: the server must
// have no request afterwards.
type goldenCase struct {
	server, human, text, status string
	args                        []string
	exit                        int
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
		case "status":
			c.status = v
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
func TestGolden(t *testing.T) {
	ins, err := filepath.Glob("testdata/golden/*.in.json")
	if err != nil || len(ins) < 30 {
		t.Fatalf("golden inputs: %d, %v", len(ins), err)
	}
	for _, in := range ins {
		name := strings.TrimSuffix(filepath.Base(in), ".in.json")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runGolden(t, strings.TrimSuffix(in, ".in.json"))
		})
	}
}

func runGolden(t *testing.T, base string) {
	c := readCase(t, base+".case")
	w := newWorld(t)
	srv := newTestServer(t)
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
	if c.human == "window" {
		srv.openWindow(t, probe.SessionID, probe.ToolName)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		actAsHuman(t, srv, c)
	}()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Run(context.Background(), &Env{
		Args: c.args, Stdin: strings.NewReader(input), Stdout: &stdout, Stderr: &stderr,
		Getenv: w.getenv, Cwd: w.project, Start: start, Load: w.load(),
	})
	elapsed := time.Since(start)
	<-done

	if code != c.exit {
		t.Errorf("exit %d, want %d; stderr %s", code, c.exit, stderr.String())
	}
	if srv.agentKey != "" && (strings.Contains(stdout.String(), srv.agentKey) || strings.Contains(stderr.String(), srv.agentKey)) {
		t.Errorf("the agent key was written out")
	}
	if o, err := ParseOptions(c.args, &stderr); err == nil {
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
	checkRequests(t, srv, c, probe.ToolName, probe.SessionID, probe.ToolInput, w, &got)
	compareGolden(t, base+".out.json", got)
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
func checkRequests(t *testing.T, srv *testServer, c goldenCase, tool, session string, args json.RawMessage, w *world, got *string) {
	if c.server != "up" && c.server != "file" {
		return
	}
	list := srv.requests(t)
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
	for _, x := range list {
		if x.Preview != windowPreview { // not the request that opened the window
			r = x
			break
		}
	}
	if c.human == "window" && !r.AutoApproved {
		t.Errorf("the request was not auto-approved: %+v", r)
	}
	*got = strings.NewReplacer(r.InboxURL, "{{INBOX}}", r.Reference, "{{REF}}").Replace(*got)
	if c.status != "" && r.Status != c.status {
		t.Errorf("request status %s, want %s", r.Status, c.status)
	}
	if r.Kind != "tool" || r.Action != tool || r.Context.SessionID != session || r.Context.Cwd != w.project || r.Preview == "" {
		t.Errorf("request kind %s action %s session %s cwd %s preview %q", r.Kind, r.Action, r.Context.SessionID, r.Context.Cwd, r.Preview)
	}
	var want, have any
	json.Unmarshal(args, &want)
	json.Unmarshal(r.Arguments, &have)
	if c.human != "window" && !reflect.DeepEqual(want, have) {
		t.Errorf("arguments %s, want the tool input %s", r.Arguments, args)
	}
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
