//lint:file-ignore SA1019 logging is deprecated as of MCP 2026-07-28; the gateway passes it through for upstreams and clients of 2025-11-25.

package gateway_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixtureLog logs as the fixture's tool touch does.
func fixtureLog(ctx context.Context, ss *mcp.ServerSession, level, data string) {
	ss.Log(ctx, &mcp.LoggingMessageParams{Level: mcp.LoggingLevel(level), Logger: "touch", Data: data})
}

// TestStdioLoggingAndCompletions: over stdio, the upstream's log reaches the
// client at the level it set, which reaches the upstream; completions of a
// prompt's argument come from its upstream; the capabilities announce what
// is passed through. /mcp announces no logging: an upstream's log cannot be
// told apart by key.
func TestStdioLoggingAndCompletions(t *testing.T) {
	cfg := gateway.NewConfig()
	cfg.Upstreams = []gateway.UpstreamConfig{fixtureUpstream(t, "notes", "")}
	g, err := gateway.NewForClient(cfg, clientNowhere(), testLogger(t), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	g.Start(t.Context(), 20*time.Second)
	t.Cleanup(g.Close)
	logs := make(chan string, 10)
	cs := stdioConnect(t, g, clientOpts{more: func(o *mcp.ClientOptions) {
		o.LoggingMessageHandler = func(_ context.Context, r *mcp.LoggingMessageRequest) {
			logs <- fmt.Sprintf("%s %s %v", r.Params.Level, r.Params.Logger, r.Params.Data)
		}
	}})
	caps := cs.InitializeResult().Capabilities
	if caps.Logging == nil || caps.Completions == nil || caps.Prompts == nil || caps.Resources == nil {
		t.Fatalf("capabilities %+v", caps)
	}
	if err := cs.SetLoggingLevel(t.Context(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	wantRan(t, call(t, cs, "touch", nil), "touched")
	if got := <-logs; got != "info notes/touch readme touched" {
		t.Errorf("log %q", got)
	}
	select {
	case got := <-logs:
		t.Errorf("a debug message passed a level of info: %q", got)
	case <-time.After(200 * time.Millisecond):
	}
	c, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "name", Value: "al"}})
	if err != nil || strings.Join(c.Completion.Values, ",") != "alice,albert" {
		t.Errorf("complete greet: %v %v", c, err)
	}

	h := newHarness(t, nil)
	if caps := h.connect(clientOpts{}).InitializeResult().Capabilities; caps.Logging != nil || caps.Completions == nil {
		t.Errorf("/mcp capabilities %+v", caps)
	}
}
