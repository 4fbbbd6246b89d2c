//lint:file-ignore SA1019 logging, sampling and roots are deprecated as of MCP 2026-07-28; the gateway passes them through for 2025-11-25.

package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askingHarness is the harness with the fixture and addAsking as its
// upstream, over stdio or HTTP.
func askingHarness(t *testing.T, over string) *harness {
	return newHarness(t, func(c *gateway.Config) {
		up := &c.Upstreams[0]
		if over == "stdio" {
			up.Env["FIXTURE_ASK"] = "1"
			return
		}
		s := fixtureServer(up.Name, up.Env["FIXTURE_LOG"])
		addAsking(s, up.Env["FIXTURE_LOG"])
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		web := httptest.NewServer(h)
		t.Cleanup(web.Close)
		*up = gateway.UpstreamConfig{Name: up.Name, URL: web.URL}
	})
}

// witness is a client of /mcp (2025-11-25) that declares sampling,
// elicitation and roots, answers each with its own name in the answer,
// and records what of an upstream reaches it.
type witness struct {
	cs       *mcp.ClientSession
	progress chan string
	touched  chan struct{}
	mu       sync.Mutex
	seen     []string
}

// settled is the log message of the fixture's tool touch that settle
// waits for; touch's other message (at debug) is not recorded either.
const settled, touchDebug = "readme touched", "debug detail"

// upstreamMethods are what a witness records.
var upstreamMethods = map[string]bool{"notifications/message": true, "sampling/createMessage": true,
	"elicitation/create": true, "roots/list": true}

func newWitness(t *testing.T, h *harness, key, name string) *witness {
	t.Helper()
	w := &witness{progress: make(chan string, 64), touched: make(chan struct{}, 1)}
	c := clientOpts{version: "2025-11-25", roots: []*mcp.Root{{URI: "file:///" + name + "/workspace", Name: name}},
		elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": name + "-answer"}}, nil
		},
		progress: func(r *mcp.ProgressNotificationClientRequest) { w.progress <- fmt.Sprint(r.Params.ProgressToken) },
		more: func(o *mcp.ClientOptions) {
			o.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: name + "-answer"}}, nil
			}
			o.LoggingMessageHandler = func(context.Context, *mcp.LoggingMessageRequest) {}
			o.Capabilities = &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true},
				Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
		}}.client()
	c.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if upstreamMethods[method] {
				w.saw(method, req)
			}
			return next(ctx, method, req)
		}
	})
	tr := &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", HTTPClient: bearer(h.keys[key])}
	cs, err := c.Connect(h.ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect %s: %v", key, err)
	}
	t.Cleanup(func() { cs.Close() })
	w.cs = cs
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	return w
}

// saw records a message of an upstream: its method, and the log's data or
// the request's text.
func (w *witness) saw(method string, req mcp.Request) {
	var what string
	switch r := req.(type) {
	case *mcp.LoggingMessageRequest:
		what = fmt.Sprint(r.Params.Data)
		switch what {
		case settled:
			w.touched <- struct{}{}
			return
		case touchDebug:
			return
		}
	case *mcp.CreateMessageRequest:
		what = textContent(r.Params.Messages[0].Content)
	case *mcp.CreateMessageWithToolsRequest:
		what = textContent(r.Params.Messages[0].Content[0])
	case *mcp.ElicitRequest:
		what = r.Params.Message
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, strings.TrimSpace(method+" "+what))
}

// settle returns once the client handled every log message sent to it
// before now: it handles them in their order, and the one of the tool
// touch, called now, comes after them.
func (w *witness) settle(t *testing.T) {
	t.Helper()
	wantRan(t, call(t, w.cs, "touch", nil), "touched")
	testutil.Receive(t, w.touched, "the log message of touch")
}

func (w *witness) seenNow() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seen)
}

// startWait calls the fixture's tool wait and returns once the upstream
// runs it; the channel gets its result.
func (w *witness) startWait(t *testing.T) chan string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		p := &mcp.CallToolParams{Name: "wait", Arguments: map[string]any{}}
		p.SetProgressToken("wait")
		res, err := w.cs.CallTool(t.Context(), p)
		if err != nil {
			done <- err.Error()
			return
		}
		done <- textOf(res)
	}()
	for tok := range w.progress {
		if tok == "wait" {
			break
		}
	}
	return done
}

// release ends the waiting call of startWait.
func (w *witness) release(t *testing.T, waited chan string) {
	t.Helper()
	wantRan(t, call(t, w.cs, "release", nil), "released them")
	if got := <-waited; got != "released" {
		t.Fatalf("wait: %q", got)
	}
}

// askAll reads note://ask/<what>, gets the prompt ask and completes its
// argument with what, and returns what the upstream answered to each.
func (w *witness) askAll(t *testing.T, what string) []string {
	t.Helper()
	read, err := w.cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "note://ask/" + what})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	prompt, err := w.cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "ask", Arguments: map[string]string{"what": what}})
	if err != nil {
		t.Fatalf("prompt: %v", err)
	}
	done, err := w.cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "ask"},
		Argument: mcp.CompleteParamsArgument{Name: "what", Value: what}})
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	return []string{read.Contents[0].Text, textContent(prompt.Messages[0].Content), strings.Join(done.Completion.Values, ",")}
}

