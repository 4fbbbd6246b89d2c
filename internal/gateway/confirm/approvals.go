package confirm

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
)

// ApprovalTTL is how long an MCP approval request waits for a human.
const ApprovalTTL = 10 * time.Minute

// pendingCall is a call that needs a human, with its binding.
type pendingCall struct {
	Tool string // exposed name: the request's action
	approval.Binding
	SessionID string
	// Tier is the tool's tier, a fact of the request that the server's
	// rules (step-up, windows) and the binding of a retry read.
	Tier countersign.Tier
	// Reasons are the request's risk reasons: the tool's tier in words,
	// for the human.
	Reasons []string
}

// ticket is an approval request as the gateway sees it.
type ticket struct {
	ID        string
	Reference string // as shown: K7F-2QX
	Status    countersign.Status
	ExpiresAt time.Time
	InboxURL  string // "" where no link may be shown (the local page)
	Text      string // the deny reason, or the human's answer
	// Action, ArgsHash and PreviewHash are the request's binding: the
	// edited action's when an approver edited it (Edited), whose
	// arguments are then Arguments, and Original the binding of the call
	// as asked.
	Action      string
	ArgsHash    string
	PreviewHash string
	Arguments   json.RawMessage
	Edited      bool
	Original    *originalCall
}

// originalCall is the binding of the call an agent asked about, kept on a
// request an approver edited before approving it.
type originalCall struct {
	ArgsHash    string
	PreviewHash string
}

// approvals is where the gateway's approval requests live: the approval
// service in process (countersign serve, and the standalone gateway on its
// own store), or a countersign server through the v1 API. Errors carry the
// codes of countersign's catalogue.
type approvals interface {
	// ask files a request for the call, or returns the identical pending
	// one of the principal with created false.
	ask(ctx context.Context, p gateway.Principal, c *pendingCall) (t *ticket, created bool, err error)
	get(ctx context.Context, p gateway.Principal, id string) (*ticket, error)
	// wait holds up to d while the request is pending.
	wait(ctx context.Context, p gateway.Principal, id string, d time.Duration) (*ticket, error)
	consume(ctx context.Context, p gateway.Principal, id string) (*ticket, error)
	cancel(ctx context.Context, p gateway.Principal, id string) (*ticket, error)
	// take consumes an approved request of the principal with the call's
	// binding, or else one an approver edited from the call, without its
	// id (hint: the id of the last request asked for this call, if
	// known). ENOTFOUND when there is none.
	take(ctx context.Context, p gateway.Principal, c *pendingCall, hint string) (*ticket, error)
	// decide records the user's answer to a form elicitation as the
	// decision: where there is no approver to ask (the standalone
	// gateway), or for a key the operator marked (elicitation_decides).
	// Elsewhere decidesByElicitation is false and the decision is made in
	// the inbox.
	decide(ctx context.Context, p gateway.Principal, id string, approve bool) (*ticket, error)
	// decidesByElicitation reports whether p's answers to form
	// elicitations are decisions at all.
	decidesByElicitation(p gateway.Principal) bool
	// acceptApproves reports whether p's Accept approves the request id:
	// the answers decide, and the request needs no passkey.
	acceptApproves(ctx context.Context, p gateway.Principal, id string) bool
	// hasInbox reports whether there is an inbox a URL elicitation can
	// open.
	hasInbox() bool
	// announce tells the human about a new request through a channel of
	// its own: the standalone gateway opens its local page; a server's
	// notifications need nothing here.
	announce(ctx context.Context, t *ticket) error
}

// serviceApprovals asks the approval service in process.
type serviceApprovals struct {
	svc *approval.Service
	// inbox is the public URL the inbox is under; nil: no link is shown.
	inbox *url.URL
	// decider, when set, names who decides through elicitation answers:
	// the standalone gateway, where every answer decides.
	decider string
	// elicits says which keys' answers decide with a server (their
	// elicitation_decides); nil: none.
	elicits func(gateway.Principal) bool
	// page opens the local approval page of the standalone gateway.
	page *localPage
}

