package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestElicitationDecides: a real TypeScript client answers the form
// elicitation through /mcp. For a key the operator marked
// elicitation_decides its Accept is the approval of that exact call, once,
// and the audit says decided_by elicitation; a call that needs a passkey
// stays a hold, and so does every Accept of an unmarked key.
func TestElicitationDecides(t *testing.T) {
	t.Parallel()
	stepUp := approval.StepUpPolicy{Rules: []approval.StepUpRule{{Kind: countersign.KindMCP, Tool: "send_mail"}}}
	h := newHarnessWith(t, func(c *gateway.Config) {
		// The client's answers come from this test, maybe slowly: a
		// short hold would withdraw the elicitation first.
		c.Hold = elicitHold
		c.Keys["acme/ci"] = gateway.Policy{Tiers: gateway.AllTiers, Confirm: c.Policy.Confirm, ElicitationDecides: true}
	}, 0, approval.Config{StepUp: stepUp})

	marked := newTSClient(t, h, "ci", "elicit")
	marked.send(map[string]any{"op": "call", "tool": "delete_note", "args": map[string]any{"id": "e1"}})
	el, _ := marked.read()["elicit"].(map[string]any)
	if msg := fmt.Sprint(el["message"]); !strings.Contains(msg, "Accept runs it once") || strings.Contains(msg, "/approvals/") {
		t.Fatalf("the marked key's elicitation: %q", msg)
	}
	id := h.pending("delete_note").ID
	marked.send(map[string]any{"action": "accept"})
	if text, meta := marked.result(marked.read()); text != "deleted e1" {
		t.Fatalf("after the marked key's Accept: %q %v", text, meta)
	}
	if r := h.request(id); r.Status != countersign.StatusConsumed || r.DecidedBy != approval.DecidedByElicitation {
		t.Fatalf("request %s %q, want consumed, decided by elicitation", r.Status, r.DecidedBy)
	}
	wantElicitationAudit(t, h, id, "approved")

	// The same call again asks again: the Accept approved one call, once.
	marked.send(map[string]any{"op": "call", "tool": "delete_note", "args": map[string]any{"id": "e1"}})
	marked.read() // the elicitation of a new request
	again := h.pending("delete_note").ID
	if again == id {
		t.Fatal("the used approval was offered again")
	}
	marked.send(map[string]any{"action": "decline"})
	if _, meta := marked.result(marked.read()); meta["countersign/status"] != "declined" {
		t.Fatalf("declined: %v", meta)
	}
	if r := h.request(again); r.Status != countersign.StatusDenied || r.DecidedBy != approval.DecidedByElicitation {
		t.Fatalf("declined request %s %q, want denied by elicitation", r.Status, r.DecidedBy)
	}
	wantElicitationAudit(t, h, again, "denied")

	// A call that needs a passkey: the Accept only holds while the inbox
	// decides, and the inbox still wants the passkey. The approver denies
	// it there, and that, not the Accept, is the decision.
	marked.send(map[string]any{"op": "call", "tool": "send_mail", "args": map[string]any{"to": "x@example.com"}})
	el, _ = marked.read()["elicit"].(map[string]any)
	if msg := fmt.Sprint(el["message"]); !strings.Contains(msg, "/approvals/") || strings.Contains(msg, "Accept runs it once") {
		t.Fatalf("the elicitation of a step-up call: %q", msg)
	}
	mail := h.pending("send_mail").ID
	_, err := h.svc.Decide(context.Background(), h.alice, mail, countersign.DecisionInput{Decision: countersign.DecisionApprove})
	if !errors.Is(err, approval.ErrPasskeyNeeded) {
		t.Fatalf("approving the step-up call without a passkey: %v", err)
	}
	if _, err := h.svc.DecideByElicitation(context.Background(), agentOf(t, h, "ci"), mail, true); !errors.Is(err, approval.ErrPasskeyNeeded) {
		t.Fatalf("deciding a step-up call by elicitation: %v", err)
	}
	marked.send(map[string]any{"action": "accept"})
	h.holding(t, mail)
	h.decide(mail, countersign.DecisionDeny)
	if _, meta := marked.result(marked.read()); meta["countersign/status"] != "denied" {
		t.Fatalf("after Accept of a step-up call and a denial in the inbox: %v", meta)
	}
	if r := h.request(mail); r.Status != countersign.StatusDenied || r.DecidedBy != "alice" {
		t.Fatalf("step-up request %s by %q, want denied by alice", r.Status, r.DecidedBy)
	}

	// An unmarked key of the same account: its Accept holds too.
	plain := newTSClient(t, h, "agent", "elicit")
	plain.send(map[string]any{"op": "call", "tool": "delete_note", "args": map[string]any{"id": "e2"}})
	el, _ = plain.read()["elicit"].(map[string]any)
	if msg := fmt.Sprint(el["message"]); !strings.Contains(msg, "/approvals/") {
		t.Fatalf("the unmarked key's elicitation: %q", msg)
	}
	other := h.pending("delete_note").ID
	plain.send(map[string]any{"action": "accept"})
	h.holding(t, other)
	h.decide(other, countersign.DecisionDeny)
	if _, meta := plain.result(plain.read()); meta["countersign/status"] != "denied" {
		t.Fatalf("after the unmarked key's Accept and a denial in the inbox: %v", meta)
	}
	if r := h.request(other); r.Status != countersign.StatusDenied || r.DecidedBy != "alice" {
		t.Fatalf("unmarked key's request %s by %q, want denied by alice", r.Status, r.DecidedBy)
	}
	wantCalls(t, h.logFile, "delete_note e1")
}

