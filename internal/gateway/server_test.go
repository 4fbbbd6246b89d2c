package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func toolNames(t testing.TB, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// TestMirrorAndTiers: tools/list mirrors the upstream's tools with their
// schemas and annotations; a read call runs at once.
func TestMirrorAndTiers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, version := range []string{"", "2025-11-25"} {
		cs := h.connect(clientOpts{version: version})
		var got *mcp.Tool
		for tool, err := range cs.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if tool.Name == "delete_note" {
				got = tool
			}
		}
		if got == nil || got.Title != "Delete a note" || got.Description != "Deletes a note for good." ||
			got.Annotations == nil || got.Annotations.DestructiveHint == nil || !*got.Annotations.DestructiveHint ||
			!strings.Contains(fmt.Sprint(got.InputSchema), "id") {
			t.Fatalf("%q: delete_note mirrored as %+v", version, got)
		}
		res := call(t, cs, "read_note", map[string]any{"id": "n1"})
		wantRan(t, res, "note n1 from notes")
		if version == "" {
			// The client talks to countersign, not to the upstream.
			info, _ := res.Meta[mcp.MetaKeyServerInfo].(map[string]any)
			if info["name"] != "countersign" {
				t.Errorf("serverInfo of the result: %v, want countersign's", res.Meta[mcp.MetaKeyServerInfo])
			}
		}
	}
	// write is not confirmed by default.
	cs := h.connect(clientOpts{})
	wantRan(t, call(t, cs, "write_note", map[string]any{"id": "w"}), "written")
	wantCalls(t, h.logFile, "write_note w")
}

// TestKeyTiers: a key limited to read and write neither lists nor calls a
// commit or external tool.
func TestKeyTiers(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	all := h.connect(clientOpts{})
	if got := toolNames(t, all); !slices.Contains(got, "delete_note") || !slices.Contains(got, "send_mail") {
		t.Fatalf("agent sees %v", got)
	}
	for _, version := range []string{"", "2025-11-25"} {
		cs := h.connect(clientOpts{key: "reader", version: version})
		got := toolNames(t, cs)
		if slices.Contains(got, "delete_note") || slices.Contains(got, "send_mail") || !slices.Contains(got, "read_note") || !slices.Contains(got, "write_note") {
			t.Fatalf("reader sees %v", got)
		}
		for _, tool := range []string{"delete_note", "send_mail"} {
			_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"id": "x"}})
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("unknown tool %q", tool)) {
				t.Errorf("reader calling %s: %v, want unknown tool", tool, err)
			}
		}
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "no_such_tool"})
		if err == nil || !strings.Contains(err.Error(), `unknown tool "no_such_tool"`) {
			t.Errorf("calling a tool that does not exist: %v", err)
		}
		wantRan(t, call(t, cs, "write_note", map[string]any{"id": "r"}), "written")
	}
	wantCalls(t, h.logFile, "write_note r", "write_note r")
	if list, _ := h.svc.List(t.Context(), h.alice, countersign.RequestFilter{}); len(list) != 0 {
		t.Errorf("refused calls made %d requests", len(list))
	}
}

// TestKeyPolicyAccount: a key's policy is its account's key's, not that of
// a key of the same name in another account: acme/ci may commit without a
// human, other/ci may not.
func TestKeyPolicyAccount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) {
		c.Keys["acme/ci"] = gateway.Policy{Tiers: gateway.AllTiers}
	})
	wantRan(t, call(t, h.connect(clientOpts{key: "ci"}), "delete_note", map[string]any{"id": "a"}), "deleted a")
	wantStatus(t, call(t, h.connect(clientOpts{key: "other/ci"}), "delete_note", map[string]any{"id": "b"}), "approval_pending")
	wantCalls(t, h.logFile, "delete_note a")
}