func (s *serviceApprovals) input(c *pendingCall) countersign.CreateInput {
	return countersign.CreateInput{Kind: countersign.KindMCP, Action: c.Tool, Arguments: c.Args, Preview: c.Preview,
		RiskReasons: c.Reasons, Tier: c.Tier, Context: countersign.RequestContext{SessionID: c.SessionID}, TTL: ApprovalTTL}
}

func (s *serviceApprovals) ticket(r *countersign.Request, err error) (*ticket, error) {
	if err != nil {
		return nil, err
	}
	t := &ticket{ID: r.ID, Reference: countersign.FormatReference(r.Reference), Status: r.Status, ExpiresAt: r.ExpiresAt, Text: r.Reason,
		Action: r.Action, ArgsHash: r.ArgsHash, PreviewHash: r.PreviewHash, Arguments: r.Arguments}
	if r.Original != nil {
		t.Edited, t.Original = true, &originalCall{ArgsHash: r.Original.ArgsHash, PreviewHash: r.Original.PreviewHash}
	}
	if s.inbox != nil {
		t.InboxURL = strings.TrimRight(s.inbox.String(), "/") + "/approvals/" + url.PathEscape(r.ID)
	}
	return t, nil
}

func (s *serviceApprovals) ask(ctx context.Context, p gateway.Principal, c *pendingCall) (*ticket, bool, error) {
	r, created, err := s.svc.Create(ctx, p.Agent(), s.input(c))
	t, err := s.ticket(r, err)
	return t, created, err
}

func (s *serviceApprovals) get(ctx context.Context, p gateway.Principal, id string) (*ticket, error) {
	return s.ticket(s.svc.Get(ctx, p.Agent(), id))
}

func (s *serviceApprovals) wait(ctx context.Context, p gateway.Principal, id string, d time.Duration) (*ticket, error) {
	return s.ticket(s.svc.Wait(ctx, p.Agent(), id, d))
}

func (s *serviceApprovals) consume(ctx context.Context, p gateway.Principal, id string) (*ticket, error) {
	// The gateway runs an approval's action as approved, an approver's
	// edit of the arguments included (approvedArgs).
	return s.ticket(s.svc.Consume(approval.AcceptEdits(ctx), p.Agent(), id))
}

func (s *serviceApprovals) cancel(ctx context.Context, p gateway.Principal, id string) (*ticket, error) {
	return s.ticket(s.svc.Cancel(ctx, p.Agent(), id))
}

func (s *serviceApprovals) take(ctx context.Context, p gateway.Principal, c *pendingCall, _ string) (*ticket, error) {
	// An approval an approver edited is found by the call as asked, and
	// run with its edited arguments (approvedArgs).
	return s.ticket(s.svc.TakeApproval(approval.AcceptEdits(ctx), p.Agent(), s.input(c)))
}

func (s *serviceApprovals) decide(ctx context.Context, p gateway.Principal, id string, approve bool) (*ticket, error) {
	if s.decider == "" {
		if s.elicits == nil || !s.elicits(p) {
			return nil, countersign.Errorf(countersign.EFORBIDDEN, "an MCP client's answer is not a decision here; approve in the inbox")
		}
		return s.ticket(s.svc.DecideByElicitation(ctx, p.Agent(), id, approve))
	}
	d := countersign.DecisionDeny
	if approve {
		d = countersign.DecisionApprove
	}
	ap := countersign.ApproverPrincipal{Username: s.decider, AccountID: p.Account, Role: countersign.RoleApprover}
	return s.ticket(s.svc.Decide(ctx, ap, id, countersign.DecisionInput{Decision: d}))
}

func (s *serviceApprovals) decidesByElicitation(p gateway.Principal) bool {
	return s.decider != "" || (s.elicits != nil && s.elicits(p))
}

func (s *serviceApprovals) acceptApproves(ctx context.Context, p gateway.Principal, id string) bool {
	if s.decider != "" {
		return true
	}
	return s.elicits != nil && s.elicits(p) && s.svc.ElicitationDecides(ctx, p.Agent(), id)
}

func (s *serviceApprovals) hasInbox() bool { return s.inbox != nil }

func (s *serviceApprovals) announce(ctx context.Context, t *ticket) error {
	if s.page == nil {
		return nil
	}
	return s.page.open(ctx, t.ID)
}

