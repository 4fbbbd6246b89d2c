package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil"
)

// The README's quick start and set-ups mark each of their fenced blocks
// with an HTML comment on the line before it: <!-- quickstart: WHAT -->.
// WHAT is "build" (the build and the start, which the test does itself),
// "first start" (what the first start prints, compared with what it
// prints here), "run NAME" (run as written by TestReadmeQuickStart) or
// "not run (WHY)" (it needs what a test cannot have: a model, claude.ai).

// quickstartMarker is the comment before a block.
var quickstartMarker = regexp.MustCompile(`^<!-- quickstart: (build|first start|run [a-z ]+|not run \([^)]+\)) -->$`)

// readmeQuickstart returns the blocks of the README's sections from
// "## Quick start" up to "## Documentation" by their marker, and fails when
// a block has no marker or two blocks have the same one.
func readmeQuickstart(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, text, ok := strings.Cut(string(data), "\n## Quick start\n")
	if !ok {
		t.Fatal(`the README has no "## Quick start"`)
	}
	text, _, ok = strings.Cut(text, "\n## Documentation\n")
	if !ok {
		t.Fatal(`the README has no "## Documentation" after its quick start`)
	}
	blocks := map[string]string{}
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		marker := ""
		if i > 0 {
			if m := quickstartMarker.FindStringSubmatch(lines[i-1]); m != nil {
				marker = m[1]
			}
		}
		if marker == "" {
			t.Fatalf("the README's block %q (line %d of its quick start) has no <!-- quickstart: … --> before it: mark it run or not run", lines[i], i+1)
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		if _, dup := blocks[marker]; dup && !strings.HasPrefix(marker, "not run") {
			t.Fatalf("two of the README's blocks are marked %q", marker)
		}
		blocks[marker] = strings.Join(body, "\n") + "\n"
	}
	return blocks
}

