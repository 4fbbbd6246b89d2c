package confirm

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// How a call is confirmed.
const (
	modeForm    = "form"    // an elicitation form (a, b)
	modeURL     = "url"     // a URL elicitation of the inbox page (c)
	modePending = "pending" // the approval_pending result and a retry (d)
)

// elicitationID names the gateway's one input request.
const elicitationID = "countersign_approval"

// choose picks how to ask, from what the client declared on this request
// (2026-07-28) or its session (older): an elicitation where the client can
// take one, else the approval_pending result. A legacy client over the
// stateless HTTP endpoint has no capabilities in its ephemeral session, and
// so gets approval_pending, the only thing that can reach it.
func (f *Confirmation) choose(req *mcp.CallToolRequest, p gateway.Principal) string {
	caps := req.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil {
		return modePending
	}
	el := caps.Elicitation
	form := el.Form != nil || el.URL == nil // {} is form, for clients older than 2025-11-25
	url := el.URL != nil
	switch {
	case f.approvals.decidesByElicitation(p) && form:
		// The answer to the form may be the decision (standalone, or a
		// key marked elicitation_decides): ask there.
		return modeForm
	case !f.approvals.hasInbox():
		// Standalone: a URL elicitation would carry the local page's
		// link, a capability, where the client might show it to the
		// model: never.
		return modePending
	case url:
		// With a server the decision is made in the inbox, which a URL
		// elicitation opens directly.
		return modeURL
	}
	return modeForm
}

// elicit returns the input_required result of an elicitation about t, with
// the sealed state the retry must carry.
func (f *Confirmation) elicit(ctx context.Context, a *ask, t *ticket, mode string) *mcp.CallToolResult {
	p, c := a.Principal, a.c
	if at, ok := ctx.Value(elicitKey{}).(*elicitAttempt); ok {
		at.set(a.name(), t, p)
	}
	st := requestState{Principal: p.ID, Account: p.Account, Tool: a.name(), ArgsHash: c.ArgsHash, PreviewHash: c.PreviewHash,
		Request: t.ID, Mode: mode, Expires: t.ExpiresAt.Unix()}
	var params *mcp.ElicitParams
	switch {
	case mode == modeURL:
		params = &mcp.ElicitParams{Mode: "url", URL: t.InboxURL, ElicitationID: t.ID,
			Message: fmt.Sprintf("countersign: approve request %s (%s) in the inbox, then come back here.", t.Reference, a.name())}
	case f.approvals.acceptApproves(ctx, p, t.ID):
		st.Decides = true
		params = &mcp.ElicitParams{Mode: "form", RequestedSchema: emptyForm(),
			Message: fmt.Sprintf("Allow this call once? (countersign request %s)\n\n%s\n\nAccept runs it once; Decline refuses it.", t.Reference, c.Preview)}
	default:
		params = &mcp.ElicitParams{Mode: "form", RequestedSchema: emptyForm(),
			Message: fmt.Sprintf("A human must approve this call before it runs (countersign request %s).\n\n%s\n\n"+
				"Approve it in the countersign inbox: %s\nthen choose Accept here to continue. Decline cancels the request.",
				t.Reference, c.Preview, t.InboxURL)}
	}
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{elicitationID: params}, RequestState: f.states.seal(st)}
}

// emptyForm is the schema of a yes-or-no elicitation: no fields, the answer
// is the action (accept, decline, cancel).
func emptyForm() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

// elicitAnswer is the client's answer to the gateway's elicitation, nil
// when it sent none.
func elicitAnswer(m mcp.InputResponseMap) *mcp.ElicitResult {
	r, _ := m[elicitationID].(*mcp.ElicitResult)
	return r
}

// pendingResult is the approval_pending result: what the model must pass on
// (where to approve, the reference, the expiry) and what to do after. It is
// an error result, so that no client holds it against the tool's output
// schema, and it has not run.
func pendingResult(tool string, t *ticket, now time.Time) *mcp.CallToolResult {
	where := fmt.Sprintf("Ask the user to approve request %s in the countersign inbox: %s", t.Reference, t.InboxURL)
	if t.InboxURL == "" {
		where = fmt.Sprintf("A confirmation page for request %s opened in a browser on this computer: ask the user to approve it there.", t.Reference)
	}
	text := fmt.Sprintf("approval_pending: %s has not run; it needs a human's approval first.\n%s\n"+
		"The approval expires at %s (%s). Once the user has approved it, call %s again with exactly the same arguments: "+
		"the approval is used once, by that call only. If the user denies it, do not retry.",
		tool, where, t.ExpiresAt.UTC().Format("15:04:05 MST on 2 Jan 2006"), inWords(t.ExpiresAt.Sub(now)), tool)
	res := notRun("%s", text)
	if t.InboxURL != "" {
		res.Meta["countersign/inbox_url"] = t.InboxURL
	}
	res.Meta["countersign/expires_at"] = t.ExpiresAt.UTC().Format(time.RFC3339)
	setStatus(res, "approval_pending", t.Reference)
	return res
}