// asked is what a witness records of askAround about what, answered.
func asked(what string) []string {
	return []string{"notifications/message asked about " + what, "sampling/createMessage about " + what,
		`elicitation/create Question from the MCP server "notes" (not a countersign approval; your answer goes to that server and approves nothing): about ` + what,
		"roots/list"}
}

// TestUpstreamMessagesStayWithTheirOperation: while a call of one account
// waits on an upstream, another account's key reads a resource, gets a
// prompt and completes an argument there, and the upstream logs, samples,
// elicits and lists roots during each. None of it reaches the waiting
// call's client, nor does that client's answer come back to the other.
// Over stdio nothing tells which operation it belongs to, and it goes to
// nobody, counted; over HTTP the stream of each request tells, and it
// goes to its own client. Alone on the upstream, an operation gets its
// own over stdio too.
func TestUpstreamMessagesStayWithTheirOperation(t *testing.T) {
	t.Parallel()
	for _, over := range []string{"stdio", "http"} {
		t.Run(over, func(t *testing.T) {
			t.Parallel()
			h := askingHarness(t, over)
			a := newWitness(t, h, "agent", "A")
			b := newWitness(t, h, "outsider", "B")
			before := h.gw.Dropped()
			waited := a.startWait(t)
			got := b.askAll(t, "B-secret")
			a.release(t, waited)
			a.settle(t)
			b.settle(t)

			if seen := a.seenNow(); len(seen) != 0 {
				t.Errorf("the waiting call's client got the other account's %q", seen)
			}
			own := "sampled B-answer; elicited B-answer; roots file:///B/workspace"
			want, wantSeen, dropped := own, slices.Concat(asked("B-secret"), asked("B-secret"), asked("B-secret")), uint64(0)
			if over == "stdio" {
				want, wantSeen, dropped = "sampling refused; elicitation refused; roots refused", nil, 12
			}
			for i, op := range []string{"read", "prompt", "completion"} {
				if got[i] != want {
					t.Errorf("%s: the upstream got %q, want %q", op, got[i], want)
				}
			}
			if seen := b.seenNow(); !slices.Equal(sorted(seen), sorted(wantSeen)) {
				t.Errorf("the asking client got %q, want %q", seen, wantSeen)
			}
			if n := h.gw.Dropped() - before; n != dropped {
				t.Errorf("%d messages and requests dropped, want %d", n, dropped)
			}

			// Alone on the upstream, each operation's are its client's.
			if got := b.askAll(t, "B-alone"); !slices.Equal(got, []string{own, own, own}) {
				t.Errorf("alone: the upstream got %q, want %q each time", got, own)
			}
			a.settle(t)
			if seen := a.seenNow(); len(seen) != 0 {
				t.Errorf("alone: the other client got %q", seen)
			}
		})
	}
}

// TestCancelledOperationGoesToNobody: a key cancels a call, the upstream
// works on, and once another account's call waits there it logs and asks
// to sample for the cancelled one: that goes to nobody (counted), neither
// to the waiting call's client nor to the one that cancelled.
func TestCancelledOperationGoesToNobody(t *testing.T) {
	t.Parallel()
	for _, over := range []string{"stdio", "http"} {
		t.Run(over, func(t *testing.T) {
			t.Parallel()
			h := askingHarness(t, over)
			a := newWitness(t, h, "agent", "A")
			b := newWitness(t, h, "outsider", "B")
			before := h.gw.Dropped()

			ctx, cancel := context.WithCancel(t.Context())
			lingered := make(chan error, 1)
			go func() {
				p := &mcp.CallToolParams{Name: "linger", Arguments: map[string]any{"what": "B-secret"}}
				p.SetProgressToken("linger")
				_, err := b.cs.CallTool(ctx, p)
				lingered <- err
			}()
			for tok := range b.progress {
				if tok == "linger" {
					break
				}
			}
			cancel()
			if err := <-lingered; !errors.Is(err, context.Canceled) {
				t.Fatalf("the cancelled call: %v", err)
			}
			waited := a.startWait(t)
			eventually(t, "the upstream to sample for the cancelled call", func() bool { return lingerLine(t, h.logFile) != "" })
			a.release(t, waited)

			if got := lingerLine(t, h.logFile); got != "linger B-secret sampled: refused" {
				t.Errorf("the upstream's sampling for the cancelled call: %q", got)
			}
			if seen := a.seenNow(); len(seen) != 0 {
				t.Errorf("the waiting call's client got the cancelled call's %q", seen)
			}
			if seen := b.seenNow(); len(seen) != 0 {
				t.Errorf("the client that cancelled got %q", seen)
			}
			if n := h.gw.Dropped() - before; n != 2 {
				t.Errorf("%d messages and requests dropped, want 2 (the log and the sampling)", n)
			}
		})
	}
}

// lingerLine is the line the fixture's tool linger wrote to its log, or "".
func lingerLine(t *testing.T, logFile string) string {
	for _, l := range calls(t, logFile) {
		if strings.HasPrefix(l, "linger ") {
			return l
		}
	}
	return ""
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
