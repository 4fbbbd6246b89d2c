package gateway_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// npmDir returns the installed npm test peers (internal/gateway/testdata/npm,
// installed by .ci/run), or skips the test when node or the packages are
// missing, unless COUNTERSIGN_TEST_STRICT=1.
func npmDir(t *testing.T) string {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("testdata", "npm"))
	_, nodeErr := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	if nodeErr != nil || modErr != nil {
		testutil.Missing(t, "node or the npm test peers are missing; run: npm ci --prefix internal/gateway/testdata/npm")
	}
	return dir
}

func npmServer(dir, pkg string) string {
	return filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
}

// TestFilesystemUpstream: @modelcontextprotocol/server-filesystem behind the
// gateway: its annotations give the tiers, a write_file (commit) runs only
// once approved.
func TestFilesystemUpstream(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	root := t.TempDir()
	h := newHarness(t, func(c *gateway.Config) {
		c.Upstreams = []gateway.UpstreamConfig{{Name: "fs", Command: []string{"node", npmServer(dir, "server-filesystem"), root}}}
	})
	cs := h.connect(clientOpts{})
	names := toolNames(t, cs)
	for _, want := range []string{"read_text_file", "write_file", "create_directory", "list_directory"} {
		if !slices.Contains(names, want) {
			t.Fatalf("tools %v lack %s", names, want)
		}
	}
	file := filepath.Join(root, "hello.txt")
	args := map[string]any{"path": file, "content": "hello from the gateway"}
	wantStatus(t, call(t, cs, "write_file", args), "approval_pending")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("the file exists before the approval: %v", err)
	}
	r := h.pending("write_file")
	if !strings.Contains(r.Preview, "Tier:     commit") || !strings.Contains(r.Preview, "hello from the gateway") {
		t.Errorf("preview %q", r.Preview)
	}
	h.decide(r.ID, countersign.DecisionApprove)
	res := call(t, cs, "write_file", args)
	if res.IsError {
		t.Fatalf("write_file after the approval: %q", textOf(res))
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "hello from the gateway" {
		t.Fatalf("file %q, %v", b, err)
	}
	// read is not confirmed; create_directory (not destructive) is write.
	if res := call(t, cs, "read_text_file", map[string]any{"path": file}); res.IsError || !strings.Contains(textOf(res), "hello from the gateway") {
		t.Fatalf("read_text_file: %q", textOf(res))
	}
	if res := call(t, cs, "create_directory", map[string]any{"path": filepath.Join(root, "sub")}); res.IsError {
		t.Fatalf("create_directory: %q", textOf(res))
	}
}

