package main

import (
	"bytes"
	"context"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/agent"
)

// TestLean: the agent-side binary links none of the server's heavy
// dependencies, whose size and initialisation every rm and every tool
// call would pay for. The test binary links what the command links.
func TestLean(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Fatal("no build information in the test binary")
	}
	heavy := []string{"modernc.org/sqlite", "github.com/jackc/pgx", "github.com/modelcontextprotocol/go-sdk",
		"github.com/wneessen/go-mail", "golang.org/x/crypto", "github.com/gowebpki/jcs"}
	for _, m := range info.Deps {
		for _, h := range heavy {
			if strings.HasPrefix(m.Path, h) {
				t.Errorf("countersign-agent links %s", m.Path)
			}
		}
	}
}

// TestNoHTTPClient: the agent-side binary links no HTTP client, whose
// packages alone cost about as much to start as an empty Go program; what
// needs the server is handed to the countersign binary.
func TestNoHTTPClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, pkg := range []string{"net/http", "crypto/tls", "github.com/countersign/countersign/client"} {
		if slices.Contains(deps, pkg) {
			t.Errorf("countersign-agent links %s", pkg)
		}
	}
	for _, pkg := range []string{"github.com/countersign/countersign/internal/saferm", "github.com/countersign/countersign/internal/clientconfig"} {
		if !slices.Contains(deps, pkg) {
			t.Errorf("go list -deps lists no %s: %v", pkg, deps)
		}
	}
}

// TestRun: the role is argv[0] when it is rm, else the first argument;
// the server's roles are not here and say where they are.
func TestRun(t *testing.T) {
	tests := []struct {
		argv []string
		code int
		want string // in stderr
	}{
		{[]string{"countersign-agent"}, 2, "usage: countersign-agent rm"},
		{[]string{"countersign-agent", "serve"}, 2, `unknown command "serve" (the server and the other roles are in the countersign binary)`},
		{[]string{"countersign-agent", "--help"}, 0, "usage: countersign-agent rm"},
		{[]string{"countersign-agent", "hook"}, 2, "usage: countersign hook AGENT"},
		{[]string{"countersign-agent", "hook", "nosuch"}, 2, "AGENT is the coding agent that calls the hook: claude"},
		{[]string{"/x/rm", "--dry-run"}, 0, ""}, // the wrapper: prints an assessment of nothing
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		env := &agent.Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}
		if code := run(context.Background(), env, tt.argv); code != tt.code {
			t.Errorf("%q: exit %d, want %d; stderr %s", tt.argv, code, tt.code, stderr.String())
		}
		if !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%q: stderr %q, want it to contain %q", tt.argv, stderr.String(), tt.want)
		}
	}
}