// TestPendingApprove (d): a client without elicitation gets approval_pending
// with the inbox URL, the reference and the expiry; the model's retry of
// the same call takes the approval once.
func TestPendingApprove(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	for _, version := range []string{"", "2025-11-25"} {
		cs := h.connect(clientOpts{version: version})
		args := map[string]any{"id": "n-" + version}
		text := wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
		r := h.pending("delete_note")
		inbox := h.base + "/approvals/" + r.ID
		ref := countersign.FormatReference(r.Reference)
		for _, part := range []string{inbox, ref, r.ExpiresAt.UTC().Format("15:04:05"), "in about 10 minutes", "exactly the same arguments"} {
			if !strings.Contains(text, part) {
				t.Errorf("approval_pending text lacks %q:\n%s", part, text)
			}
		}
		if r.Kind != countersign.KindMCP || r.Action != "delete_note" || !strings.Contains(r.Preview, `"id": "n-`+version+`"`) {
			t.Errorf("request %+v", r)
		}
		// Asking again while it waits is the same request, after a hold.
		start := time.Now()
		again := wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
		if !strings.Contains(again, ref) || time.Since(start) < 250*time.Millisecond {
			t.Errorf("retry while pending: %q after %v", again, time.Since(start))
		}
		h.decide(r.ID, countersign.DecisionApprove)
		wantRan(t, call(t, cs, "delete_note", args), "deleted n-"+version)
		if got := h.events(r.ID); strings.Join(got, ",") != "created,approved,consumed" {
			t.Errorf("audit events %v", got)
		}
		// Single use: the next retry asks anew.
		wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
		if h.pending("delete_note").ID == r.ID {
			t.Error("a used approval was asked about again")
		}
		h.decide(h.pending("delete_note").ID, countersign.DecisionDeny)
	}
	wantCalls(t, h.logFile, "delete_note n-", "delete_note n-2025-11-25")
}

// TestPendingBinding (d): a retry with changed arguments, or by another
// key, does not take the approval.
func TestPendingBinding(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(clientOpts{})
	args := map[string]any{"to": "ada@example.com", "body": "hi"}
	wantStatus(t, call(t, cs, "send_mail", args), "approval_pending")
	r := h.pending("send_mail")
	h.decide(r.ID, countersign.DecisionApprove)

	// Changed arguments: a new request, the approval stays.
	wantStatus(t, call(t, cs, "send_mail", map[string]any{"to": "eve@example.com", "body": "hi"}), "approval_pending")
	// Another key of the same account, and a key of another account.
	for _, key := range []string{"agent2", "outsider"} {
		other := h.connect(clientOpts{key: key})
		wantStatus(t, call(t, other, "send_mail", args), "approval_pending")
	}
	if got := h.request(r.ID).Status; got != countersign.StatusApproved {
		t.Fatalf("the approval is %s after others' retries, want approved", got)
	}
	wantCalls(t, h.logFile)
	// Key order does not make another call.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "send_mail", Arguments: map[string]any{"body": "hi", "to": "ada@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	wantRan(t, res, "sent to ada@example.com")
	wantCalls(t, h.logFile, "send_mail ada@example.com")

	// A repeated key could show one value and run another: refused.
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "send_mail", Arguments: json.RawMessage(`{"to":"ada@example.com","to":"eve@example.com"}`)})
	if err == nil || !strings.Contains(err.Error(), "repeat a key") {
		t.Errorf("duplicate keys: %v", err)
	}
}

// TestPendingDenyExpire (d): a retry after a denial is told so, once; after
// the expiry it asks anew.
func TestPendingDenyExpire(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(clientOpts{})
	args := map[string]any{"id": "d"}
	wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
	r := h.pending("delete_note")
	h.decide(r.ID, countersign.DecisionDeny)
	text := wantStatus(t, call(t, cs, "delete_note", args), "denied")
	if !strings.Contains(text, "not today") || !strings.Contains(text, countersign.FormatReference(r.Reference)) {
		t.Errorf("denial text %q", text)
	}
	// Told once: the next retry asks anew.
	wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
	second := h.pending("delete_note")

	// Expired: the retry learns nothing was approved and asks anew.
	h.clock.Advance(11 * time.Minute)
	wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
	if got := h.request(second.ID).Status; got != countersign.StatusExpired {
		t.Errorf("old request %s, want expired", got)
	}
	if h.pending("delete_note").ID == second.ID {
		t.Error("no new request after the expiry")
	}
	// An approval that expires before the retry is not taken either.
	third := h.pending("delete_note")
	h.decide(third.ID, countersign.DecisionApprove)
	h.clock.Advance(11 * time.Minute)
	wantStatus(t, call(t, cs, "delete_note", args), "approval_pending")
	wantCalls(t, h.logFile)
}

