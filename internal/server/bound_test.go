package server_test

import (
	"encoding/json"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
)

// TestWorstRequestBounded: the requests that render largest within the
// limits are stored with a preview and an arguments text within their
// bounds, and their page, the inbox and the API's answer stay small.
func TestWorstRequestBounded(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	// Every ' is &#39; on a page, five times its size, and one byte in
	// the body.
	quotes := strings.Repeat(`'`, 16<<10)
	reasons := make([]string, 50)
	for i := range reasons {
		reasons[i] = strings.Repeat(`'`, 500)
	}
	for name, in := range map[string]client.CreateInput{
		"default preview": {Action: "x", Arguments: []byte(worstArguments())},
		"own preview":     {Action: "y", Arguments: []byte(worstArguments()), Preview: "p"},
		"quotes":          {Action: strings.Repeat(`'`, 4096), Preview: quotes, RiskReasons: reasons},
		// A call shown by its arguments as fields: deep, wide, and a
		// page of quotes.
		"mcp call deep":       {Kind: "mcp", Tier: "write", Action: "x", Arguments: []byte(worstArguments()), Preview: quotes},
		"mcp call wide":       {Kind: "mcp", Tier: "write", Action: "x", Arguments: []byte(`{"a":[` + strings.Repeat(`{"b":[1,{}]},`, 2400) + `1]}`), Preview: quotes},
		"mcp call quotes":     {Kind: "mcp", Tier: "write", Action: "x", Arguments: []byte(`{"q":"` + strings.Repeat(`'`, 30<<10) + `"}`), Preview: quotes},
		"claude write quotes": {Kind: "tool", Action: "Write", Arguments: []byte(`{"file_path":"/x","content":"` + strings.Repeat(`'`, 30<<10) + `"}`), Preview: quotes},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.create(e.agentA, in)
			stored := e.request(r.ID)
			if len(stored.Preview) > approval.MaxPreview || len(stored.ArgumentsText) > approval.MaxArgumentsText {
				t.Errorf("stored preview %d bytes, arguments text %d", len(stored.Preview), len(stored.ArgumentsText))
			}
			if in.Arguments != nil && !strings.Contains(stored.ArgumentsText, "\n… (truncated, ") {
				t.Errorf("the arguments text has no mark of its cut: …%q", stored.ArgumentsText[len(stored.ArgumentsText)-60:])
			}
			page := e.get("/approvals/"+r.ID, e.as(s.id)).want(t, "request page", http.StatusOK).body
			if len(page) > 256<<10 {
				t.Errorf("request page is %d bytes", len(page))
			}
			if stored.ArgumentsText != "" && in.Kind != "mcp" && in.Kind != "tool" && !strings.Contains(page, html.EscapeString(stored.ArgumentsText)) {
				t.Errorf("the page does not show the stored arguments text")
			}
			inbox := e.get("/approvals", e.as(s.id)).want(t, "inbox", http.StatusOK).body
			if len(inbox) > 64<<10 {
				t.Errorf("inbox of one request is %d bytes", len(inbox))
			}
			t.Logf("stored preview %d bytes, arguments text %d; page %d bytes, inbox %d", len(stored.Preview), len(stored.ArgumentsText), len(page), len(inbox))
			if _, err := e.agentA.Cancel(e.Ctx, r.ID); err != nil {
				t.Fatalf("cancel: %v", err)
			}
		})
	}
}

// TestInboxRowsBounded: an inbox row shows the beginning of a long preview
// and action and the first reasons, each with a mark of the cut.
func TestInboxRowsBounded(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	reasons := []string{"r1", "r2", "r3", "r4", "r5", "r6", "r7"}
	e.create(e.agentA, client.CreateInput{Action: strings.Repeat("a", 4000), Preview: strings.Repeat("p", 16<<10), RiskReasons: reasons})
	e.create(e.agentA, client.CreateInput{Action: "lines", Preview: "1\n2\n3\n4\n5\n6\n7\n8"})
	inbox := e.get("/approvals", e.as(s.id)).want(t, "inbox", http.StatusOK).body
	// The preview's 16 KiB less the 990 bytes shown.
	for _, want := range []string{"\n… (truncated, 15394 bytes more)", "1\n2\n3\n4\n5\n6\n…</pre>", "<li>r5</li><li>… and 2 more</li>"} {
		if !strings.Contains(inbox, html.EscapeString(want)) && !strings.Contains(inbox, want) {
			t.Errorf("the inbox does not show %q", want)
		}
	}
	if strings.Contains(inbox, "<li>r6</li>") || strings.Contains(inbox, strings.Repeat("p", 1100)) {
		t.Errorf("the inbox shows more than a row's bounds")
	}
}

// TestArgumentsTextShownAsStored: a page shows the arguments text stored
// with the request and renders nothing again; only a request stored
// before the text existed (none stored) is rendered, bounded.
func TestArgumentsTextShownAsStored(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	s := e.signIn("alice")
	first := e.request(e.create(e.agentA, ibTool("s1")).ID)
	for _, tc := range []struct{ stored, want string }{
		{"the rendering stored at create", "the rendering stored at create"},
		{"", "{\n  &#34;path&#34;: &#34;/tmp/old&#34;\n}"},
	} {
		r := *first
		r.ID, r.Reference, r.Status = countersign.NewOrderedID("req_"), countersign.NewReference(), countersign.StatusDenied
		r.Arguments = json.RawMessage(`{"path":"/tmp/old"}`)
		r.ArgsHash, r.ArgumentsText = approval.Hash(r.Arguments), tc.stored
		if _, _, err := e.Store.CreateRequest(e.Ctx, &r, 0, r.CreatedAt, countersign.AuditEvent{Event: "created", Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		page := e.get("/approvals/"+r.ID, e.as(s.id)).want(t, "request page", http.StatusOK).body
		if !strings.Contains(page, "<pre>"+tc.want+"</pre>") {
			t.Errorf("stored %q: the page does not show %q:\n%s", tc.stored, tc.want, page)
		}
	}
}
