package claudehook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client/api"
	"github.com/countersign/countersign/internal/saferm"
	"github.com/countersign/countersign/internal/visible"
)

// asker asks a human through the countersign server and turns the answer
// into the hook's outcome. It never outlives its deadline: waiting ends at
// deadline, and giving the request up ends by hard.
type asker struct {
	cfg      *saferm.Config
	c        saferm.Server
	stderr   io.Writer
	deadline time.Time // stop waiting
	hard     time.Time // stop cleaning up: the answer must be out before the hook's timeout
}

// maxPoll is one long poll; the server holds at most 60 s.
const maxPoll = 25 * time.Second

// ask creates the request, waits for its decision and returns the outcome.
func (k *asker) ask(ctx context.Context, p *Protocol, in *Input, call *Call, v Verdict) outcome {
	if k.cfg.ServerURL == "" || k.cfg.AgentKey == "" {
		return deny("countersign: this call needs a human's approval (%s), but no countersign server is configured: set COUNTERSIGN_URL and COUNTERSIGN_KEY, or server_url and agent_key in %s. The call was not run; tell the user.",
			strings.Join(v.Reasons, "; "), configName(k.cfg))
	}
	ctx, cancel := context.WithDeadline(ctx, k.deadline)
	defer cancel()
	ci := createInput(p, in, call, v, k.deadline)
	r, _, err := k.c.Create(ctx, ci)
	var ce *api.Error
	if errors.As(err, &ce) && ce.Code == string(countersign.EINVALID) && strings.Contains(ce.Message, "ttl") {
		// The server allows shorter lifetimes than this timeout: take its
		// default, the hook gives the request up at its deadline anyway.
		ci.TTLSeconds = 0
		r, _, err = k.c.Create(ctx, ci)
	}
	if err != nil {
		return k.failed(ctx, err)
	}
	fmt.Fprintf(k.stderr, "countersign: waiting for a human to decide on %s at %s\n", r.Reference, r.InboxURL)
	for r.Status == string(countersign.StatusPending) {
		left := time.Until(k.deadline)
		if left <= 0 {
			return k.timedOut(r)
		}
		got, err := k.c.Wait(ctx, r.ID, min(left, maxPoll))
		if err != nil {
			if ctx.Err() != nil {
				return k.timedOut(r)
			}
			return k.failed(ctx, err)
		}
		r = got
	}
	o := k.decided(r)
	if o.action == Allow && o.edit == nil {
		// The deletes the human approved run through the rm wrapper,
		// which would ask for them again: it is told of this approval.
		o.input = coverInput(p.Agent, in, call, v.Scope, r.ID)
	}
	return o
}

// createInput is the request for a call of the agent p: kind tool, the
// tool's name and input, which agent asks, where and in which of its
// sessions it runs, and a preview.
func createInput(p *Protocol, in *Input, call *Call, v Verdict, deadline time.Time) api.CreateInput {
	rc := saferm.CurrentContext(call.Cwd)
	// The request lives as long as the hook waits (the server's minimum is
	// 10 s), so that nobody approves what no one waits for any more.
	ttl := max(10, int(math.Ceil(time.Until(deadline).Seconds())))
	return api.CreateInput{
		Kind:        string(countersign.KindTool),
		Action:      call.Tool,
		Arguments:   arguments(in.ToolInput),
		Preview:     preview(in, call, v),
		RiskReasons: riskReasons(v.Reasons),
		Protected:   v.Protected,
		Context:     api.Context{User: visible.Line(rc.User), Host: visible.Line(rc.Hostname), Cwd: visible.Line(call.Cwd), SessionID: visible.Line(in.SessionID), Agent: p.Agent, CallID: callID(in)},
		TTLSeconds:  ttl,
		Scope:       v.Scope,
	}
}

