package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ask is one tools/call that needs a human: the mirror's call and its
// binding.
type ask struct {
	*gateway.ToolCall
	c *pendingCall
}

// name is the exposed name of the tool the call names.
func (a *ask) name() string { return a.Tool.Name }

// Call runs a call that needs a human: it resumes an elicitation, takes an
// approval given in the inbox, or asks.
func (f *Confirmation) Call(ctx context.Context, call *gateway.ToolCall) (*mcp.CallToolResult, error) {
	c, err := pendingCallOf(ctx, call)
	if err != nil {
		return nil, err
	}
	a := &ask{ToolCall: call, c: c}
	if call.Request.Params.RequestState != "" {
		return f.resume(ctx, a)
	}
	p := a.Principal
	now := f.now()
	// A retry of a call the human approved in the inbox takes the approval
	// once; a changed call or another key's finds none.
	hint := f.recent.get(p, c, now)
	if t, err := f.approvals.take(ctx, p, c, hint); err == nil {
		f.recent.forget(p, c)
		return f.run(ctx, a, t, "retry")
	} else if countersign.ErrorCode(err) != countersign.ENOTFOUND {
		return f.failed(a.name(), err), nil
	}
	if hint != "" {
		if res := f.reportDecided(ctx, a, hint); res != nil {
			return res, nil
		}
		if t, ok := f.takeEdited(ctx, a, hint); ok {
			f.recent.forget(p, c)
			return f.run(ctx, a, t, "retry")
		}
	}
	t, created, err := f.approvals.ask(ctx, p, c)
	if err != nil {
		return f.failed(a.name(), err), nil
	}
	f.recent.put(p, c, t.ID, t.ExpiresAt, now)
	if t.Status == countersign.StatusApproved { // an auto-approve window was open
		return f.settle(ctx, a, t, false)
	}
	switch mode := f.choose(a.Request, p); mode {
	case modeForm, modeURL:
		return f.elicit(ctx, a, t, mode), nil
	}
	if created {
		return f.announced(ctx, a, t), nil
	}
	// The model retried a call that still waits: the human may be deciding
	// right now, so hold a little before answering the same again.
	return f.settle(ctx, a, f.hold(ctx, a, t), false)
}

// announced tells the human of a new request through its own channel (the
// local page) and the model that the call waits.
func (f *Confirmation) announced(ctx context.Context, a *ask, t *ticket) *mcp.CallToolResult {
	if err := f.approvals.announce(ctx, t); err != nil {
		f.approvals.cancel(ctx, a.Principal, t.ID)
		f.recent.forget(a.Principal, a.c)
		return toolError("countersign could not show the confirmation page (%v); the call did not run. "+
			"Configure a countersign server (COUNTERSIGN_URL and COUNTERSIGN_KEY) or use an MCP client that supports elicitation.", err)
	}
	return pendingResult(a.name(), t, f.now())
}

// pendingCallOf builds the binding of a call (approval.Bind): canonical
// arguments, the trusted preview with the uploads the call names, and
// their hashes.
func pendingCallOf(ctx context.Context, call *gateway.ToolCall) (*pendingCall, error) {
	req := call.Request
	// The preview shows the arguments as sent, which is what runs: the
	// canonical form (of the hash) writes numbers as doubles, and a large
	// integer would show rounded. Duplicate keys, which could show one value
	// and run another, are refused by the canonicalisation.
	shown := json.RawMessage(req.Params.Arguments)
	if len(shown) == 0 {
		shown = json.RawMessage("{}")
	}
	// The uploads it names, by kind, size and SHA-256.
	ups, err := call.Uploads(ctx)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: describe(err)}
	}
	b, err := approval.Bind(call.Tool.Name, req.Params.Arguments, Preview(call.Tool, shown)+uploadFacts(ups))
	if errors.Is(err, approval.ErrInexactNumber) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the arguments hold " + approval.ErrInexactNumber.Error()}
	} else if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the arguments are not valid JSON (or repeat a key)"}
	}
	tier := call.Tool.Tier.Fact()
	c := &pendingCall{Tool: call.Tool.Name, Binding: b, Tier: tier, Reasons: []string{approval.TierReason(tier)}}
	if req.Session != nil {
		c.SessionID = req.Session.ID()
	}
	return c, nil
}

