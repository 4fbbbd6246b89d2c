//lint:file-ignore SA1019 sampling and roots are deprecated as of MCP 2026-07-28; the gateway passes them through for 2025-11-25.

package gateway_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// everythingRead is a gateway in front of server-everything over stdio, its
// tools all of read tier, so that they run at once.
func everythingRead(t *testing.T) *harness {
	t.Helper()
	dir := npmDir(t)
	return newHarness(t, func(c *gateway.Config) {
		c.Upstreams = []gateway.UpstreamConfig{{Name: "every", Command: []string{"node", npmServer(dir, "server-everything"), "stdio"}}}
		c.Rules = []gateway.TierRule{{Match: "every/*", Tier: gateway.TierRead}}
	})
}

// TestUpstreamRequests: server-everything's sampling, elicitation and
// roots requests, sent during a call through /mcp, reach the client of the
// call, and its answers reach the server; the elicitation is marked as the
// server's question.
func TestUpstreamRequests(t *testing.T) {
	t.Parallel()
	h := everythingRead(t)
	var mu sync.Mutex
	var asked []string
	cs := h.connect(clientOpts{version: "2025-11-25", roots: []*mcp.Root{{URI: "file:///work/project", Name: "project"}},
		elicit: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked = append(asked, r.Params.Message)
			mu.Unlock()
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada Lovelace"}}, nil
		},
		more: func(o *mcp.ClientOptions) {
			o.CreateMessageHandler = func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant",
					Content: &mcp.TextContent{Text: "the sampled answer"}}, nil
			}
			o.Capabilities = &mcp.ClientCapabilities{RootsV2: &mcp.RootCapabilities{ListChanged: true},
				Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
		},
	})

	// server-everything adds these tools once initialized, seeing what
	// the gateway declared.
	eventually(t, "the tools of requests", func() bool {
		names := toolNames(t, cs)
		return slices.Contains(names, "trigger-sampling-request") && slices.Contains(names, "get-roots-list")
	})
	res := call(t, cs, "trigger-sampling-request", map[string]any{"prompt": "say something"})
	if res.IsError || !strings.Contains(textOf(res), "the sampled answer") {
		t.Errorf("sampling: %q (error %v)", textOf(res), res.IsError)
	}

	res = call(t, cs, "trigger-elicitation-request", map[string]any{})
	if res.IsError || !strings.Contains(textOf(res), "Ada Lovelace") {
		t.Errorf("elicitation: %q (error %v)", textOf(res), res.IsError)
	}
	mu.Lock()
	if len(asked) != 1 || !strings.HasPrefix(asked[0], `Question from the MCP server "every" (not a countersign approval`) ||
		!strings.Contains(asked[0], "Please provide inputs") {
		t.Errorf("the elicitation shown: %q", asked)
	}
	mu.Unlock()
	if list, err := h.svc.List(t.Context(), h.alice, countersign.RequestFilter{}); err != nil || len(list) != 0 {
		t.Errorf("an upstream's elicitation made approval requests: %v %v", list, err)
	}

	res = call(t, cs, "get-roots-list", map[string]any{})
	if res.IsError || !strings.Contains(textOf(res), "file:///work/project") {
		t.Errorf("roots: %q (error %v)", textOf(res), res.IsError)
	}
}

// sampler answers sampling requests and counts them.
type sampler struct {
	mu    sync.Mutex
	asked int
}

func (s *sampler) handler(o *mcp.ClientOptions) {
	o.CreateMessageHandler = func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		s.mu.Lock()
		s.asked++
		s.mu.Unlock()
		return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
	}
}

func (s *sampler) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.asked
}

