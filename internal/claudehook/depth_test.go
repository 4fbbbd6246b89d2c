package claudehook

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/limit"
)

// nestedInput is a PreToolUse input of an MCP tool whose tool_input makes
// the whole input nest depth levels, with inner at the deepest.
func nestedInput(project string, depth int, inner string) []byte {
	arrays := depth - 2 // the input's object and tool_input's
	return []byte(fmt.Sprintf(`{"session_id":"s","cwd":%q,"hook_event_name":"PreToolUse","tool_name":"mcp__notes__delete",`+
		`"tool_input":{"ids":%s%s%s},"tool_use_id":"t"}`, project, strings.Repeat("[", arrays), inner, strings.Repeat("]", arrays)))
}

// TestInputDepthLimit: an input nested deeper than the limit is blocked,
// with a reason that names the limit, before anything is decoded or asked;
// an input at the limit is asked about, and the server takes it.
func TestInputDepthLimit(t *testing.T) {
	w := newWorld(t)
	srv := newTestServer(t)
	w.env["COUNTERSIGN_URL"], w.env["COUNTERSIGN_KEY"] = srv.URL, srv.agentKey
	w.writeConfig("[hook]\nask = [\"mcp__*\"]\n")
	run := func(input []byte) (int, string) {
		var out, errs bytes.Buffer
		code := Run(context.Background(), &Env{Connect: connect, Stdin: bytes.NewReader(input), Stdout: &out, Stderr: &errs,
			Getenv: w.getenv, Cwd: w.project, Start: time.Now(), Load: w.load()})
		return code, out.String() + errs.String()
	}
	for _, depth := range []int{limit.MaxJSONDepth + 1, 9000} {
		code, out := run(nestedInput(w.project, depth, ""))
		if code != ExitBlock || !strings.Contains(out, "the hook input nests objects and arrays deeper than the limit of 64 levels; the call is blocked") {
			t.Errorf("input %d deep: exit %d: %s", depth, code, out)
		}
	}
	if got := srv.requests(t); len(got) != 0 {
		t.Fatalf("an input nested too deep reached the server: %d requests", len(got))
	}
	go func() {
		if r := srv.pending(t); r != nil {
			srv.decide(t, r, client.Decision{Decision: "approve"})
		}
	}()
	code, out := run(nestedInput(w.project, limit.MaxJSONDepth, `"n1"`))
	if code != ExitOK || !strings.Contains(out, `"permissionDecision":"allow"`) {
		t.Fatalf("input at the limit: exit %d: %s", code, out)
	}
	if r := srv.requests(t)[0]; !strings.Contains(string(r.Arguments), strings.Repeat("[", limit.MaxJSONDepth-2)+`"n1"`) {
		t.Errorf("arguments at the limit stored as %s", r.Arguments)
	}
}

// TestPreviewWideDeepInput: the preview of the widest tool input at the
// deepest level stays within its bound and counts the lines it leaves out.
func TestPreviewWideDeepInput(t *testing.T) {
	w := newWorld(t)
	data := nestedInput(w.project, limit.MaxJSONDepth, strings.Repeat("1,", 200000)+"1")
	in, call, err := parseCall(data, w.project, w.project)
	if err != nil {
		t.Fatal(err)
	}
	v := w.policy().Decide(context.Background(), call)
	// What building the preview allocates, as a bound of its work: the
	// whole indented rendering would be some 25 MB.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := preview(in, call, v)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("building the preview allocated %d bytes", alloc)
	}
	want := fmt.Sprintf("… %d more lines", limit.IndentLines(in.ToolInput)-maxPreviewLines)
	if len(got) > maxPreview || !strings.Contains(got, want) {
		t.Errorf("preview of %d bytes, want at most %d ending %q:\n…%s", len(got), maxPreview, want, got[max(0, len(got)-200):])
	}
}
