package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/limit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// handler is the tool handler of one exposed tool.
func (g *Gateway) handler(e *toolEntry) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		p, err := g.principal(req)
		if err != nil {
			return nil, err
		}
		if err := checkDepth(req.Params.Arguments); err != nil {
			return nil, err
		}
		pol := g.policy(p)
		if !pol.Sees(e.tier) {
			// The same answer as for a tool that does not exist: a key
			// limited to lower tiers learns nothing of the others.
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", e.name)}
		}
		if !pol.Confirms(e.tier) {
			return g.forward(ctx, req, e)
		}
		return g.confirmed(ctx, req, e, p)
	}
}

// argumentsDepth is how deep a call's arguments sit in its JSON-RPC
// message: {"params":{"arguments":…}}.
const argumentsDepth = 2

// checkDepth refuses arguments that make the call's message nest deeper
// than limit.MaxJSONDepth, before anything decodes, renders or forwards
// them: invalid params, which the client shows as the call's error.
func checkDepth(args json.RawMessage) error {
	if limit.CheckJSONDepthAt(args, argumentsDepth) != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"the arguments nest objects and arrays deeper than %d levels: a call may nest at most %d, its message's params and arguments counted",
			limit.MaxJSONDepth-argumentsDepth, limit.MaxJSONDepth)}
	}
	return nil
}

// forward calls the upstream's tool and returns its result as the
// gateway's. Only the client's progress token goes upstream (under a token
// of the gateway's), and the upstream's serverInfo does not come back: the
// client talks to countersign. A failed or dead upstream is a tool error,
// and restarts.
func (g *Gateway) forward(ctx context.Context, req *mcp.CallToolRequest, e *toolEntry) (*mcp.CallToolResult, error) {
	token, done := g.progress.route(ctx, req, e.up)
	defer done()
	p, _ := g.principal(req) // the handler checked it
	args, removeFiles, ferr := g.substitute(ctx, req, p, e)
	if ferr != nil {
		return notRun("%s did not run: %s.", e.name, describe(ferr)), nil
	}
	defer removeFiles()
	res, err := e.up.call(ctx, e.tool.Name, args, token)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // cancelled by the client: nobody reads an answer
		}
		var unavailable errUnavailable
		if errors.As(err, &unavailable) {
			return toolError("%v. It is being restarted; try the call again in a few seconds.", err), nil
		}
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) {
			return toolError("the MCP server %q answered with an error: %s", e.up.cfg.Name, rpcErr.Message), nil
		}
		return toolError("the call to the MCP server %q failed (%v); the server is being restarted, so the call may not have run. Try again in a few seconds.",
			e.up.cfg.Name, err), nil
	}
	if res.NeedsInput() {
		return toolError("the MCP server %q asked for input, which countersign does not pass on; the call did not complete", e.up.cfg.Name), nil
	}
	if res.Meta != nil {
		out := *res
		out.Meta = maps.Clone(res.Meta)
		delete(out.Meta, mcp.MetaKeyServerInfo)
		res = &out
	}
	return g.keepFiles(ctx, p, e, res), nil
}

// confirmed runs a call that needs a human: it resumes an elicitation,
// takes an approval given in the inbox, or asks.
func (g *Gateway) confirmed(ctx context.Context, req *mcp.CallToolRequest, e *toolEntry, p Principal) (*mcp.CallToolResult, error) {
	c, err := g.pendingCall(ctx, req, e, p)
	if err != nil {
		return nil, err
	}
	if req.Params.RequestState != "" {
		return g.resume(ctx, req, e, p, c)
	}
	now := g.now()
	// A retry of a call the human approved in the inbox takes the approval
	// once; a changed call or another key's finds none.
	hint := g.recent.get(p, c, now)
	if t, err := g.approvals.take(ctx, p, c, hint); err == nil {
		g.recent.forget(p, c)
		return g.run(ctx, req, e, t, "retry")
	} else if countersign.ErrorCode(err) != countersign.ENOTFOUND {
		return g.failed(e, err), nil
	}
	if hint != "" {
		if res := g.reportDecided(ctx, p, c, hint); res != nil {
			return res, nil
		}
	}
	t, created, err := g.approvals.ask(ctx, p, c)
	if err != nil {
		return g.failed(e, err), nil
	}
	g.recent.put(p, c, t.ID, t.ExpiresAt, now)
	if t.Status == countersign.StatusApproved { // an auto-approve window was open
		return g.settle(ctx, req, e, p, c, t, false)
	}
	switch mode := g.choose(req, p); mode {
	case modeForm, modeURL:
		return g.elicit(ctx, req, e, p, c, t, mode), nil
	}
	if created {
		if err := g.approvals.announce(ctx, t); err != nil {
			g.approvals.cancel(ctx, p, t.ID)
			g.recent.forget(p, c)
			return toolError("countersign could not show the confirmation page (%v); the call did not run. "+
				"Configure a countersign server (COUNTERSIGN_URL and COUNTERSIGN_KEY) or use an MCP client that supports elicitation.", err), nil
		}
		return pendingResult(e, t, g.now()), nil
	}
	// The model retried a call that still waits: the human may be deciding
	// right now, so hold a little before answering the same again.
	return g.settle(ctx, req, e, p, c, g.hold(ctx, req, p, t), false)
}