// uploadFacts is what the human approving a call sees of its uploads:
// kind, size and SHA-256, part of the preview and so of the binding, so
// that a different file is a different call.
func uploadFacts(ups []gateway.Upload) string {
	if len(ups) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nFiles uploaded by the user:")
	for _, u := range ups {
		fmt.Fprintf(&b, "\n  %s: upload %s, %s, %d bytes, SHA-256 %s", u.Arg, u.Reference, u.MIME, u.Size, u.SHA256)
	}
	return b.String()
}

// resume handles a retry that carries a requestState: the answer to the
// elicitation of a 2026-07-28 client, or of a legacy one through the SDK's
// middleware. The state must open for this principal, account, tool,
// arguments and preview, before its expiry; its request makes it
// single-use.
func (f *Confirmation) resume(ctx context.Context, a *ask) (*mcp.CallToolResult, error) {
	req, p, c := a.Request, a.Principal, a.c
	st, err := f.states.open(req.Params.RequestState, f.now(), requestState{Principal: p.ID, Account: p.Account,
		Tool: a.name(), ArgsHash: c.ArgsHash, PreviewHash: c.PreviewHash})
	if err != nil {
		f.log.Warn("request state refused", "tool", a.name(), "principal", p.ID)
		return refused(errBadState.Error()), nil
	}
	t, err := f.approvals.get(ctx, p, st.Request)
	if err != nil {
		return refused(errBadState.Error()), nil
	}
	answer := elicitAnswer(req.Params.InputResponses)
	if at, ok := ctx.Value(elicitKey{}).(*elicitAttempt); ok && answer != nil {
		at.answered() // the client answered: its elicitation is not withdrawn
	}
	if answer != nil && answer.Action != "accept" {
		return f.declined(ctx, a, t), nil
	}
	if t.Status != countersign.StatusPending {
		return f.settle(ctx, a, t, true)
	}
	switch {
	case answer == nil:
		return f.elicit(ctx, a, t, st.Mode), nil
	case st.Mode == modeForm && st.Decides && f.approvals.acceptApproves(ctx, p, t.ID):
		// The Accept is the approval of this request, whose state bound
		// it to this exact call; settle consumes it once. Only a form
		// that said so approves (sealed in its state), and only while
		// the key is marked still: a form that sent the user to the
		// inbox does not approve because the key was marked since.
		if t, err = f.approvals.decide(ctx, p, t.ID, true); err != nil {
			if countersign.ErrorCode(err) != countersign.EFORBIDDEN && countersign.ErrorCode(err) != countersign.ECONFLICT {
				return f.failed(a.name(), err), nil
			}
			// Decided meanwhile, or it needs a passkey after all: as
			// with any other key, hold while the inbox decides.
			if t, err = f.approvals.get(ctx, p, st.Request); err != nil {
				return refused(errBadState.Error()), nil
			}
			t = f.hold(ctx, a, t)
		}
	default:
		t = f.hold(ctx, a, t)
	}
	return f.settle(ctx, a, t, true)
}

// declined acts on the user's decline of the elicitation about t. A
// decline only makes things safer, so it is believed, and it wins even
// over an approval given meanwhile: nothing runs.
func (f *Confirmation) declined(ctx context.Context, a *ask, t *ticket) *mcp.CallToolResult {
	p := a.Principal
	if t.Status == countersign.StatusPending {
		var err error
		if f.approvals.decidesByElicitation(p) {
			t, err = f.approvals.decide(ctx, p, t.ID, false)
		} else {
			t, err = f.approvals.cancel(ctx, p, t.ID)
		}
		if err != nil {
			return f.failed(a.name(), err)
		}
	}
	f.recent.forget(p, a.c)
	res := notRun("declined: the user declined %s (request %s); it did not run. Do not retry it unless the user asks.", a.name(), t.Reference)
	setStatus(res, "declined", t.Reference)
	return res
}

// settle acts on a request's state: run an approval once, report a
// decision, or say it still waits.
func (f *Confirmation) settle(ctx context.Context, a *ask, t *ticket, fromState bool) (*mcp.CallToolResult, error) {
	req, p := a.Request, a.Principal
	completeURLElicitation(ctx, req, t)
	switch t.Status {
	case countersign.StatusApproved:
		used, err := f.approvals.consume(ctx, p, t.ID)
		if countersign.ErrorCode(err) == countersign.ECONFLICT {
			return refused("this approval was already used"), nil
		} else if err != nil {
			return f.failed(a.name(), err), nil
		}
		f.recent.forget(p, a.c)
		return f.run(ctx, a, used, "confirmation")
	case countersign.StatusConsumed:
		return refused("this approval was already used"), nil
	case countersign.StatusPending:
		if fromState && gateway.NewProtocol(req) {
			mode := f.choose(req, p)
			if mode == modeForm || mode == modeURL {
				return f.elicit(ctx, a, t, mode), nil
			}
		}
		return pendingResult(a.name(), t, f.now()), nil
	}
	f.recent.forget(p, a.c) // told now: a later retry asks anew
	return decidedResult(a.name(), t), nil
}