// TestReadmeQuickStart runs the README's quick start and set-ups as written,
// with bash, against the binaries TestMain built and a server on a free
// port, in a directory that stands for the checkout and a home of its own:
// the first start prints what the README shows, the environment, the
// approver's token, the rm wrapper asking (and deleting once approved), the
// Claude Code hook installed and asking, the MCP gateway holding a commit
// call, and Claude Code (the pinned one of the hook's tests) connected to
// it. Every block marked "run" must run and do what the README says.
func TestReadmeQuickStart(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.Missing(t, tool+" is not on PATH: the README's quick start is not run")
		}
	}
	blocks := readmeQuickstart(t)
	known := map[string]bool{"build": true, "first start": true}
	for _, name := range []string{"env", "token", "rm", "hook install", "hook event", "mcp config", "mcp serve", "claude mcp"} {
		known["run "+name] = true
		if _, ok := blocks["run "+name]; !ok {
			t.Fatalf("the README has no block marked run %s", name)
		}
	}
	for marker := range blocks {
		if !known[marker] && !strings.HasPrefix(marker, "not run") {
			t.Fatalf("the README marks a block %q, which this test does not run", marker)
		}
	}
	if want := "go build -o . ./cmd/countersign ./cmd/countersign-agent\n./countersign serve\n"; blocks["build"] != want {
		t.Fatalf("the README's build block is\n%s\nwant (as TestMain builds and this test starts)\n%s", blocks["build"], want)
	}

	// The checkout: the two binaries by the names the build gives them.
	b := newBed(t)
	dir := t.TempDir()
	for link, target := range map[string]string{"countersign": binary, "countersign-agent": agentBinary} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, dir, b.env(), []string{"serve", "--addr", "127.0.0.1:0"})
	fs := s.parseFirstStart()
	checkFirstStart(t, blocks["first start"], s)

	// The README's address, key and demo directory become this test's.
	sampleKey := regexp.MustCompile(`csk_[a-z2-7]{52}`).FindString(blocks["first start"])
	demo := filepath.Join(t.TempDir(), "countersign-demo")
	url := s.URL // the server's, which moves when it restarts
	adapt := func(block string) string {
		block = strings.ReplaceAll(block, "http://127.0.0.1:8080", url)
		block = strings.ReplaceAll(block, sampleKey, fs.key)
		return strings.ReplaceAll(block, "/tmp/countersign-demo", demo)
	}
	sh := &quickShell{t: t, dir: dir, env: b.env()}

	sh.run(adapt(blocks["run env"]))
	if sh.get("COUNTERSIGN_URL") != s.URL || sh.get("COUNTERSIGN_KEY") != fs.key {
		t.Fatalf("the env block set COUNTERSIGN_URL=%q COUNTERSIGN_KEY=%q", sh.get("COUNTERSIGN_URL"), sh.get("COUNTERSIGN_KEY"))
	}
	if out, _ := sh.run(adapt(blocks["run token"])); !tokenRE.MatchString(sh.get("COUNTERSIGN_TOKEN")) || out != "no requests\n" {
		t.Fatalf("the token block set COUNTERSIGN_TOKEN=%q and printed %q", sh.get("COUNTERSIGN_TOKEN"), out)
	}

	// The rm wrapper: not guarded without a marker, asks with one, deletes
	// once approved.
	rm := sh.start(adapt(blocks["run rm"]))
	rm.waitAsking(s)
	ref := pendingRef(t, b, sh.env, "rm -rf demo/build")
	b.mustRun(sh.env, "approve", ref)
	out, errOut := rm.wait()
	if !strings.Contains(out, "session: not guarded") || !strings.Contains(errOut, "countersign rm: waiting for approval of "+ref+": rm -rf demo/build") {
		t.Errorf("the rm block printed\n%s\nand on stderr\n%s", out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "demo", "build")); !os.IsNotExist(err) {
		t.Errorf("demo/build after the approved rm: %v, want it gone", err)
	}

	// The Claude Code hook: installed with the agent binary by its path,
	// then asking about the event Claude Code would send.
	sh.run(adapt(blocks["run hook install"]))
	checkHookInstalled(t, filepath.Join(b.home, ".claude", "settings.json"))
	hook := sh.start(adapt(blocks["run hook event"]))
	hook.waitAsking(s)
	ref = pendingRef(t, b, sh.env, "rm -rf demo/build")
	b.mustRun(sh.env, "deny", ref, "--reason", "not now")
	out, errOut = hook.wait()
	var answer struct {
		HookSpecificOutput struct {
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if json.Unmarshal([]byte(out), &answer) != nil || answer.HookSpecificOutput.PermissionDecision != "deny" ||
		answer.HookSpecificOutput.PermissionDecisionReason != "countersign: admin denied this call ("+ref+"): not now" {
		t.Errorf("the hook event block printed %q (stderr %q), want a deny with the reason", out, errOut)
	}

	t.Run("mcp", func(t *testing.T) {
		url = quickstartMCP(t, sh, s, adapt(blocks["run mcp config"]), adapt(blocks["run mcp serve"]), fs.key, demo)
		t.Run("claude", func(t *testing.T) {
			quickstartClaudeMCP(t, sh, adapt(blocks["run claude mcp"]))
		})
	})
}

// quickstartMCP runs the MCP set-up: the configuration, a restart with it,
// and a commit call that waits for a human, shown in the list. npx is the
// pinned server-filesystem of the gateway's tests, so nothing is fetched.
// It returns the URL of the restarted server, which the shell's
// COUNTERSIGN_URL names from then on.
func quickstartMCP(t *testing.T, sh *quickShell, s *server, config, serve, key, demo string) string {
	npm, _ := filepath.Abs(filepath.Join("..", "..", "internal", "gateway", "testdata", "npm", "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js"))
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(npm); err != nil || nodeErr != nil {
		testutil.Missing(t, "node or the npm test peers are missing; run: npm ci --prefix internal/gateway/testdata/npm")
	}
	shim := t.TempDir()
	script := "#!/bin/sh\n[ \"$1\" = -y ] && shift\n[ \"$1\" = @modelcontextprotocol/server-filesystem ] || exit 127\nshift\nexec node " + npm + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(shim, "npx"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	sh.t = t
	sh.run(config)

	// Ctrl-C, then the serve block, on a free port.
	s.stopClean()
	args := strings.Fields(strings.TrimSpace(serve))
	if len(args) < 2 || args[0] != "./countersign" || args[1] != "serve" {
		t.Fatalf("the mcp serve block is %q, want ./countersign serve …", args)
	}
	// A free port again, where the README keeps 8080.
	env := append(sh.envWith("PATH", shim+":"+sh.get("PATH")), "COUNTERSIGN_ADDR=127.0.0.1:0")
	s2 := startServer(t, sh.dir, env, args[1:])
	sh.env = sh.envWith("COUNTERSIGN_URL", s2.URL)
	cs := mcpSessionAt(t, s2.URL, key, strings.TrimPrefix(s2.URL, "http://"))
	file := filepath.Join(demo, "hello.txt")
	text, res := toolText(t, cs, "write_file", map[string]any{"path": file, "content": "hello\n"})
	if !res.IsError || !strings.HasPrefix(text, "approval_pending: write_file has not run") {
		t.Fatalf("write_file through /mcp answered %q, want approval_pending", text)
	}
	list := runBinary(t, binary, sh.env, "list")
	if !regexp.MustCompile(`(?m)^\S+\s+pending\s+mcp\s+commit\s+default\s+\S+\s+write_file path=` + regexp.QuoteMeta(file) + `$`).MatchString(list.stdout) {
		t.Errorf("countersign list after the call:\n%s%s", list.stdout, list.stderr)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("%s before any approval: %v, want none", file, err)
	}
	return s2.URL
}

// quickstartClaudeMCP adds the server's /mcp to the real Claude Code of
// the hook's tests, as the README does, and has Claude Code connect to it.
func quickstartClaudeMCP(t *testing.T, sh *quickShell, block string) {
	claude, _ := filepath.Abs(filepath.Join("..", "..", "internal", "claudehook", "testdata", "npm", "node_modules", ".bin", "claude"))
	if _, err := os.Stat(claude); err != nil {
		testutil.Missing(t, "the real Claude Code is not installed: npm ci --prefix internal/claudehook/testdata/npm")
	}
	sh.t = t
	path := sh.get("PATH")
	sh.env = append(sh.envWith("PATH", filepath.Dir(claude)+":"+path),
		"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	out, errOut := sh.run(block)
	want := "countersign: " + sh.get("COUNTERSIGN_URL") + "/mcp (HTTP) - ✔ Connected"
	if !strings.Contains(out, want) {
		t.Errorf("the claude mcp block printed\n%s\nstderr: %s\nwant a line %q", out, errOut, want)
	}
}

// checkFirstStart compares what the README shows of the first start with
// what the server printed: the secret key's line on stderr, then stdout,
// then stderr's log up to the listening line, with the password, the key,
// the times and the port as they vary.
func checkFirstStart(t *testing.T, sample string, s *server) {
	t.Helper()
	stderr := strings.SplitAfter(s.stderr.String(), "\n")
	end := 0
	for i, line := range stderr {
		if strings.Contains(line, `msg="countersign listening"`) {
			end = i + 1
			break
		}
	}
	if end < 2 {
		t.Fatalf("stderr of the first start:\n%s", s.stderr)
	}
	got := stderr[0] + s.stdout.String() + strings.Join(stderr[1:end], "")
	norm := func(s string) string {
		for _, r := range []struct{ re, to string }{
			{`password   \S+`, "password   P"},
			{`csk_[a-z2-7]{52}`, "csk_K"},
			{`time=\S+`, "time=T"},
			{`127\.0\.0\.1:\d+`, "127.0.0.1:PORT"},
		} {
			s = regexp.MustCompile(r.re).ReplaceAllString(s, r.to)
		}
		return strings.TrimSpace(s)
	}
	if norm(got) != norm(sample) {
		t.Errorf("the README's first start is\n%s\nthe server printed\n%s", sample, got)
	}
}

// checkHookInstalled checks that settings.json runs the agent binary as
// the README's hook install leaves it.
func checkHookInstalled(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var settings struct {
		Hooks map[string][]struct {
			Hooks []struct{ Type, Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	if err := json.Unmarshal(data, &settings); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	pre := settings.Hooks["PreToolUse"]
	if len(pre) != 1 || len(pre[0].Hooks) != 1 || pre[0].Hooks[0].Type != "command" ||
		pre[0].Hooks[0].Command != agentBinary+" hook claude --timeout 600" {
		t.Fatalf("settings.json after the hook install block:\n%s", data)
	}
}

// pendingRef returns the reference of the one pending request whose
// action ends with action, from the terminal client's list.
func pendingRef(t *testing.T, b *bed, env []string, action string) string {
	t.Helper()
	out := b.mustRun(env, "list")
	var refs []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == "pending" && strings.HasSuffix(line, action) {
			refs = append(refs, f[0])
		}
	}
	if len(refs) != 1 {
		t.Fatalf("countersign list shows %d pending requests of %q, want 1:\n%s", len(refs), action, out)
	}
	return refs[0]
}

// quickShell runs the README's blocks one after another with bash, each in
// the environment the blocks before it exported, as in one terminal.
type quickShell struct {
	t   *testing.T
	dir string
	env []string
}

// quickRun is a block running in the background.
type quickRun struct {
	sh             *quickShell
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	envFile        string
	done           chan struct{}
	err            error // set when done is closed
}

// start runs the block in the background; wait ends it.
func (sh *quickShell) start(block string) *quickRun {
	sh.t.Helper()
	envFile := filepath.Join(sh.t.TempDir(), "env")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	r := &quickRun{sh: sh, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, envFile: envFile, done: make(chan struct{})}
	r.cmd = exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block+"\nenv -0 > "+envFile+"\n")
	r.cmd.Dir, r.cmd.Env = sh.dir, sh.env
	r.cmd.Stdin = strings.NewReader("")
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	r.cmd.WaitDelay = 5 * time.Second
	if err := r.cmd.Start(); err != nil {
		cancel()
		sh.t.Fatal(err)
	}
	go func() {
		defer cancel()
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	sh.t.Cleanup(func() { r.cmd.Process.Kill(); <-r.done })
	return r
}

// waitAsking waits until the block waits on the server for a decision, and
// fails if the block ends first.
func (r *quickRun) waitAsking(s *server) {
	r.sh.t.Helper()
	ended := false
	if !testutil.Wait(func() bool {
		select {
		case <-r.done:
			ended = true
			return true
		default:
		}
		held, _ := s.holds(1)
		return held
	}, testutil.EventuallyWithin) || ended {
		r.wait()
		r.sh.t.Fatalf("the block did not wait for a decision:\n%s\nstdout: %s\nstderr: %s", r.cmd.Args[len(r.cmd.Args)-1], r.stdout, r.stderr)
	}
}

// wait waits for the block, fails unless it exited 0, and takes on the
// environment it left.
func (r *quickRun) wait() (stdout, stderr string) {
	r.sh.t.Helper()
	<-r.done
	if r.err != nil {
		r.sh.t.Fatalf("bash: %v\nblock:\n%s\nstdout: %s\nstderr: %s", r.err, r.cmd.Args[len(r.cmd.Args)-1], r.stdout, r.stderr)
	}
	data, err := os.ReadFile(r.envFile)
	if err != nil {
		r.sh.t.Fatal(err)
	}
	r.sh.env = strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
	return r.stdout.String(), r.stderr.String()
}

// run runs the block to its end.
func (sh *quickShell) run(block string) (stdout, stderr string) {
	sh.t.Helper()
	return sh.start(block).wait()
}

// get returns the value of a variable of the shell's environment.
func (sh *quickShell) get(name string) string {
	for _, kv := range sh.env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// envWith returns the shell's environment with name set to value.
func (sh *quickShell) envWith(name, value string) []string {
	env := []string{name + "=" + value}
	for _, kv := range sh.env {
		if k, _, _ := strings.Cut(kv, "="); k != name {
			env = append(env, kv)
		}
	}
	return env
}
