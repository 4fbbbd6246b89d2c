//lint:file-ignore SA1019 logging, sampling and roots are deprecated as of MCP 2026-07-28; the fixture uses them as upstreams of 2025-11-25 do.

package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addAsking gives the fixture what sends messages and requests to the
// client during an operation that is not a tool call: the template
// note://ask/{what}, the prompt ask and the completion of its argument
// what each log "asked about <what>", then ask the client to sample,
// elicit and list its roots, and answer with what they got. The tools wait
// and release hold a call until another releases it; linger, once
// cancelled, keeps working until a call waits, then logs and asks the
// client to sample outside any request, and writes what it got to the
// fixture's log.
func addAsking(s *mcp.Server, logFile string) {
	g := &gate{open: make(chan struct{}), waiting: make(chan struct{})}
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "note://ask/{what}", Name: "ask", MIMEType: "text/plain"},
		func(ctx context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			got := askAround(ctx, r.Session, strings.TrimPrefix(r.Params.URI, "note://ask/"))
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, MIMEType: "text/plain", Text: got}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "ask", Arguments: []*mcp.PromptArgument{{Name: "what", Required: true}}},
		func(ctx context.Context, r *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			got := askAround(ctx, r.Session, r.Params.Arguments["what"])
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: got}}}}, nil
		})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			r, ok := req.(*mcp.CompleteRequest)
			if !ok || r.Params.Ref.Type != "ref/prompt" || r.Params.Ref.Name != "ask" {
				return next(ctx, method, req)
			}
			got := askAround(ctx, r.Session, r.Params.Argument.Value)
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{got}, Total: 1}}, nil
		}
	})
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	s.AddTool(&mcp.Tool{Name: "wait", Description: "Waits for release.", InputSchema: objectSchema(), Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			open := g.arrive()
			if tok := req.Params.GetProgressToken(); tok != nil {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "waiting"})
			}
			select {
			case <-open:
				return text("released"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	s.AddTool(&mcp.Tool{Name: "release", Description: "Releases the calls that wait.", InputSchema: objectSchema(), Annotations: readOnly},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			g.release()
			return text("released them"), nil
		})
	s.AddTool(&mcp.Tool{Name: "linger", Description: "Works on after it is cancelled.", InputSchema: objectSchema("what"), Annotations: readOnly},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			what := fmt.Sprint(argsOf(req)["what"])
			if tok := req.Params.GetProgressToken(); tok != nil {
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: "lingering"})
			}
			<-ctx.Done()
			select {
			case <-g.someoneWaits():
			case <-time.After(20 * time.Second): // the test failed: do not hold its server
				return nil, errors.New("nobody waited")
			}
			bg := context.Background() // outside any request
			req.Session.Log(bg, &mcp.LoggingMessageParams{Level: "info", Logger: "linger", Data: "lingering on " + what})
			got := "refused"
			if res, err := req.Session.CreateMessage(bg, samplingAbout(what)); err == nil {
				got = textContent(res.Content)
			}
			record(logFile, "linger %s sampled: %s", what, got)
			return text("lingered"), nil
		})
}

// gate holds the calls of the fixture's tool wait until release.
type gate struct {
	mu      sync.Mutex
	open    chan struct{} // closed by release
	waiting chan struct{} // closed when a call waits
}

// arrive counts a call that waits, and returns what release closes.
func (g *gate) arrive() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.waiting:
	default:
		close(g.waiting)
	}
	return g.open
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.open)
	g.open, g.waiting = make(chan struct{}), make(chan struct{})
}

// someoneWaits is closed once a call waits.
func (g *gate) someoneWaits() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

func samplingAbout(what string) *mcp.CreateMessageParams {
	return &mcp.CreateMessageParams{MaxTokens: 16,
		Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "about " + what}}}}
}

func textContent(c mcp.Content) string {
	if tc, ok := c.(*mcp.TextContent); ok {
		return tc.Text
	}
	return fmt.Sprintf("%T", c)
}

// askAround logs, and asks the client of the session to sample, elicit and
// list its roots, about what; it returns what each gave.
func askAround(ctx context.Context, ss *mcp.ServerSession, what string) string {
	ss.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "ask", Data: "asked about " + what})
	var out []string
	if res, err := ss.CreateMessage(ctx, samplingAbout(what)); err != nil {
		out = append(out, "sampling refused")
	} else {
		out = append(out, "sampled "+textContent(res.Content))
	}
	schema := map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}
	if res, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: "about " + what, RequestedSchema: schema}); err != nil {
		out = append(out, "elicitation refused")
	} else {
		out = append(out, fmt.Sprintf("elicited %v", res.Content["answer"]))
	}
	if res, err := ss.ListRoots(ctx, nil); err != nil {
		out = append(out, "roots refused")
	} else {
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		out = append(out, "roots "+strings.Join(uris, " "))
	}
	return strings.Join(out, "; ")
}