// decidedResult tells the model what became of a request that did not end
// in an approval it can use.
func decidedResult(tool string, t *ticket) *mcp.CallToolResult {
	var res *mcp.CallToolResult
	switch t.Status {
	case countersign.StatusDenied:
		reason := ""
		if t.Text != "" {
			reason = fmt.Sprintf(" The reason given: %q.", t.Text)
		}
		res = notRun("denied: a human denied %s (request %s); it did not run.%s Do not retry it unless the user asks.", tool, t.Reference, reason)
	case countersign.StatusResponded:
		res = notRun("answered: instead of approving %s (request %s), the human answered: %q. The call did not run.", tool, t.Reference, t.Text)
	case countersign.StatusStopped:
		res = notRun("stopped: the human asked to stop (request %s for %s). The call did not run; stop and ask the user how to go on.", t.Reference, tool)
	case countersign.StatusExpired:
		res = notRun("expired: nobody approved %s (request %s) in time; it did not run. Call it again to ask anew if it is still wanted.", tool, t.Reference)
	case countersign.StatusCancelled:
		res = notRun("cancelled: request %s for %s was cancelled; the call did not run.", t.Reference, tool)
	default:
		res = notRun("the approval request %s for %s is %s; the call did not run.", t.Reference, tool, t.Status)
	}
	setStatus(res, string(t.Status), t.Reference)
	return res
}

// refused is a confirmation that countersign does not accept: a bad or
// spent request state, or an approval already used.
func refused(why string) *mcp.CallToolResult {
	res := notRun("refused: countersign refused this confirmation: %s. The call did not run; call the tool again without it to ask anew.", why)
	setStatus(res, "refused", "")
	return res
}

// notRun is an error result of a call that did not run.
var notRun = gateway.NotRun

// toolError is an error result of a call that failed on the upstream side.
var toolError = gateway.ToolError

// setStatus adds the machine-readable outcome to a result's _meta.
func setStatus(res *mcp.CallToolResult, status, reference string) {
	res.Meta["countersign/status"] = status
	if reference != "" {
		res.Meta["countersign/reference"] = reference
	}
}

// inWords is a duration as a person says it: "in about 10 minutes".
func inWords(d time.Duration) string {
	switch {
	case d <= 0:
		return "now"
	case d < 90*time.Second:
		return fmt.Sprintf("in %d seconds", int(math.Ceil(d.Seconds())))
	}
	return fmt.Sprintf("in about %d minutes", int(math.Round(d.Minutes())))
}

// elicitKey holds an *elicitAttempt in the context of a tools/call.
type elicitKey struct{}

// elicitAttempt is the request a call asked about by elicitation, so that
// a client that cannot answer it still learns where to approve.
type elicitAttempt struct {
	mu    sync.Mutex
	tool  string
	t     *ticket
	p     gateway.Principal
	timer *time.Timer // withdraws an elicitation left unanswered
}

// answered stops the withdrawal of the elicitation.
func (a *elicitAttempt) answered() {
	a.mu.Lock()
	if a.timer != nil {
		a.timer.Stop()
	}
	a.mu.Unlock()
}

func (a *elicitAttempt) set(tool string, t *ticket, p gateway.Principal) {
	a.mu.Lock()
	a.tool, a.t, a.p = tool, t, p
	a.mu.Unlock()
}

func (a *elicitAttempt) get() (string, *ticket, gateway.Principal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tool, a.t, a.p
}

// Middleware answers approval_pending, instead of an error, a legacy
// client that declared elicitation but could not answer the
// elicitation/create the SDK sent it (no handler: -32601; a handler that
// failed), or left it unanswered for the hold: that elicitation is then
// withdrawn (the SDK sends notifications/cancelled), so that the call
// still ends before the client's own request timeout. The request stays
// for the inbox (or the local page, which it then opens), and the model's
// retry takes its approval.
func (f *Confirmation) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		callCtx, withdraw := context.WithCancel(ctx)
		defer withdraw()
		a := &elicitAttempt{}
		wait := f.cfg.Hold // the hold bounds the answer too: both fit in a client's timeout
		if wait <= 0 {
			wait = gateway.DefaultHold
		}
		a.timer = time.AfterFunc(wait, func() {
			if _, t, _ := a.get(); t != nil {
				withdraw()
			}
		})
		defer a.answered()
		res, err := next(context.WithValue(callCtx, elicitKey{}, a), method, req)
		tool, t, p := a.get()
		if err == nil || t == nil || ctx.Err() != nil {
			return res, err
		}
		if callCtx.Err() != nil {
			// Withdrawn: the SDK sends notifications/cancelled off the
			// caller's path; over HTTP it must go out on this call's
			// stream before the result ends it. A rare path, after a
			// whole hold: a moment more costs nothing.
			time.Sleep(50 * time.Millisecond)
		}
		f.log.Info("the client could not answer the elicitation; told approval_pending", "tool", tool, "request", t.ID, "err", err)
		if got, gerr := f.approvals.get(ctx, p, t.ID); gerr == nil {
			t = got
		}
		if t.Status != countersign.StatusPending {
			return decidedOrPending(tool, t, f.now()), nil
		}
		if aerr := f.approvals.announce(ctx, t); aerr != nil {
			f.approvals.cancel(ctx, p, t.ID)
			return toolError("countersign could not show the confirmation page (%v), and the client could not answer its question; the call did not run.", aerr), nil
		}
		return pendingResult(tool, t, f.now()), nil
	}
}

// decidedOrPending tells a decision that came while the client failed to
// answer; an approval is taken by the retry.
func decidedOrPending(tool string, t *ticket, now time.Time) *mcp.CallToolResult {
	if t.Status == countersign.StatusApproved {
		return pendingResult(tool, t, now)
	}
	return decidedResult(tool, t)
}