// TestPendingLimit: at most five requests of an account wait at once.
func TestPendingLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(clientOpts{})
	for i := range 5 {
		wantStatus(t, call(t, cs, "send_mail", map[string]any{"to": fmt.Sprint(i)}), "approval_pending")
	}
	res := call(t, cs, "send_mail", map[string]any{"to": "six"})
	if !res.IsError || !strings.Contains(textOf(res), "already has 5 requests waiting") {
		t.Fatalf("sixth: %q", textOf(res))
	}
	other := h.connect(clientOpts{key: "outsider"})
	wantStatus(t, call(t, other, "send_mail", map[string]any{"to": "x"}), "approval_pending")
}

// elicitHold is the hold of tests whose client answers an elicitation,
// which must come within the hold: long, so that a loaded machine's slow
// answer is not taken for none. None of them waits for a hold to end.
const elicitHold = 20 * time.Second

// longHold configures the harness with elicitHold.
func longHold(c *gateway.Config) { c.Hold = elicitHold }

// elicitVia returns an elicitation handler that decides the pending
// request of the tool in the inbox with d (none: leaves it pending) and
// then answers action, recording what it was shown.
func (h *harness) elicitVia(tool string, d countersign.Decision, action string, seen *[]*mcp.ElicitParams) func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	return func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		*seen = append(*seen, req.Params)
		if d != "" {
			h.decide(h.pending(tool).ID, d)
		}
		return &mcp.ElicitResult{Action: action}, nil
	}
}

// TestElicitForm (a, b): a client that can elicit gets a form with the
// trusted preview, the reference and the inbox link; the human decides in
// the inbox and the answer to the form continues the call. 2026-07-28
// clients get it as input_required, older ones as elicitation/create.
func TestElicitForm(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("v"+version, func(t *testing.T) {
			h := newHarness(t, longHold)
			var seen []*mcp.ElicitParams
			cs := h.connect(clientOpts{version: version, elicit: h.elicitVia("delete_note", countersign.DecisionApprove, "accept", &seen)})
			wantRan(t, call(t, cs, "delete_note", map[string]any{"id": "e1"}), "deleted e1")
			if len(seen) != 1 || seen[0].Mode != "form" {
				t.Fatalf("elicitations %+v", seen)
			}
			list, _ := h.svc.List(t.Context(), h.alice, countersign.RequestFilter{})
			r := list[0]
			for _, part := range []string{countersign.FormatReference(r.Reference), h.base + "/approvals/" + r.ID, "Tool:     delete_note", `"id": "e1"`} {
				if !strings.Contains(seen[0].Message, part) {
					t.Errorf("form message lacks %q:\n%s", part, seen[0].Message)
				}
			}
			if got := h.events(r.ID); strings.Join(got, ",") != "created,approved,consumed" {
				t.Errorf("audit events %v", got)
			}

			// Denied in the inbox, then accepted in the client: denied.
			seen = nil
			cs = h.connect(clientOpts{version: version, elicit: h.elicitVia("delete_note", countersign.DecisionDeny, "accept", &seen)})
			wantStatus(t, call(t, cs, "delete_note", map[string]any{"id": "e2"}), "denied")
			// Declined in the client: the request is cancelled.
			cs = h.connect(clientOpts{version: version, elicit: h.elicitVia("delete_note", "", "decline", &seen)})
			wantStatus(t, call(t, cs, "delete_note", map[string]any{"id": "e3"}), "declined")
			wantCalls(t, h.logFile, "delete_note e1")
		})
	}
}

