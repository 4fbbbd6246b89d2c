package approval_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/limit"
)

// nestedArgs is an object holding arrays nested to depth levels in all.
func nestedArgs(depth int) json.RawMessage {
	return json.RawMessage(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
}

// TestCreateDepthLimit: arguments nested deeper than the limit are refused
// with a message that names it, before anything is stored; at the limit
// they are taken.
func TestCreateDepthLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	before := e.auditCount()
	_, _, err := e.svc.Create(e.ctx, e.keyA, countersign.CreateInput{Action: "deep", Arguments: nestedArgs(limit.MaxJSONDepth + 1)})
	wantCode(t, "too deep", err, countersign.EINVALID)
	if msg := countersign.ErrorMessage(err); !strings.Contains(msg, "64 levels") {
		t.Errorf("message %q does not name the limit", msg)
	}
	if e.auditCount() != before {
		t.Errorf("a refused request left an audit entry")
	}
	_, err = e.svc.TakeApproval(e.ctx, e.keyA, countersign.CreateInput{Action: "deep", Arguments: nestedArgs(9000)})
	wantCode(t, "take too deep", err, countersign.EINVALID)

	r := e.create(e.keyA, countersign.CreateInput{Action: "deep", Arguments: nestedArgs(limit.MaxJSONDepth)})
	if !strings.Contains(r.ArgumentsText, strings.Repeat(" ", 2*(limit.MaxJSONDepth-1))+"[]") {
		t.Errorf("arguments text of depth %d = %q", limit.MaxJSONDepth, r.ArgumentsText)
	}
}

// TestCreateWorstArguments: the arguments that render largest within the
// limits (every element at the deepest level, on a line of its own) give a
// default preview and an arguments text within their bounds, each ending
// in a mark of what was left out, and stored as given.
func TestCreateWorstArguments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	d := limit.MaxJSONDepth - 1
	args := `{"a":` + strings.Repeat("[", d-1) + "[" + strings.Repeat("1,", 15<<10) + "1]" + strings.Repeat("]", d-1) + `}`
	r := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindMCP, Action: "x", Arguments: json.RawMessage(args)})
	for name, text := range map[string]string{"preview": r.Preview, "arguments text": r.ArgumentsText} {
		if len(text) > 16<<10 || !strings.Contains(text, "\n… (truncated, ") {
			t.Errorf("%s: %d bytes, marked %v; want at most 16 KiB with the mark", name, len(text), strings.Contains(text, "(truncated"))
		}
	}
	if got := e.stored(r.ID); got.ArgumentsText != r.ArgumentsText || got.Preview != r.Preview {
		t.Errorf("stored arguments text or preview differ from those of the create")
	}
	if r.PreviewHash != sha(r.Preview) {
		t.Errorf("the preview hash is not of the preview shown")
	}
	// A small call is shown whole.
	s := e.create(e.keyA, countersign.CreateInput{Action: "y", Arguments: json.RawMessage(`{"b":[1,{}],"a":"<&>"}`)})
	if want := "{\n  \"a\": \"<&>\",\n  \"b\": [\n    1,\n    {}\n  ]\n}"; s.ArgumentsText != want || s.Preview != "y\n"+want {
		t.Errorf("arguments text %q, preview %q; want %q", s.ArgumentsText, s.Preview, want)
	}
	if g := e.create(e.keyA, countersign.CreateInput{Action: "z"}); g.ArgumentsText != "" {
		t.Errorf("no arguments: arguments text %q", g.ArgumentsText)
	}
}
