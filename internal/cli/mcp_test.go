package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestMCPUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		vars map[string]string
		want string
	}{
		{nil, nil, "no upstream"},
		{[]string{"--header", "A: b"}, nil, "--header must follow an --upstream URL"},
		{[]string{"--upstream", "npx x", "--header", "A: b"}, nil, "--header must follow an --upstream URL"},
		{[]string{"--upstream", "https://x/mcp", "--header", "nocolon"}, nil, "'Name: value'"},
		{[]string{"--upstream", "node 'x"}, nil, "unterminated quote"},
		{[]string{"--upstream", "node x", "stray"}, nil, `unexpected argument "stray"`},
		{[]string{"--upstream", "a.b=node x"}, nil, "must be 1 to 32 letters"},
		{[]string{"--upstream", "node x"}, map[string]string{"COUNTERSIGN_URL": "http://127.0.0.1:1"}, "no agent key"},
		{[]string{"--upstream", "node x", "--config", "/nonexistent.toml"}, nil, "/nonexistent.toml"},
	} {
		env, _, stderr := testEnv(tc.vars)
		code := Run(t.Context(), env, append([]string{"mcp"}, tc.args...))
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("mcp %q: exit %d, stderr %q; want a failure saying %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

func TestUpstreamFlags(t *testing.T) {
	t.Parallel()
	u := &upstreamFlags{}
	h := headerFlag{u}
	for _, step := range []func() error{
		func() error { return u.Set("fs=npx -y '@modelcontextprotocol/server-filesystem' /srv") },
		func() error { return u.Set("https://mcp.example.com/mcp") },
		func() error { return h.Set("Authorization: Bearer ${TOKEN}") },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	if len(u.list) != 2 || u.list[0].Name != "fs" || strings.Join(u.list[0].Command, "|") != "npx|-y|@modelcontextprotocol/server-filesystem|/srv" ||
		u.list[1].URL != "https://mcp.example.com/mcp" || u.list[1].Headers["Authorization"] != "Bearer ${TOKEN}" {
		t.Fatalf("upstreams %+v", u.list)
	}
}

func TestParseServeMCPConfig(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "mcp.toml")
	os.WriteFile(file, []byte("[[upstream]]\nname = \"fs\"\ncommand = \"node server.js\"\n[keys.\"acme/ci\"]\ntiers = [\"read\"]\n"), 0o600)
	env, _, _ := testEnv(map[string]string{"COUNTERSIGN_MCP_CONFIG": file})
	cfg, err := parseServe(env, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.mcp == nil || len(cfg.mcp.Upstreams) != 1 || cfg.mcp.Upstreams[0].Name != "fs" {
		t.Fatalf("mcp config %+v", cfg.mcp)
	}
	os.WriteFile(file, []byte("[keys.ci]\ntiers = [\"root\"]\n"), 0o600)
	if _, err := parseServe(env, nil); err == nil || !strings.Contains(err.Error(), "unknown tier") {
		t.Errorf("a bad MCP config: %v", err)
	}
}

// TestServeMCPKeysChecked: countersign serve does not start with a [keys]
// entry that names no key of its store, such as a bare key name, which
// could be any account's.
func TestServeMCPKeysChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "mcp.toml")
	os.WriteFile(file, []byte("[keys.ci]\nconfirm = []\n"), 0o600)
	env, _, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": filepath.Join(dir, "data"),
		"COUNTERSIGN_ADDR": "127.0.0.1:0", "COUNTERSIGN_MCP_CONFIG": file})
	if code := Run(t.Context(), env, []string{"serve"}); code != 1 {
		t.Errorf("exit %d, want 1; stderr %s", code, stderr)
	}
	want := file + `: the MCP gateway configuration: [keys."ci"]: no agent key has the id "ci"; name keys as "ACCOUNT/NAME" or by id`
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr, want)
	}
}

// TestMCPStdio runs `countersign mcp` standalone over real pipes, in front
// of @modelcontextprotocol/server-everything from the npm registry, with the
// Go SDK's client on the other end.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs(filepath.Join("..", "gateway", "testdata", "npm"))
	server := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := exec.LookPath("node"); err != nil || !exists(server) {
		testutil.Missing(t, "node or the npm test peers are missing; run: npm ci --prefix internal/gateway/testdata/npm")
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	env, _, stderr := testEnv(map[string]string{"COUNTERSIGN_LOG_LEVEL": "warn"})
	env.Stdin, env.Stdout = inR, outW
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, env, []string{"mcp", "--upstream", "every=node " + server + " stdio"})
		outW.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %s)", err, stderr.String())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "through the cli"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "Echo: through the cli" {
		t.Fatalf("echo: %v %+v", err, res)
	}
	cs.Close()
	inW.Close()
	if code := testutil.Receive(t, done, "the end of countersign mcp when its client hung up"); code != 0 {
		t.Errorf("exit %d, stderr %s", code, stderr.String())
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestMCPStandaloneStore: without a server, countersign mcp opens the
// gateway's store in its configured data directory, where it stays with
// the gateway's account, or in a temporary one, removed at the end.
func TestMCPStandaloneStore(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	env, _, _ := testEnv(nil)
	log := slog.New(slog.DiscardHandler)

	cfg := gateway.NewConfig()
	cfg.Data = filepath.Join(t.TempDir(), "mcp")
	g, closeGateway, err := newStandalone(t.Context(), env, cfg, log)
	if err != nil || g == nil {
		t.Fatalf("newStandalone with a data directory: %v", err)
	}
	closeGateway()
	store, err := sqlite.Open(t.Context(), filepath.Join(cfg.Data, "countersign.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.AccountByName(t.Context(), "local"); err != nil {
		t.Errorf("the data directory's store has no gateway account: %v", err)
	}

	cfg.Data = ""
	if _, closeGateway, err = newStandalone(t.Context(), env, cfg, log); err != nil {
		t.Fatalf("newStandalone without a data directory: %v", err)
	}
	if made, _ := filepath.Glob(filepath.Join(tmp, "countersign-mcp-*", "countersign.db")); len(made) != 1 {
		t.Fatalf("temporary stores while open: %q, want one", made)
	}
	closeGateway()
	if left, _ := filepath.Glob(filepath.Join(tmp, "countersign-mcp-*")); len(left) != 0 {
		t.Errorf("the temporary store outlived the gateway: %q", left)
	}
}