// TestElicitURL (c): a client with URL elicitation is sent to the inbox
// page of the request itself; the inbox, not the link, proves the account.
func TestElicitURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		version string
		opts    clientOpts
	}{
		{"new url only", "", clientOpts{urlOnly: true}},
		{"new form and url", "", clientOpts{withURL: true}},
		{"legacy url only", "2025-11-25", clientOpts{urlOnly: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, longHold)
			var seen []*mcp.ElicitParams
			o := tc.opts
			o.version = tc.version
			o.elicit = h.elicitVia("send_mail", countersign.DecisionApprove, "accept", &seen)
			cs := h.connect(o)
			wantRan(t, call(t, cs, "send_mail", map[string]any{"to": "u@example.com"}), "sent to u@example.com")
			list, _ := h.svc.List(t.Context(), h.alice, countersign.RequestFilter{})
			if len(seen) != 1 || seen[0].Mode != "url" || seen[0].URL != h.base+"/approvals/"+list[0].ID || seen[0].ElicitationID != list[0].ID {
				t.Fatalf("elicitations %+v", seen)
			}
			// Denied in the inbox, or expired before the answer: nothing runs.
			o.elicit = h.elicitVia("send_mail", countersign.DecisionDeny, "accept", &seen)
			wantStatus(t, call(t, h.connect(o), "send_mail", map[string]any{"to": "no@example.com"}), "denied")
			o.elicit = func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				h.clock.Advance(11 * time.Minute)
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
			wantStatus(t, call(t, h.connect(o), "send_mail", map[string]any{"to": "late@example.com"}), "refused")
			wantCalls(t, h.logFile, "send_mail u@example.com")
		})
	}
}

// TestElicitHold: an answer that comes before the decision holds the call
// while the human decides; a 2026-07-28 client is asked again after the
// hold, a legacy one gets approval_pending and its retry takes the
// approval.
func TestElicitHold(t *testing.T) {
	h := newHarness(t, nil)
	asked := 0
	cs := h.connect(clientOpts{elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		if asked == 2 {
			go func() {
				// Decide once the call holds on the request, so that
				// the decision comes during the hold.
				id := h.pending("delete_note").ID
				testutil.Wait(func() bool { return h.hub.Watching(id) > 0 }, testutil.EventuallyWithin)
				h.decide(id, countersign.DecisionApprove)
			}()
		}
		return &mcp.ElicitResult{Action: "accept"}, nil
	}})
	wantRan(t, call(t, cs, "delete_note", map[string]any{"id": "h1"}), "deleted h1")
	if asked < 2 {
		t.Errorf("asked %d times, want the form again after the hold", asked)
	}

	legacy := h.connect(clientOpts{version: "2025-11-25", elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "accept"}, nil
	}})
	args := map[string]any{"id": "h2"}
	wantStatus(t, call(t, legacy, "delete_note", args), "approval_pending")
	h.decide(h.pending("delete_note").ID, countersign.DecisionApprove)
	wantRan(t, call(t, legacy, "delete_note", args), "deleted h2")
	wantCalls(t, h.logFile, "delete_note h1", "delete_note h2")
}

// TestElicitExpire: an answer after the request expired runs nothing.
func TestElicitExpire(t *testing.T) {
	t.Parallel()
	h := newHarness(t, longHold)
	for _, version := range []string{"", "2025-11-25"} {
		cs := h.connect(clientOpts{version: version, elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			h.clock.Advance(11 * time.Minute)
			return &mcp.ElicitResult{Action: "accept"}, nil
		}})
		// The state expires with its request: a stale one is refused.
		wantStatus(t, call(t, cs, "delete_note", map[string]any{"id": "x"}), "refused")
	}
	wantCalls(t, h.logFile)
}

// firstRound calls a tool with a client that answers input_required by
// hand, and returns the sealed state and the elicitation.
func firstRound(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) (string, *mcp.ElicitParams) {
	t.Helper()
	res := call(t, cs, tool, args)
	if !res.NeedsInput() || res.RequestState == "" {
		t.Fatalf("want input_required, got %q (meta %v)", textOf(res), res.Meta)
	}
	el, ok := res.InputRequests["countersign_approval"].(*mcp.ElicitParams)
	if !ok {
		t.Fatalf("input requests %+v", res.InputRequests)
	}
	return res.RequestState, el
}

