package gateway_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/limit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// deepArgs are arguments nesting depth levels in all, with an id.
func deepArgs(depth int, inner string) json.RawMessage {
	return json.RawMessage(`{"id":"deep","deep":` + strings.Repeat("[", depth-1) + inner + strings.Repeat("]", depth-1) + `}`)
}

// TestArgumentsDepthLimit: arguments that make a call nest deeper than the
// limit (its message's params and arguments counted) are refused as
// invalid params naming the limit, for every tier, before anything runs or
// is asked; at the limit they run or are asked as usual, with a bounded
// preview.
func TestArgumentsDepthLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(clientOpts{})
	at := limit.MaxJSONDepth - 2
	for _, tool := range []string{"read_note", "delete_note"} {
		// Deeper than 1000 levels the MCP library refuses the message
		// itself; the server refuses it before (see internal/server).
		for _, depth := range []int{at + 1, 900} {
			_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: deepArgs(depth, "")})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams ||
				!strings.Contains(rpcErr.Message, "deeper than 62 levels: a call may nest at most 64") {
				t.Errorf("%s with arguments %d deep: %v, want invalid params naming the limit", tool, depth, err)
			}
		}
	}
	if list, err := h.svc.List(h.ctx, h.alice, countersign.RequestFilter{}); err != nil || len(list) != 0 {
		t.Fatalf("refused calls left requests: %v, %v", list, err)
	}
	wantCalls(t, h.logFile)

	wantRan(t, call(t, cs, "read_note", nil), "note <nil> from notes")
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "read_note", Arguments: deepArgs(at, "")})
	if err != nil || res.IsError {
		t.Fatalf("read_note at the limit: %v %v", err, res)
	}
	wide := deepArgs(at, strings.Repeat("1,", 15000)+"1")
	res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "delete_note", Arguments: wide})
	if err != nil {
		t.Fatalf("delete_note at the limit: %v", err)
	}
	wantStatus(t, res, "approval_pending")
	r := h.pending("delete_note")
	if len(r.Preview) > 12<<10 || !strings.Contains(r.Preview, "more bytes of arguments not shown") {
		t.Errorf("preview of the widest arguments: %d bytes:\n%.300s", len(r.Preview), r.Preview)
	}
}