// reportDecided tells a retry, once, that the human decided against the
// call it last asked about; nil when there is nothing to tell.
func (f *Confirmation) reportDecided(ctx context.Context, a *ask, id string) *mcp.CallToolResult {
	p, c := a.Principal, a.c
	t, err := f.approvals.get(ctx, p, id)
	if err != nil {
		f.recent.forget(p, c)
		return nil
	}
	switch t.Status {
	case countersign.StatusDenied, countersign.StatusResponded, countersign.StatusStopped:
		f.recent.forget(p, c)
		return decidedResult(c.Tool, t)
	case countersign.StatusPending, countersign.StatusApproved:
		return nil
	}
	f.recent.forget(p, c) // expired, cancelled or used: ask anew
	return nil
}

// hold waits while a request is pending, up to the configured hold and
// never past its expiry, telling a client that asked for progress that it
// still waits (which also keeps its request timeout from running out).
func (f *Confirmation) hold(ctx context.Context, a *ask, t *ticket) *ticket {
	req, p := a.Request, a.Principal
	// Each hold keeps a request open: a key gets a few at once, and a
	// retry beyond them is answered at once, still pending.
	if !f.holding.take(p.ID) {
		return t
	}
	defer f.holding.give(p.ID)
	// The hold runs on the wall clock; only the expiry is the service's.
	stop := time.Now().Add(min(f.cfg.Hold, t.ExpiresAt.Sub(f.now())))
	tok := req.Params.GetProgressToken()
	notify := func(step int) {
		if tok != nil && req.Session != nil {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(step),
				Message: fmt.Sprintf("waiting for a human to approve request %s", t.Reference)})
		}
	}
	// From the start: a client that resets its timeout on progress, or
	// shows it, learns at once what the call waits for.
	notify(0)
	for step := 1; ; step++ {
		left := time.Until(stop)
		if left <= 0 || ctx.Err() != nil {
			return t
		}
		if tok != nil {
			left = min(left, 10*time.Second)
		}
		got, err := f.approvals.wait(ctx, p, t.ID, left)
		if err != nil {
			return t
		}
		t = got
		if t.Status != countersign.StatusPending {
			return t
		}
		notify(step)
	}
}

// run forwards an approved call, as the approver edited it if they did,
// and logs it with its binding and outcome. The approval's consumption is
// already in the audit log.
func (f *Confirmation) run(ctx context.Context, a *ask, t *ticket, via string) (*mcp.CallToolResult, error) {
	start := time.Now()
	res, err := f.forward(ctx, a, t)
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "cancelled"
	case res.IsError:
		outcome = "tool_error"
	}
	f.log.Info("confirmed MCP call", "tool", a.name(), "request", t.ID, "reference", t.Reference, "via", via,
		"edited", t.Edited, "outcome", outcome, "duration_ms", time.Since(start).Milliseconds())
	return res, err
}

// failed is a failure of the approval side as a tool error.
func (f *Confirmation) failed(tool string, err error) *mcp.CallToolResult {
	if countersign.ErrorCode(err) == countersign.EINTERNAL {
		f.log.Error("approval request failed", "tool", tool, "err", err)
	}
	return notRun("countersign could not ask a human about %s: %s. The call did not run.", tool, describe(err))
}

// completeURLElicitation tells a legacy client whose URL elicitation led
// to the inbox that the page's work is done.
func completeURLElicitation(ctx context.Context, req *mcp.CallToolRequest, t *ticket) {
	if t.Status == countersign.StatusPending || req.Session == nil || gateway.NewProtocol(req) || req.Params.RequestState == "" {
		return
	}
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil || caps.Elicitation.URL == nil {
		return
	}
	_ = req.Session.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: t.ID})
}

// maxHolds is how many retries of a pending call one key may have held at
// once.
const maxHolds = 8

// holds counts the held retries of each key.
type holds struct {
	mu sync.Mutex
	n  map[string]int
}

// take counts one more hold of key, unless it has maxHolds already.
func (h *holds) take(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[key] >= maxHolds {
		return false
	}
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[key]++
	return true
}

// give ends a hold of key.
func (h *holds) give(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[key]--; h.n[key] <= 0 {
		delete(h.n, key)
	}
}