// retry sends the second round by hand.
func retry(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, state, action string) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args, RequestState: state,
		InputResponses: mcp.InputResponseMap{"countersign_approval": &mcp.ElicitResult{Action: action}}})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	return res
}

// TestRequestState (a): the state is sealed and bound: tampered, stale,
// replayed after use, for other arguments or presented by another
// principal, it is refused, and nothing runs.
func TestRequestState(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	elicit := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return nil, fmt.Errorf("answered by hand")
	}
	cs := h.connect(clientOpts{noMRTR: true, elicit: elicit})
	args := map[string]any{"id": "s1"}
	state, el := firstRound(t, cs, "delete_note", args)
	if el.Mode != "form" || !strings.Contains(el.Message, `"id": "s1"`) {
		t.Fatalf("elicitation %+v", el)
	}
	r := h.pending("delete_note")

	tampered := []byte(state)
	tampered[len(tampered)/2] ^= 1
	if tampered[len(tampered)/2] == '-' || tampered[len(tampered)/2] == '_' {
		tampered[len(tampered)/2] = 'A'
	}
	wantStatus(t, retry(t, cs, "delete_note", args, string(tampered), "accept"), "refused")
	wantStatus(t, retry(t, cs, "delete_note", args, "not a state", "accept"), "refused")
	wantStatus(t, retry(t, cs, "delete_note", map[string]any{"id": "other"}, state, "accept"), "refused")
	for _, key := range []string{"agent2", "outsider"} {
		other := h.connect(clientOpts{key: key, noMRTR: true, elicit: elicit})
		wantStatus(t, retry(t, other, "delete_note", args, state, "accept"), "refused")
		wantStatus(t, retry(t, other, "delete_note", args, state, "decline"), "refused")
	}
	if got := h.request(r.ID).Status; got != countersign.StatusPending {
		t.Fatalf("after refused states the request is %s", got)
	}

	h.decide(r.ID, countersign.DecisionApprove)
	// A decline in the client wins over the approval: nothing runs.
	wantStatus(t, retry(t, cs, "delete_note", args, state, "decline"), "declined")
	wantCalls(t, h.logFile)
	wantRan(t, retry(t, cs, "delete_note", args, state, "accept"), "deleted s1")
	// Replayed after use.
	wantStatus(t, retry(t, cs, "delete_note", args, state, "accept"), "refused")
	wantCalls(t, h.logFile, "delete_note s1")

	// Stale: past its expiry the state opens for nothing, even approved.
	state2, _ := firstRound(t, cs, "delete_note", map[string]any{"id": "s2"})
	h.decide(h.pending("delete_note").ID, countersign.DecisionApprove)
	h.clock.Advance(10*time.Minute + time.Second)
	wantStatus(t, retry(t, cs, "delete_note", map[string]any{"id": "s2"}, state2, "accept"), "refused")
	wantCalls(t, h.logFile, "delete_note s1")
}