// pendingCall builds the binding of a call (approval.Bind): canonical
// arguments, the trusted preview with the uploads the call names, and
// their hashes.
func (g *Gateway) pendingCall(ctx context.Context, req *mcp.CallToolRequest, e *toolEntry, p Principal) (*pendingCall, error) {
	// The preview shows the arguments as sent, which is what runs: the
	// canonical form (of the hash) writes numbers as doubles, and a large
	// integer would show rounded. Duplicate keys, which could show one value
	// and run another, are refused by the canonicalisation.
	shown := json.RawMessage(req.Params.Arguments)
	if len(shown) == 0 {
		shown = json.RawMessage("{}")
	}
	// The uploads it names, by kind, size and SHA-256 (fileargs.go).
	_, ups, err := g.uploadsOf(ctx, req, p, e, req.Params.Arguments)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: describe(err)}
	}
	preview := Preview(e.name, e.up.cfg.Name, e.tool.Name, e.info(), e.tier, shown) + uploadFacts(ups)
	b, err := approval.Bind(e.name, req.Params.Arguments, preview)
	if errors.Is(err, approval.ErrInexactNumber) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the arguments hold " + approval.ErrInexactNumber.Error()}
	} else if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the arguments are not valid JSON (or repeat a key)"}
	}
	c := &pendingCall{Tool: e.name, Args: b.Args, ArgsHash: b.ArgsHash, Preview: b.Preview, PreviewHash: b.PreviewHash,
		Tier: e.tier.Fact(), Reasons: []string{approval.TierReason(e.tier.Fact())}}
	if req.Session != nil {
		c.SessionID = req.Session.ID()
	}
	return c, nil
}

// resume handles a retry that carries a requestState: the answer to the
// elicitation of a 2026-07-28 client, or of a legacy one through the SDK's
// middleware. The state must open for this principal, account, tool,
// arguments and preview, before its expiry; its request makes it
// single-use.
func (g *Gateway) resume(ctx context.Context, req *mcp.CallToolRequest, e *toolEntry, p Principal, c *pendingCall) (*mcp.CallToolResult, error) {
	st, err := g.states.open(req.Params.RequestState, g.now(), requestState{Principal: p.ID, Account: p.Account,
		Tool: e.name, ArgsHash: c.ArgsHash, PreviewHash: c.PreviewHash})
	if err != nil {
		g.log.Warn("request state refused", "tool", e.name, "principal", p.ID)
		return refused(errBadState.Error()), nil
	}
	t, err := g.approvals.get(ctx, p, st.Request)
	if err != nil {
		return refused(errBadState.Error()), nil
	}
	answer := elicitAnswer(req.Params.InputResponses)
	if a, ok := ctx.Value(elicitKey{}).(*elicitAttempt); ok && answer != nil {
		a.answered() // the client answered: its elicitation is not withdrawn
	}
	if answer != nil && answer.Action != "accept" {
		// A decline only makes things safer, so it is believed, and it
		// wins even over an approval given meanwhile: nothing runs.
		if t.Status == countersign.StatusPending {
			if g.approvals.decidesByElicitation(p) {
				t, err = g.approvals.decide(ctx, p, t.ID, false)
			} else {
				t, err = g.approvals.cancel(ctx, p, t.ID)
			}
			if err != nil {
				return g.failed(e, err), nil
			}
		}
		g.recent.forget(p, c)
		res := notRun("declined: the user declined %s (request %s); it did not run. Do not retry it unless the user asks.", e.name, t.Reference)
		setStatus(res, "declined", t.Reference)
		return res, nil
	}
	if t.Status != countersign.StatusPending {
		return g.settle(ctx, req, e, p, c, t, true)
	}
	switch {
	case answer == nil:
		return g.elicit(ctx, req, e, p, c, t, st.Mode), nil
	case st.Mode == modeForm && st.Decides && g.approvals.acceptApproves(ctx, p, t.ID):
		// The Accept is the approval of this request, whose state bound
		// it to this exact call; settle consumes it once. Only a form
		// that said so approves (sealed in its state), and only while
		// the key is marked still: a form that sent the user to the
		// inbox does not approve because the key was marked since.
		if t, err = g.approvals.decide(ctx, p, t.ID, true); err != nil {
			if countersign.ErrorCode(err) != countersign.EFORBIDDEN && countersign.ErrorCode(err) != countersign.ECONFLICT {
				return g.failed(e, err), nil
			}
			// Decided meanwhile, or it needs a passkey after all: as
			// with any other key, hold while the inbox decides.
			if t, err = g.approvals.get(ctx, p, st.Request); err != nil {
				return refused(errBadState.Error()), nil
			}
			t = g.hold(ctx, req, p, t)
		}
	default:
		t = g.hold(ctx, req, p, t)
	}
	return g.settle(ctx, req, e, p, c, t, true)
}