// TestEverythingUpstream: @modelcontextprotocol/server-everything over stdio
// and over streamable HTTP, with its progress passed through.
func TestEverythingUpstream(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	port := freePort(t)
	cmd := exec.Command("node", npmServer(dir, "server-everything"), "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	eventually(t, "server-everything to listen", func() bool {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	h := newHarness(t, func(c *gateway.Config) {
		c.Upstreams = []gateway.UpstreamConfig{
			{Name: "every", Command: []string{"node", npmServer(dir, "server-everything"), "stdio"}},
			{Name: "web", URL: fmt.Sprintf("http://127.0.0.1:%d/mcp", port)},
		}
	})
	var mu sync.Mutex
	var progress []float64
	cs := h.connect(clientOpts{progress: func(r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		progress = append(progress, r.Params.Progress)
		mu.Unlock()
	}})
	names := toolNames(t, cs)
	if !slices.Contains(names, "every_echo") || !slices.Contains(names, "web_echo") {
		t.Fatalf("tools %v", names)
	}
	wantRan(t, call(t, cs, "every_echo", map[string]any{"message": "hi"}), "Echo: hi")
	wantRan(t, call(t, cs, "web_echo", map[string]any{"message": "over http"}), "Echo: over http")
	params := &mcp.CallToolParams{Name: "every_trigger-long-running-operation", Arguments: map[string]any{"duration": 0.3, "steps": 3}}
	params.SetProgressToken(7)
	res, err := cs.CallTool(t.Context(), params)
	if err != nil || res.IsError {
		t.Fatalf("long running operation: %v %q", err, textOf(res))
	}
	// Every step reaches the client (before the result: see
	// TestProgressOnTheWireStdio; the client's SDK may run its handler
	// after it returned the result).
	eventually(t, "progress", func() bool { mu.Lock(); defer mu.Unlock(); return len(progress) >= 3 })
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(progress) != "[1 2 3]" {
		t.Errorf("progress %v", progress)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// tsClient drives testdata/npm/client.mjs, the TypeScript SDK's client.
type tsClient struct {
	t   *testing.T
	in  io.Writer
	out *bufio.Scanner
}

func newTSClient(t *testing.T, h *harness, key, mode string) *tsClient {
	t.Helper()
	dir := npmDir(t)
	cmd := exec.Command("node", filepath.Join(dir, "client.mjs"), h.base+"/mcp", h.keys[key], mode)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	c := &tsClient{t: t, in: in, out: bufio.NewScanner(out)}
	c.out.Buffer(make([]byte, 1<<20), 1<<20)
	if got := c.read(); got["connected"] != "countersign" {
		t.Fatalf("TypeScript client: %v", got)
	}
	return c
}

func (c *tsClient) send(v any) {
	c.t.Helper()
	b, _ := json.Marshal(v)
	if _, err := fmt.Fprintf(c.in, "%s\n", b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *tsClient) read() map[string]any {
	c.t.Helper()
	done := make(chan bool, 1)
	go func() { done <- c.out.Scan() }()
	if !testutil.Receive(c.t, done, "the TypeScript client's answer") {
		c.t.Fatalf("the TypeScript client ended: %v", c.out.Err())
	}
	var m map[string]any
	if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
		c.t.Fatalf("TypeScript client said %q", c.out.Text())
	}
	return m
}

// result calls a tool and returns its result's text and _meta.
func (c *tsClient) result(m map[string]any) (string, map[string]any) {
	c.t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		c.t.Fatalf("TypeScript client: %v", m)
	}
	var texts []string
	content, _ := r["content"].([]any)
	for _, x := range content {
		if item, ok := x.(map[string]any); ok && item["type"] == "text" {
			texts = append(texts, fmt.Sprint(item["text"]))
		}
	}
	meta, _ := r["_meta"].(map[string]any)
	return strings.Join(texts, "\n"), meta
}

// TestTypeScriptClient: the TypeScript SDK's client (2025-11-25) without
// elicitation gets approval_pending and its retry takes the approval; with
// elicitation it gets elicitation/create on its session.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	// The elicitation is answered across a Node process (elicitHold).
	h := newHarness(t, longHold)

	c := newTSClient(t, h, "agent", "")
	c.send(map[string]any{"op": "list"})
	tools, _ := c.read()["tools"].([]any)
	if len(tools) < 5 {
		t.Fatalf("tools %v", tools)
	}
	args := map[string]any{"id": "ts"}
	c.send(map[string]any{"op": "call", "tool": "delete_note", "args": args})
	text, meta := c.result(c.read())
	r := h.pending("delete_note")
	if meta["countersign/status"] != "approval_pending" || !strings.Contains(text, h.base+"/approvals/"+r.ID) {
		t.Fatalf("result %q %v", text, meta)
	}
	h.decide(r.ID, countersign.DecisionApprove)
	c.send(map[string]any{"op": "call", "tool": "delete_note", "args": args})
	if text, _ := c.result(c.read()); text != "deleted ts" {
		t.Fatalf("retry: %q", text)
	}

	e := newTSClient(t, h, "agent", "elicit")
	e.send(map[string]any{"op": "call", "tool": "send_mail", "args": map[string]any{"to": "ts@example.com"}})
	el, ok := e.read()["elicit"].(map[string]any)
	if !ok || !strings.Contains(fmt.Sprint(el["message"]), "ts@example.com") {
		t.Fatalf("elicitation %v", el)
	}
	h.decide(h.pending("send_mail").ID, countersign.DecisionApprove)
	e.send(map[string]any{"action": "accept"})
	if text, _ := e.result(e.read()); text != "sent to ts@example.com" {
		t.Fatalf("after the elicitation: %q", text)
	}
	e.send(map[string]any{"op": "call", "tool": "send_mail", "args": map[string]any{"to": "no@example.com"}})
	e.read() // the elicitation
	e.send(map[string]any{"action": "decline"})
	if _, meta := e.result(e.read()); meta["countersign/status"] != "declined" {
		t.Fatalf("declined: %v", meta)
	}
	wantCalls(t, h.logFile, "delete_note ts", "send_mail ts@example.com")
}

