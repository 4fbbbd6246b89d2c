package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fixture is a real MCP server written with the Go SDK: the test binary
// itself, started again with COUNTERSIGN_FIXTURE=stdio as the gateway's
// upstream command, or served over HTTP inside the test. Its side-effect
// tools write a line to FIXTURE_LOG for every call that ran, so that a test
// can tell a call that ran from one that did not.
func TestMain(m *testing.M) {
	if os.Getenv("COUNTERSIGN_FIXTURE") == "stdio" {
		s := fixtureServer(os.Getenv("FIXTURE_NAME"), os.Getenv("FIXTURE_LOG"))
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "fixture:", err)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func ptr[T any](v T) *T { return &v }

var fixtureLogMu sync.Mutex

// record appends a line to the fixture's log.
func record(file, format string, args ...any) {
	if file == "" {
		return
	}
	fixtureLogMu.Lock()
	defer fixtureLogMu.Unlock()
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, format+"\n", args...)
}

func objectSchema(props ...string) json.RawMessage {
	p := map[string]any{}
	for _, name := range props {
		p[name] = map[string]any{"type": "string"}
	}
	b, _ := json.Marshal(map[string]any{"type": "object", "properties": p})
	return b
}

// argsOf decodes a call's arguments.
func argsOf(req *mcp.CallToolRequest) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(req.Params.Arguments, &m)
	return m
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// fixtureServer has a tool of each tier, a slow one with progress, one that
// kills its process, and one that adds a tool.
func fixtureServer(name, logFile string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fixture-" + name, Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "read_note", Title: "Read a note", Description: "Reads a note.", InputSchema: objectSchema("id"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(fmt.Sprintf("note %v from %s", argsOf(req)["id"], name)), nil
		})
	s.AddTool(&mcp.Tool{Name: "write_note", Description: "Writes a note.", InputSchema: objectSchema("id", "text"),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(logFile, "write_note %v", argsOf(req)["id"])
			return text("written"), nil
		})
	s.AddTool(&mcp.Tool{Name: "delete_note", Title: "Delete a note", Description: "Deletes a note for good.", InputSchema: objectSchema("id"),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(true), OpenWorldHint: ptr(false)}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(logFile, "delete_note %v", argsOf(req)["id"])
			return text(fmt.Sprintf("deleted %v", argsOf(req)["id"])), nil
		})
	s.AddTool(&mcp.Tool{Name: "send_mail", Description: "Sends an e-mail.", InputSchema: objectSchema("to", "body")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(logFile, "send_mail %v", argsOf(req)["to"])
			return text(fmt.Sprintf("sent to %v", argsOf(req)["to"])), nil
		})
	s.AddTool(&mcp.Tool{Name: "slow", Description: "Reports progress until cancelled or done.", InputSchema: objectSchema("id", "steps"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			id := argsOf(req)["id"]
			steps := 3
			if argsOf(req)["steps"] == "many" {
				steps = 1000
			}
			for i := 1; i <= steps; i++ {
				if tok := req.Params.GetProgressToken(); tok != nil {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: float64(steps), Message: fmt.Sprintf("step %d", i)})
				}
				select {
				case <-ctx.Done():
					record(logFile, "slow %v cancelled", id)
					return nil, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
			return text("slow done"), nil
		})
	s.AddTool(&mcp.Tool{Name: "burst", Description: "Reports 5 steps of progress at once, then its result.", InputSchema: objectSchema(),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 5; i++ {
					req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 5})
				}
			}
			return text("burst done"), nil
		})
	s.AddTool(&mcp.Tool{Name: "crash", Description: "Ends the server's process.", InputSchema: objectSchema(),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(logFile, "crash")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&mcp.Tool{Name: "add_tool", Description: "Adds the tool extra.", InputSchema: objectSchema(),
		Annotations: &mcp.ToolAnnotations{DestructiveHint: ptr(false), OpenWorldHint: ptr(false)}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.AddTool(&mcp.Tool{Name: "extra", InputSchema: objectSchema(), Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return text("extra ran"), nil
				})
			return text("added"), nil
		})
	return s
}

// fixtureUpstream is the fixture as a stdio upstream of the gateway.
func fixtureUpstream(t testing.TB, name, logFile string) gateway.UpstreamConfig {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return gateway.UpstreamConfig{Name: name, Command: []string{self, "-test.run=^$"},
		Env: map[string]string{"COUNTERSIGN_FIXTURE": "stdio", "FIXTURE_NAME": name, "FIXTURE_LOG": logFile}}
}

// fixtureHTTP serves the fixture over streamable HTTP, refusing requests
// without the header X-Fixture-Token: secret.
func fixtureHTTP(name, logFile string) http.Handler {
	s := fixtureServer(name, logFile)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Fixture-Token") != "secret" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// calls returns the lines of a fixture's log.
func calls(t testing.TB, logFile string) []string {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}