// clientApprovals asks a countersign server through the v1 API, with the
// gateway's agent key.
type clientApprovals struct {
	c *client.Client
}

func (a *clientApprovals) ticket(r *client.Request, err error) (*ticket, error) {
	if err != nil {
		return nil, apiError(err)
	}
	t := &ticket{ID: r.ID, Reference: countersign.FormatReference(r.Reference), Status: countersign.Status(r.Status),
		ExpiresAt: r.ExpiresAt, InboxURL: r.InboxURL, Text: r.Text,
		Action: r.Action, ArgsHash: r.ArgsHash, PreviewHash: r.PreviewHash, Arguments: r.Arguments, Edited: r.Edited}
	if r.Original != nil {
		// An answer that says edited without the original, or the other
		// way round, binds to no call: the check before running refuses.
		t.Original = &originalCall{ArgsHash: r.Original.ArgsHash, PreviewHash: r.Original.PreviewHash}
	}
	return t, nil
}

// apiError gives an error answer of the server the code of the catalogue
// it carries, so that the gateway tells "not found" from "limited" alike
// in and out of process.
func apiError(err error) error {
	var e *client.Error
	if errors.As(err, &e) {
		return &countersign.Error{Code: e.Code, Message: e.Message}
	}
	return err
}

func (a *clientApprovals) ask(ctx context.Context, _ gateway.Principal, c *pendingCall) (*ticket, bool, error) {
	r, created, err := a.c.Create(ctx, a.input(c))
	t, err := a.ticket(r, err)
	return t, created, err
}

func (a *clientApprovals) get(ctx context.Context, _ gateway.Principal, id string) (*ticket, error) {
	return a.ticket(a.c.Get(ctx, id))
}

// wait long-polls in steps the server allows (at most 60 s each).
func (a *clientApprovals) wait(ctx context.Context, _ gateway.Principal, id string, d time.Duration) (*ticket, error) {
	deadline := time.Now().Add(d)
	for {
		step := min(time.Until(deadline), 55*time.Second)
		t, err := a.ticket(a.c.Wait(ctx, id, max(step, 0)))
		if err != nil || t.Status != countersign.StatusPending || time.Until(deadline) <= 0 || ctx.Err() != nil {
			return t, err
		}
	}
}

func (a *clientApprovals) consume(ctx context.Context, _ gateway.Principal, id string) (*ticket, error) {
	return a.ticket(a.c.Consume(ctx, id))
}

func (a *clientApprovals) cancel(ctx context.Context, _ gateway.Principal, id string) (*ticket, error) {
	return a.ticket(a.c.Cancel(ctx, id))
}

// take consumes an approval the human gave for this call, found by its
// binding on the server, not by a hint the gateway kept: a gateway that
// restarted finds it too. The server checks the key.
func (a *clientApprovals) take(ctx context.Context, _ gateway.Principal, c *pendingCall, _ string) (*ticket, error) {
	return a.ticket(a.c.Take(ctx, a.input(c)))
}

func (a *clientApprovals) input(c *pendingCall) client.CreateInput {
	return client.CreateInput{Kind: string(countersign.KindMCP), Action: c.Tool,
		Arguments: c.Args, Preview: c.Preview, RiskReasons: c.Reasons, Tier: string(c.Tier), Context: client.Context{SessionID: c.SessionID},
		TTLSeconds: int(ApprovalTTL / time.Second)}
}

func (a *clientApprovals) decide(context.Context, gateway.Principal, string, bool) (*ticket, error) {
	return nil, countersign.Errorf(countersign.EFORBIDDEN, "an agent key never decides; approve in the inbox")
}

func (a *clientApprovals) decidesByElicitation(gateway.Principal) bool { return false }

func (a *clientApprovals) acceptApproves(context.Context, gateway.Principal, string) bool {
	return false
}

func (a *clientApprovals) hasInbox() bool { return true }

func (a *clientApprovals) announce(context.Context, *ticket) error { return nil }

// describe is an error of the approval side as the model should read it.
func describe(err error) string {
	var e *countersign.Error
	if !errors.As(err, &e) && errors.Is(err, client.ErrUnreachable) {
		return "the countersign server cannot be reached"
	}
	return gateway.Describe(err)
}