// TestEverythingFeatures: @modelcontextprotocol/server-everything's
// resources, templates, prompts and completions through /mcp.
func TestEverythingFeatures(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	h := newHarness(t, func(c *gateway.Config) {
		c.Upstreams = []gateway.UpstreamConfig{{Name: "every", Command: []string{"node", npmServer(dir, "server-everything"), "stdio"}}}
	})
	cs := h.connect(clientOpts{version: "2025-11-25"})
	uris := resourceURIs(t, cs)
	var doc string
	for _, u := range uris {
		if strings.HasPrefix(u, "demo://resource/static/document/") {
			doc = u
		}
	}
	if doc == "" {
		t.Fatalf("resources %v", uris)
	}
	if got, err := readText(t, cs, doc); err != nil || len(got) < len(doc)+10 {
		t.Errorf("read %s: %q %v", doc, got, err)
	}
	if tmpls := templateURIs(t, cs); !slices.Contains(tmpls, "demo://resource/dynamic/text/{resourceId}") {
		t.Fatalf("templates %v", tmpls)
	}
	if got, err := readText(t, cs, "demo://resource/dynamic/text/3"); err != nil || !strings.Contains(got, "demo://resource/dynamic/text/3: ") {
		t.Errorf("read a dynamic text: %q %v", got, err)
	}
	res, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "args-prompt", Arguments: map[string]string{"city": "Paris"}})
	if err != nil || !strings.Contains(res.Messages[0].Content.(*mcp.TextContent).Text, "Paris") {
		t.Errorf("args-prompt: %v %v", res, err)
	}
	c, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "completable-prompt"},
		Argument: mcp.CompleteParamsArgument{Name: "department", Value: "S"}})
	if err != nil || strings.Join(c.Completion.Values, ",") != "Sales,Support" {
		t.Errorf("complete department: %v %v", c, err)
	}
}

// TestTypeScriptClientUnanswerable: the TypeScript SDK's client declaring
// elicitation with no handler (it answers -32601) or with one that throws
// gets approval_pending, not an error, and its retry takes the approval.
func TestTypeScriptClientUnanswerable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, mode := range []string{"elicit-nohandler", "elicit-throws"} {
		c := newTSClient(t, h, "agent", mode)
		args := map[string]any{"id": mode}
		c.send(map[string]any{"op": "call", "tool": "delete_note", "args": args})
		text, meta := c.result(c.read())
		r := h.pending("delete_note")
		if meta["countersign/status"] != "approval_pending" || !strings.Contains(text, h.base+"/approvals/"+r.ID) {
			t.Fatalf("%s: %q %v", mode, text, meta)
		}
		h.decide(r.ID, countersign.DecisionApprove)
		c.send(map[string]any{"op": "call", "tool": "delete_note", "args": args})
		if text, _ := c.result(c.read()); text != "deleted "+mode {
			t.Errorf("%s: retry %q", mode, text)
		}
	}
	wantCalls(t, h.logFile, "delete_note elicit-nohandler", "delete_note elicit-throws")
}
