package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The fixture is a real MCP server written with the Go SDK: the test binary
// itself, started again with COUNTERSIGN_FIXTURE=stdio as the gateway's
// upstream command, or served over HTTP inside the test. Its side-effect
// tools write a line to FIXTURE_LOG for every call that ran, so that a test
// can tell a call that ran from one that did not.
func TestMain(m *testing.M) {
	if os.Getenv("COUNTERSIGN_FIXTURE") == "raw" {
		rawFixture(os.Stdin, os.Stdout)
		os.Exit(0)
	}
	if os.Getenv("COUNTERSIGN_FIXTURE") == "stdio" {
		s := fixtureServer(os.Getenv("FIXTURE_NAME"), os.Getenv("FIXTURE_LOG"))
		if os.Getenv("FIXTURE_ASK") != "" {
			addAsking(s, os.Getenv("FIXTURE_LOG"))
		}
		if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "fixture:", err)
		}
		os.Exit(0)
	}
	// The tests wait on child processes (the fixture, Node, Chromium) and
	// the network far more than they compute.
	testutil.WaitingParallel(4)
	code := m.Run()
	if sharedChromium.stop != nil {
		sharedChromium.stop()
	}
	os.Exit(code)
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
//
// It has resources too (note://readme, note://secret and the template
// note://note/{id}) with subscriptions, the prompt greet, completions of
// greet's name and the template's id, and logs at the client's level.
func fixtureServer(name, logFile string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fixture-" + name, Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			record(logFile, "subscribe %s", r.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, r *mcp.UnsubscribeRequest) error {
			record(logFile, "unsubscribe %s", r.Params.URI)
			return nil
		},
		CompletionHandler: func(_ context.Context, r *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			var all []string
			switch {
			case r.Params.Ref.Type == "ref/prompt" && r.Params.Ref.Name == "greet":
				all = []string{"alice", "albert", "bob"}
			case r.Params.Ref.Type == "ref/resource" && r.Params.Ref.URI == "note://note/{id}":
				all = []string{name + "-1", name + "-2"}
			}
			out := []string{}
			for _, v := range all {
				if strings.HasPrefix(v, r.Params.Argument.Value) {
					out = append(out, v)
				}
			}
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: out, Total: len(out)}}, nil
		},
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			//lint:ignore SA1019 the fixture speaks 2025-11-25 too, which has logging
			if r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams]); ok && method == "logging/setLevel" {
				record(logFile, "setLevel %s", r.Params.Level)
			}
			return next(ctx, method, req)
		}
	})
	textResource := func(uri, body string) mcp.ResourceHandler {
		return func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "text/plain", Text: body}}}, nil
		}
	}
	s.AddResource(&mcp.Resource{URI: "note://readme", Name: "readme", MIMEType: "text/plain"}, textResource("note://readme", "readme of "+name))
	s.AddResource(&mcp.Resource{URI: "note://secret", Name: "secret", MIMEType: "text/plain"}, textResource("note://secret", "secret of "+name))
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "note://note/{id}", Name: "note", MIMEType: "text/plain"},
		func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			id := strings.TrimPrefix(r.Params.URI, "note://note/")
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "text/plain", Text: "note " + id + " from " + name}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets someone.", Arguments: []*mcp.PromptArgument{{Name: "name", Required: true}}},
		func(_ context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: "Hello, " + r.Params.Arguments["name"] + ", from " + name}}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "touch", Description: "Changes note://readme and logs it.", InputSchema: objectSchema(),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "note://readme"})
			fixtureLog(ctx, req.Session, "info", "readme touched")
			fixtureLog(ctx, req.Session, "debug", "debug detail")
			return text("touched"), nil
		})
	s.AddTool(&mcp.Tool{Name: "meet", Description: "Waits for a second call of meet, logs, and returns once both logged.", InputSchema: objectSchema("id"),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if !meeting.arrive(ctx) {
				return nil, ctx.Err()
			}
			fixtureLog(ctx, req.Session, "info", fmt.Sprintf("met %v", argsOf(req)["id"]))
			if !meeting.arrive(ctx) {
				return nil, ctx.Err()
			}
			return text("met"), nil
		})
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
				case <-time.After(20 * time.Millisecond): // not a wait: the slow tool's pace
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
			s.AddResource(&mcp.Resource{URI: "note://extra", Name: "extra"}, textResource("note://extra", "extra of "+name))
			s.AddPrompt(&mcp.Prompt{Name: "extra"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "extra"}}}}, nil
			})
			return text("added"), nil
		})
	return s
}

// meeting lets two calls of the fixture's tool meet wait for each other,
// twice: both log only once both run, and return only once both logged.
var meeting barrier

// barrier lets two callers of arrive pass together.
type barrier struct {
	mu      sync.Mutex
	waiting chan struct{}
}

// arrive waits for a second caller; false if ctx ends first.
func (b *barrier) arrive(ctx context.Context) bool {
	b.mu.Lock()
	ch := b.waiting
	if ch == nil {
		ch = make(chan struct{})
		b.waiting = ch
	} else {
		close(ch)
		b.waiting = nil
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
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

// rawFixture is an MCP server written by hand, for what the SDK would not
// send: it lists a resource whose URI url.Parse refuses, and a good one.
func rawFixture(in io.Reader, out io.Writer) {
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(lines.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{},"resources":{}},"serverInfo":{"name":"raw","version":"1"}}`
		case "tools/list":
			result = `{"tools":[]}`
		case "resources/list":
			result = `{"resources":[{"uri":"note://bad%zz","name":"bad"},{"uri":"note://good","name":"good"}]}`
		case "resources/templates/list":
			result = `{"resourceTemplates":[{"uriTemplate":"note://{bad","name":"bad"}]}`
		default:
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`+"\n", req.ID)
			continue
		}
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result)
	}
}