// holding waits until a call holds on the request id: the gateway took
// the client's Accept and did not approve with it.
func (h *harness) holding(t *testing.T, id string) {
	t.Helper()
	if !testutil.Wait(func() bool { return h.hub.Watching(id) > 0 }, testutil.EventuallyWithin) {
		t.Fatalf("no call holds on %s; it is %s", id, h.request(id).Status)
	}
}

// wantElicitationAudit checks the audit entry of a decision by elicitation:
// the key is the actor, and the detail says decided_by elicitation.
func wantElicitationAudit(t *testing.T, h *harness, id, event string) {
	t.Helper()
	entries, err := h.store.AuditLog(context.Background(), 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.RequestID == id && e.Event == event {
			if !strings.HasPrefix(e.Actor, "key:") || !strings.Contains(e.Detail, `"decided_by":"elicitation"`) {
				t.Fatalf("audit of %s: actor %q detail %s", event, e.Actor, e.Detail)
			}
			return
		}
	}
	t.Fatalf("no audit entry %s of %s: %v", event, id, h.events(id))
}

// agentOf is the agent a key's secret stands for.
func agentOf(t *testing.T, h *harness, key string) countersign.Agent {
	t.Helper()
	r, err := h.store.AgentKeyByHash(context.Background(), countersign.HashSecret(h.keys[key]))
	if err != nil {
		t.Fatal(err)
	}
	return countersign.Agent{KeyID: r.ID, AccountID: r.AccountID, KeyName: r.Name}
}

// TestElicitationDecidesConfig: the switch is read per key, and refused
// under [policy], where it would let every agent's client approve.
func TestElicitationDecidesConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	up := "[[upstream]]\nname = \"fs\"\ncommand = [\"true\"]\n"
	c, err := gateway.LoadConfig(write("keys.toml", up+"[keys.\"acme/claude\"]\nelicitation_decides = true\n[keys.\"acme/ci\"]\ntiers = [\"read\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Keys["acme/claude"].ElicitationDecides || c.Keys["acme/ci"].ElicitationDecides || c.Policy.ElicitationDecides {
		t.Fatalf("keys %+v policy %+v", c.Keys, c.Policy)
	}
	_, err = gateway.LoadConfig(write("policy.toml", up+"[policy]\nelicitation_decides = true\n"))
	if err == nil || !strings.Contains(err.Error(), "per agent key") {
		t.Fatalf("elicitation_decides under [policy]: %v", err)
	}
}

// TestElicitationDecidesSealed: whether a form's Accept approves is what
// the form said, sealed in its state, and the key must be marked still
// when the answer comes: a form that sent the user to the inbox does not
// approve when the server restarted meanwhile with the key marked, and a
// form that offered to run the call does not once the mark is gone.
func TestElicitationDecidesSealed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	byHand := func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return nil, fmt.Errorf("answered by hand")
	}
	mark := func(c *gateway.Config) {
		c.Keys["acme/agent"] = gateway.Policy{Tiers: gateway.AllTiers, Confirm: c.Policy.Confirm, ElicitationDecides: true}
	}

	// Unmarked: the form sends the user to the inbox.
	args := map[string]any{"id": "m1"}
	state, el := firstRound(t, h.connect(clientOpts{noMRTR: true, elicit: byHand}), "delete_note", args)
	if !strings.Contains(el.Message, "/approvals/") || strings.Contains(el.Message, "Accept runs it once") {
		t.Fatalf("the unmarked key's form: %q", el.Message)
	}
	id := h.pending("delete_note").ID
	// The server restarts with the key marked; the user chooses Accept
	// on the form it showed before: that holds, and asks anew.
	marked := h.restarted(mark)
	cs := marked.connect(clientOpts{noMRTR: true, elicit: byHand})
	res := retry(t, cs, "delete_note", args, state, "accept")
	wantCalls(t, h.logFile)
	if r := h.request(id); r.Status != countersign.StatusPending {
		t.Fatalf("after the Accept of the inbox's form, the request is %s by %q", r.Status, r.DecidedBy)
	}
	again, _ := res.InputRequests["countersign_approval"].(*mcp.ElicitParams)
	if !res.NeedsInput() || again == nil || !strings.Contains(again.Message, "Accept runs it once") {
		t.Fatalf("after the Accept of the inbox's form: %q %+v", textOf(res), res.InputRequests)
	}
	// The form that says so approves.
	wantRan(t, retry(t, cs, "delete_note", args, res.RequestState, "accept"), "deleted m1")
	if r := h.request(id); r.Status != countersign.StatusConsumed || r.DecidedBy != approval.DecidedByElicitation {
		t.Fatalf("request %s by %q, want consumed, decided by elicitation", r.Status, r.DecidedBy)
	}

	// Marked: the form offers to run the call; the server restarts
	// without the mark, and the Accept holds.
	args = map[string]any{"id": "m2"}
	state, el = firstRound(t, cs, "delete_note", args)
	if !strings.Contains(el.Message, "Accept runs it once") {
		t.Fatalf("the marked key's form: %q", el.Message)
	}
	id = h.pending("delete_note").ID
	plain := h.restarted(nil)
	res = retry(t, plain.connect(clientOpts{noMRTR: true, elicit: byHand}), "delete_note", args, state, "accept")
	if r := h.request(id); r.Status != countersign.StatusPending || textOf(res) == "deleted m2" {
		t.Fatalf("after the Accept once the mark is gone: request %s, result %q", r.Status, textOf(res))
	}
	wantCalls(t, h.logFile, "delete_note m1")
}