// TestUpstreamRequestsRefused: a request of an upstream goes to no client
// that did not declare the capability, none of 2026-07-28 (stateless), and
// none while a call of another key runs on the same upstream: it cannot be
// told which call it belongs to.
func TestUpstreamRequestsRefused(t *testing.T) {
	t.Parallel()
	h := everythingRead(t)
	wantRefused := func(res *mcp.CallToolResult, why string) {
		t.Helper()
		if !res.IsError || !strings.Contains(textOf(res), `countersign does not pass sampling/createMessage of the MCP server "every" on: `+why) {
			t.Errorf("result %q (error %v), want the refusal %q", textOf(res), res.IsError, why)
		}
	}
	var own sampler
	undeclared := h.connect(clientOpts{version: "2025-11-25",
		elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		}})
	eventually(t, "the tools of requests", func() bool { return slices.Contains(toolNames(t, undeclared), "trigger-sampling-request") })
	wantRefused(call(t, undeclared, "trigger-sampling-request", map[string]any{"prompt": "p"}), "the client did not declare the capability")

	stateless := h.connect(clientOpts{more: own.handler})
	wantRefused(call(t, stateless, "trigger-sampling-request", map[string]any{"prompt": "p"}), "the client's protocol has no requests from the server")

	// Another account's call runs on the upstream while the key's asks.
	// It runs for a second, which the key's call fits in unless the
	// machine is very slow: should the other call have ended before the
	// key's was answered, and the key's not be refused, the key's came
	// too late to tell, and both are made again, the other twice as long.
	var theirs sampler
	running := make(chan string, 64) // progress tokens
	other := h.connect(clientOpts{key: "outsider", version: "2025-11-25", more: theirs.handler,
		progress: func(r *mcp.ProgressNotificationClientRequest) { running <- fmt.Sprint(r.Params.ProgressToken) }})
	var mine *mcp.ClientSession
	var mineAsked *sampler
	for attempt, duration := 1, 1; ; attempt, duration = attempt+1, duration*2 {
		token := fmt.Sprint("long", attempt)
		long := make(chan error, 1)
		go func() {
			p := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": duration, "steps": 10}}
			p.SetProgressToken(token)
			_, err := other.CallTool(t.Context(), p)
			long <- err
		}()
		for <-running != token {
			// of an earlier attempt
		}
		mineAsked = &sampler{}
		mine = h.connect(clientOpts{version: "2025-11-25", more: mineAsked.handler})
		res := call(t, mine, "trigger-sampling-request", map[string]any{"prompt": "p"})
		const why = "several operations run on it, and what it sent cannot be told apart by operation"
		if !strings.Contains(textOf(res), why) && attempt < 4 {
			select {
			case err := <-long:
				if err != nil {
					t.Errorf("the other account's call: %v", err)
				}
				continue // too late to tell
			default:
			}
		}
		wantRefused(res, why)
		if err := <-long; err != nil {
			t.Errorf("the other account's call: %v", err)
		}
		break
	}
	if own.count() != 0 || mineAsked.count() != 0 || theirs.count() != 0 {
		t.Errorf("clients were asked to sample: %d, another account's %d", own.count()+mineAsked.count(), theirs.count())
	}
	// Alone on the upstream, the key's call is answered.
	if res := call(t, mine, "trigger-sampling-request", map[string]any{"prompt": "p"}); res.IsError || mineAsked.count() != 1 {
		t.Errorf("alone: %q, asked %d", textOf(res), mineAsked.count())
	}
}

// TestStdioUpstreamRoots: over stdio, the gateway declares to the upstream
// what its client declared; the client's roots/list_changed
// reaches the upstream, and the upstream's roots/list that follows, outside
// any call, is answered with the client's new roots.
func TestStdioUpstreamRoots(t *testing.T) {
	t.Parallel()
	dir := npmDir(t)
	cfg := gateway.NewConfig()
	cfg.Data = t.TempDir()
	quickStop(cfg)
	cfg.Upstreams = []gateway.UpstreamConfig{{Name: "every", Command: []string{"node", npmServer(dir, "server-everything"), "stdio"}}}
	cfg.Rules = []gateway.TierRule{{Match: "every/*", Tier: gateway.TierRead}}
	g, closeG, err := newStandaloneGateway(t, cfg, cfg.Data, confirm.StandaloneOptions{Log: testLogger(t), Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeG)
	g.Start(t.Context(), 20*time.Second)
	t.Cleanup(g.Close)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := g.Server().Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := clientOpts{roots: []*mcp.Root{{URI: "file:///first", Name: "first"}}}.client()
	cs, err := c.Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	eventually(t, "the roots tool", func() bool { return slices.Contains(toolNames(t, cs), "get-roots-list") })
	// The gateway declared to the upstream what its client declared: roots,
	// neither sampling nor elicitation.
	if names := toolNames(t, cs); slices.Contains(names, "trigger-sampling-request") || slices.Contains(names, "trigger-elicitation-request") {
		t.Errorf("the upstream was declared what the client did not declare: %v", names)
	}
	if res := call(t, cs, "get-roots-list", map[string]any{}); !strings.Contains(textOf(res), "file:///first") {
		t.Fatalf("roots: %q", textOf(res))
	}
	c.AddRoots(&mcp.Root{URI: "file:///second", Name: "second"})
	eventually(t, "the new roots", func() bool {
		return strings.Contains(textOf(call(t, cs, "get-roots-list", map[string]any{})), "file:///second")
	})
}