// decided turns a decided request into the outcome.
func (k *asker) decided(r *api.Request) outcome {
	ref, by := r.Reference, r.DecidedBy
	switch countersign.Status(r.Status) {
	case countersign.StatusApproved:
		return k.consume(r)
	case countersign.StatusDenied:
		if r.Text != "" {
			return deny("countersign: %s denied this call (%s): %s", by, ref, r.Text)
		}
		return deny("countersign: %s denied this call (%s). Do not try it another way; ask the user what to do instead.", by, ref)
	case countersign.StatusResponded:
		return deny("%s\n\n(countersign: %s answered this instead of approving the call, reference %s; the call was not run)", r.Text, by, ref)
	case countersign.StatusStopped:
		o := deny("countersign: %s stopped this session (%s). Stop working and wait for the user.", by, ref)
		o.stop = true
		return o
	case countersign.StatusExpired:
		return deny("countersign: the human did not answer in time: %s expired without a decision, and the call was not run. Tell the user it needs their approval (%s); try again only when they are ready to decide.", ref, r.InboxURL)
	}
	return deny("countersign: request %s is %s; the call was not run.", ref, r.Status)
}

// consume uses an approval, once, and allows.
func (k *asker) consume(r *api.Request) outcome {
	ctx, cancel := context.WithDeadline(context.Background(), k.hard)
	defer cancel()
	used, err := k.c.Consume(ctx, r.ID)
	if err != nil {
		return deny("countersign: %s was approved, but the approval could not be used (%v); the call was not run. Try again.", r.Reference, err)
	}
	if e := editOf(used); e != nil {
		// What runs is the edit, which the caller checks and writes
		// as the agent's new input (applyEdit).
		return outcome{action: Allow, edit: e}
	}
	if r.AutoApproved {
		until := ""
		if r.AutoApproveUntil != nil {
			until = " until " + r.AutoApproveUntil.UTC().Format("15:04 UTC")
		}
		return outcome{action: Allow, reason: fmt.Sprintf("countersign: auto-approved (%s): a human allowed %s calls of this shape in this session%s", r.Reference, r.Action, until)}
	}
	return outcome{action: Allow, reason: fmt.Sprintf("countersign: approved by %s (%s)", r.DecidedBy, r.Reference)}
}

// timedOut gives the request up and denies: the hook's own deadline came
// before a decision.
func (k *asker) timedOut(r *api.Request) outcome {
	ctx, cancel := context.WithDeadline(context.Background(), k.hard)
	defer cancel()
	got, err := k.c.Cancel(ctx, r.ID)
	if err != nil {
		// A decision may have come in the last moment: take it if it did.
		if got, gerr := k.c.Get(ctx, r.ID); gerr == nil && got.Status != string(countersign.StatusPending) {
			return k.decided(got)
		}
	} else {
		r = got
	}
	return deny("countersign: the human did not answer in time: no decision on %s before this hook's timeout, so the call was not run and the request was withdrawn. Tell the user it needs their approval at %s; try again only when they are ready to decide.", r.Reference, r.InboxURL)
}

// failed denies because the server could not be asked: fail closed, and
// say which server and which setting.
func (k *asker) failed(ctx context.Context, err error) outcome {
	var ce *api.Error
	switch {
	case errors.As(err, &ce) && (ce.Status == 401 || ce.Status == 403):
		return deny("countersign: the server at %s refused the agent key (%s); check COUNTERSIGN_KEY or agent_key in %s. The call was not run; tell the user.", k.cfg.ServerURL, ce.Message, configName(k.cfg))
	case errors.As(err, &ce):
		return deny("countersign: the server at %s answered: %s. The call was not run.", k.cfg.ServerURL, ce.Message)
	case ctx.Err() != nil:
		return deny("countersign: the server at %s did not answer before this hook's timeout (COUNTERSIGN_URL or server_url in %s); the call was not run. Tell the user.", k.cfg.ServerURL, configName(k.cfg))
	}
	return deny("countersign: cannot reach the countersign server at %s (COUNTERSIGN_URL or server_url in %s): %v. The call was not run, because it needs a human's approval; tell the user.", k.cfg.ServerURL, configName(k.cfg), unwrapURL(err))
}

// unwrapURL shortens a transport error for a message.
func unwrapURL(err error) string {
	return strings.TrimPrefix(err.Error(), api.ErrUnreachable.Error()+": ")
}

// deny is a denying outcome with a formatted reason.
func deny(format string, args ...any) outcome {
	return outcome{action: Deny, reason: fmt.Sprintf(format, args...)}
}

// configName names the configuration file for messages.
func configName(c *saferm.Config) string {
	if c != nil && c.File != "" {
		return c.File
	}
	return "~/.config/countersign/config.toml"
}
