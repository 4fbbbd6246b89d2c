package gateway_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestHoldWarning: the default hold ends before the 60 s request timeout of
// common clients; a longer one is warned about when the gateway starts.
func TestHoldWarning(t *testing.T) {
	t.Parallel()
	if gateway.DefaultHold >= 55*time.Second {
		t.Fatalf("the default hold %v reaches common clients' 60 s timeout", gateway.DefaultHold)
	}
	for hold, warned := range map[time.Duration]bool{gateway.DefaultHold: false, 55 * time.Second: false, 90 * time.Second: true} {
		var logs testutil.LogBuffer
		cfg := gateway.NewConfig()
		cfg.Hold = hold
		if _, err := confirm.NewForClient(cfg, clientNowhere(), slog.New(slog.NewTextHandler(&logs, nil)), io.Discard); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "longer than the 60 s request timeout"); got != warned {
			t.Errorf("hold %v: warned %v, want %v: %s", hold, got, warned, logs.String())
		}
	}
}

// TestHoldProgressFromStart: a held retry with a progress token hears at
// once what it waits for, before the human decides; then it runs.
func TestHoldProgressFromStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) { c.Hold = 5 * time.Second })
	var mu sync.Mutex
	var msgs []string
	waiting := make(chan struct{}, 1)
	cs := h.connect(clientOpts{progress: func(r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		msgs = append(msgs, r.Params.Message)
		mu.Unlock()
		select {
		case waiting <- struct{}{}:
		default:
		}
	}})
	args := map[string]any{"id": "held"}
	wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
	r := h.pending("delete_note")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "delete_note", Arguments: args}
		params.SetProgressToken("held")
		res, err := cs.CallTool(context.Background(), params)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	testutil.Receive(t, waiting, "progress while the call was held")
	h.decide(r.ID, countersign.DecisionApprove)
	wantRan(t, <-done, "deleted held")
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(msgs[0], "waiting for a human to approve request "+countersign.FormatReference(r.Reference)) {
		t.Errorf("progress %q", msgs)
	}
}

// TestElicitUnanswerable: a legacy client that declared elicitation but
// cannot answer it (no handler: -32601; a handler that fails) gets
// approval_pending, not an error; the request stays for the inbox and the
// retry takes its approval. Standalone, the local page is opened instead.
func TestElicitUnanswerable(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for name, o := range map[string]clientOpts{
		"no handler": {version: "2025-11-25", more: func(o *mcp.ClientOptions) {
			o.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
		}},
		"a failing handler": {version: "2025-11-25", elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, errors.New("no one to ask")
		}},
	} {
		cs := h.connect(o)
		args := map[string]any{"id": name}
		text := wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
		r := h.pending("delete_note")
		if !strings.Contains(text, h.base+"/approvals/"+r.ID) {
			t.Errorf("%s: %q", name, text)
		}
		h.decide(r.ID, countersign.DecisionApprove)
		wantRan(t, call(t, cs, "delete_note", args), "deleted "+name)
	}

	s := newStandalone(t)
	cs := stdioConnect(t, s.g, clientOpts{version: "2025-11-25", elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return nil, errors.New("no one to ask")
	}})
	wantStatus(t, call(t, cs, "delete_note", map[string]any{"id": "local"}), "approval_pending")
	if b := openPage(t, s.lastLink(t)); !strings.Contains(b.post(t, "approve"), "Approved once") {
		t.Fatal("the local page did not approve")
	}
	wantRan(t, call(t, cs, "delete_note", map[string]any{"id": "local"}), "deleted local")
}

// TestElicitUnanswered: a legacy client that leaves the elicitation
// unanswered has it withdrawn after the hold and gets approval_pending,
// before its own request timeout; the retry takes the approval.
func TestElicitUnanswered(t *testing.T) {
	// Not in parallel: the hold's withdrawal is timed from the call's
	// start, and a machine so loaded that the request takes the whole hold
	// to be made never withdraws the elicitation.
	h := newHarness(t, func(c *gateway.Config) { c.Upstreams = nil })
	g, logFile := h.stdioGateway("agent") // hold 300 ms
	withdrawn := make(chan error, 1)
	cs := stdioConnect(t, g, clientOpts{version: "2025-11-25", elicit: func(ctx context.Context, _ *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		select { // a user who never answers
		case <-ctx.Done():
			withdrawn <- ctx.Err()
			return nil, ctx.Err()
		case <-time.After(20 * time.Second):
			// Not withdrawn: the select below fails the test. An error,
			// not nil, nil, which the SDK does not take.
			return nil, errors.New("the elicitation was never withdrawn")
		}
	}})
	args := map[string]any{"id": "unanswered"}
	text := wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
	r := h.pending("delete_note")
	if !strings.Contains(text, h.base+"/approvals/"+r.ID) {
		t.Errorf("%q", text)
	}
	testutil.Receive(t, withdrawn, "the elicitation's withdrawal")
	h.decide(r.ID, countersign.DecisionApprove)
	// The retry takes the approval, which makes asking moot.
	wantRan(t, call(t, cs, "delete_note", args), "deleted unanswered")
	wantCalls(t, logFile, "delete_note unanswered")
}