// TestAuditBinding: the audit log holds each confirmed call's binding.
func TestAuditBinding(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(clientOpts{})
	args := map[string]any{"to": "audit@example.com"}
	wantStatus(t, call(t, cs, "send_mail", args), "approval_pending")
	r := h.pending("send_mail")
	h.decide(r.ID, countersign.DecisionApprove)
	wantRan(t, call(t, cs, "send_mail", args), "sent to audit@example.com")
	entries, err := h.store.AuditLog(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, e := range entries {
		if e.RequestID == r.ID {
			details = append(details, e.Event+" "+e.Actor+" "+e.Detail)
		}
	}
	all := strings.Join(details, "\n")
	for _, part := range []string{"created key:", `"action":"send_mail"`, `"args_hash":"` + r.ArgsHash, `"preview_hash":"` + r.PreviewHash,
		"approved approver:alice", "consumed key:", `"via":"retry"`} {
		if !strings.Contains(all, part) {
			t.Errorf("audit entries lack %q:\n%s", part, all)
		}
	}
	v := countersign.NewAuditVerifier()
	for _, e := range entries {
		v.Add(e)
	}
	seq, hash, _ := h.store.AuditHead(t.Context())
	if problems := v.Finish(seq, hash); len(problems) > 0 {
		t.Errorf("audit chain: %v", problems)
	}
}

// TestForeignSession: a session opened by one key is, for any other key of
// the same account or another, what an unknown session is: 404 "session
// not found", the same answer byte for byte. Its own key goes on using it.
func TestForeignSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	cs := h.connect(clientOpts{version: "2025-11-25"})
	post := func(key, session string) (int, string) {
		t.Helper()
		req, err := http.NewRequest("POST", h.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := bearer(h.keys[key]).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	unknownCode, unknownBody := post("agent", "NO-SUCH-SESSION")
	if unknownCode != http.StatusNotFound {
		t.Fatalf("an unknown session: %d %q, want 404", unknownCode, unknownBody)
	}
	for _, key := range []string{"agent2", "outsider"} {
		if code, body := post(key, cs.ID()); code != unknownCode || body != unknownBody {
			t.Errorf("the session of key agent used by %s: %d %q, want %d %q as for an unknown one", key, code, body, unknownCode, unknownBody)
		}
	}
	if code, body := post("agent", cs.ID()); code != http.StatusOK {
		t.Errorf("the session used by its own key: %d %q", code, body)
	}
	if _, err := cs.ListTools(h.ctx, nil); err != nil {
		t.Errorf("the session after the others' tries: %v", err)
	}
}

// TestRebinding: the real /mcp refuses an initialize for another Host or
// from a page of another origin (DNS rebinding), and answers its own.
func TestRebinding(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	post := func(host, origin string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", h.base+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if host != "" {
			req.Host = host
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := bearer(h.keys["agent"]).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("evil.example.com", "http://evil.example.com"); code != http.StatusMisdirectedRequest {
		t.Errorf("Host and Origin evil.example.com: %d, want 421", code)
	}
	if code := post("", "http://evil.example.com"); code != http.StatusForbidden {
		t.Errorf("Origin evil.example.com: %d, want 403", code)
	}
	if code := post("", ""); code != http.StatusOK {
		t.Errorf("its own host, no Origin: %d, want 200", code)
	}
	if code := post("", h.base); code != http.StatusOK {
		t.Errorf("its own origin: %d, want 200", code)
	}
}

// TestRateLimit: calls of a key over its rate are tool errors that say when
// to retry, not HTTP 429s (the API's rate of the address is lower still);
// other keys are not held back, and once the time has passed the call runs.
func TestRateLimit(t *testing.T) {
	// Not in parallel: the key's bucket fills on the wall clock too, and
	// the wait said is exact only when the calls come quickly.
	h := newHarnessRate(t, func(c *gateway.Config) { c.Rate = 12 }, 6) // bursts of 2 calls, 1 request
	for _, version := range []string{"", "2025-11-25"} {
		cs := h.connect(clientOpts{version: version})
		h.clock.Advance(5 * time.Second) // opening a session (2025-11-25) took a token
		for i := range 2 {
			wantRan(t, call(t, cs, "read_note", map[string]any{"id": fmt.Sprint(i)}), fmt.Sprintf("note %d from notes", i))
		}
		res := call(t, cs, "read_note", map[string]any{"id": "over"})
		text := wantStatus(t, res, "rate_limited")
		if !strings.Contains(text, "more than 12 calls in a minute") || !strings.Contains(text, "Retry after 5 s") ||
			res.Meta["countersign/retry_after_ms"] == nil {
			t.Errorf("over the rate: %q %v", text, res.Meta)
		}
		if _, err := cs.ListTools(h.ctx, nil); err != nil {
			t.Errorf("listing over the rate: %v", err)
		}
		wantRan(t, call(t, h.connect(clientOpts{key: "agent2", version: version}), "read_note", map[string]any{"id": "b"}), "note b from notes")
		h.clock.Advance(5 * time.Second)
		wantRan(t, call(t, cs, "read_note", map[string]any{"id": "later"}), "note later from notes")
		h.clock.Advance(time.Minute)
	}
}