// settle acts on a request's state: run an approval once, report a
// decision, or say it still waits.
func (g *Gateway) settle(ctx context.Context, req *mcp.CallToolRequest, e *toolEntry, p Principal, c *pendingCall, t *ticket, fromState bool) (*mcp.CallToolResult, error) {
	g.completeURLElicitation(ctx, req, t)
	switch t.Status {
	case countersign.StatusApproved:
		used, err := g.approvals.consume(ctx, p, t.ID)
		if countersign.ErrorCode(err) == countersign.ECONFLICT {
			return refused("this approval was already used"), nil
		} else if err != nil {
			return g.failed(e, err), nil
		}
		g.recent.forget(p, c)
		return g.run(ctx, req, e, used, "confirmation")
	case countersign.StatusConsumed:
		return refused("this approval was already used"), nil
	case countersign.StatusPending:
		if fromState && newProtocol(req) {
			mode := g.choose(req, p)
			if mode == modeForm || mode == modeURL {
				return g.elicit(ctx, req, e, p, c, t, mode), nil
			}
		}
		return pendingResult(e, t, g.now()), nil
	}
	g.recent.forget(p, c) // told now: a later retry asks anew
	return decidedResult(e, t), nil
}

// reportDecided tells a retry, once, that the human decided against the
// call it last asked about; nil when there is nothing to tell.
func (g *Gateway) reportDecided(ctx context.Context, p Principal, c *pendingCall, id string) *mcp.CallToolResult {
	t, err := g.approvals.get(ctx, p, id)
	if err != nil {
		g.recent.forget(p, c)
		return nil
	}
	switch t.Status {
	case countersign.StatusDenied, countersign.StatusResponded, countersign.StatusStopped:
		g.recent.forget(p, c)
		return decidedResult(&toolEntry{name: c.Tool}, t)
	case countersign.StatusPending, countersign.StatusApproved:
		return nil
	}
	g.recent.forget(p, c) // expired, cancelled or used: ask anew
	return nil
}

// hold waits while a request is pending, up to the configured hold and
// never past its expiry, telling a client that asked for progress that it
// still waits (which also keeps its request timeout from running out).
func (g *Gateway) hold(ctx context.Context, req *mcp.CallToolRequest, p Principal, t *ticket) *ticket {
	// Each hold keeps a request open: a key gets a few at once, and a
	// retry beyond them is answered at once, still pending.
	if !g.holding.take(p.ID) {
		return t
	}
	defer g.holding.give(p.ID)
	// The hold runs on the wall clock; only the expiry is the service's.
	stop := time.Now().Add(min(g.cfg.Hold, t.ExpiresAt.Sub(g.now())))
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
		got, err := g.approvals.wait(ctx, p, t.ID, left)
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

// run forwards an approved call and logs it with its binding and outcome.
// The approval's consumption is already in the audit log.
func (g *Gateway) run(ctx context.Context, req *mcp.CallToolRequest, e *toolEntry, t *ticket, via string) (*mcp.CallToolResult, error) {
	start := time.Now()
	res, err := g.forward(ctx, req, e)
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "cancelled"
	case res.IsError:
		outcome = "tool_error"
	}
	g.log.Info("confirmed MCP call", "tool", e.name, "request", t.ID, "reference", t.Reference, "via", via,
		"outcome", outcome, "duration_ms", time.Since(start).Milliseconds())
	return res, err
}

// failed is a failure of the approval side as a tool error.
func (g *Gateway) failed(e *toolEntry, err error) *mcp.CallToolResult {
	if countersign.ErrorCode(err) == countersign.EINTERNAL {
		g.log.Error("approval request failed", "tool", e.name, "err", err)
	}
	return notRun("countersign could not ask a human about %s: %s. The call did not run.", e.name, describe(err))
}

// completeURLElicitation tells a legacy client whose URL elicitation led
// to the inbox that the page's work is done.
func (g *Gateway) completeURLElicitation(ctx context.Context, req *mcp.CallToolRequest, t *ticket) {
	if t.Status == countersign.StatusPending || req.Session == nil || newProtocol(req) || req.Params.RequestState == "" {
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
