package approval

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign"
)

// Get returns a request of the agent's own key; another key's request is
// not found. Errors: ENOTFOUND.
func (s *Service) Get(ctx context.Context, agent countersign.Agent, id string) (*countersign.Request, error) {
	r, err := s.store.Request(ctx, id)
	if err != nil {
		return nil, sameNotFound(err)
	}
	if r.KeyID != agent.KeyID || r.AccountID != agent.AccountID {
		return nil, notFound()
	}
	return s.expireLazily(ctx, r)
}

// expireLazily expires a live request that is past its expiry, so that a
// read never shows an expired request as pending or approved, even between
// two sweeps.
func (s *Service) expireLazily(ctx context.Context, r *countersign.Request) (*countersign.Request, error) {
	now := s.clock.Now()
	if !r.Expired(now) {
		return r, nil
	}
	ids, err := s.store.ExpireRequests(ctx, r.ID, now)
	if err != nil {
		return nil, err
	}
	s.expired(ids)
	s.followUpExpired(ctx, ids)
	return s.store.Request(ctx, r.ID)
}

// Wait holds until the request is no longer pending, the wait ends, or ctx
// is done, and returns its current state. Errors: ENOTFOUND.
func (s *Service) Wait(ctx context.Context, agent countersign.Agent, id string, wait time.Duration) (*countersign.Request, error) {
	if wait <= 0 {
		return s.Get(ctx, agent, id)
	}
	// One read per round: the first happens inside the loop, after the
	// subscription. One timer: it rings at the end of the wait or, when
	// sooner, just after the request expires, so that the waiter sees
	// "expired" without waiting for the sweeper. Nothing of the request is
	// kept while parked but its expiry: a wait that ends undecided reads
	// it once more to answer.
	end := time.Now().Add(wait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		// Subscribe before reading, so that a change between the read
		// and the wait still rings.
		w := s.hub.Watch(id)
		got, err := OffStack(func() (*countersign.Request, error) { return s.Get(ctx, agent, id) })
		if err != nil && ctx.Err() != nil {
			// The wait was given up during a read: like any other end of
			// the wait, that answers the request's state, read on a
			// context of its own.
			w.Stop()
			return s.waitAnswer(ctx, agent, id)
		}
		if err != nil || got.Status != countersign.StatusPending {
			w.Stop()
			return got, err
		}
		d := min(time.Until(end), max(got.ExpiresAt.Sub(s.clock.Now()), 0)+10*time.Millisecond)
		got = nil
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-w.C():
			w.Stop()
			// The ring that woke this wait carries the change it was
			// for: a decided request needs no read. One that may have
			// expired meanwhile is read, and so expired.
			if got := w.Request(); got != nil && got.Status != countersign.StatusPending &&
				got.KeyID == agent.KeyID && got.AccountID == agent.AccountID && !got.Expired(s.clock.Now()) {
				c := *got
				return &c, nil
			}
		case <-timer.C:
			w.Stop()
			if !time.Now().Before(end) {
				return s.waitAnswer(ctx, agent, id)
			}
		case <-ctx.Done():
			w.Stop()
			return s.waitAnswer(ctx, agent, id)
		case <-s.hub.Closed():
			w.Stop()
			return s.waitAnswer(ctx, agent, id)
		}
	}
}

// waitAnswer reads the request to answer a wait that ended undecided: its
// time ran out, its caller went away or the server is stopping. The read
// is not cancelled with the wait's context, but bounded on its own.
func (s *Service) waitAnswer(ctx context.Context, agent countersign.Agent, id string) (*countersign.Request, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), waitAnswerTimeout)
	defer cancel()
	return OffStack(func() (*countersign.Request, error) { return s.Get(ctx, agent, id) })
}

// waitAnswerTimeout bounds the read that answers an undecided wait.
const waitAnswerTimeout = 5 * time.Second

// Consume turns an approved request into a consumed one, exactly once. A
// request an approver edited is consumed only when ctx says the caller
// runs the edited action (AcceptEdits); otherwise it is
// ErrEditNotAccepted and stays approved. Errors: ENOTFOUND, ECONFLICT.
func (s *Service) Consume(ctx context.Context, agent countersign.Agent, id string) (*countersign.Request, error) {
	return s.transition(ctx, countersign.Transition{
		ID: id, From: []countersign.Status{countersign.StatusApproved}, To: countersign.StatusConsumed,
		KeyID: agent.KeyID, AccountID: agent.AccountID, Unedited: !EditsAccepted(ctx),
	}, countersign.AuditEvent{Event: "consumed", Actor: "key:" + agent.KeyID, Detail: "{}"})
}

// acceptEditsKey marks a context whose caller runs an approver's edit.
type acceptEditsKey struct{}

// AcceptEdits returns ctx marked as the context of a caller that runs
// the action of an approval as approved, edited or not: the request's
// Arguments, never the ones it asked with. Only such a caller consumes
// an edited approval.
func AcceptEdits(ctx context.Context) context.Context {
	return context.WithValue(ctx, acceptEditsKey{}, true)
}

// EditsAccepted reports whether ctx is marked by AcceptEdits.
func EditsAccepted(ctx context.Context) bool {
	ok, _ := ctx.Value(acceptEditsKey{}).(bool)
	return ok
}

// Cancel turns a pending request into a cancelled one. Errors: ENOTFOUND,
// ECONFLICT.
func (s *Service) Cancel(ctx context.Context, agent countersign.Agent, id string) (*countersign.Request, error) {
	return s.transition(ctx, countersign.Transition{
		ID: id, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusCancelled,
		KeyID: agent.KeyID, AccountID: agent.AccountID,
	}, countersign.AuditEvent{Event: "cancelled", Actor: "key:" + agent.KeyID, Detail: "{}"})
}

// List returns the requests of the approver's account, newest first.
func (s *Service) List(ctx context.Context, ap countersign.ApproverPrincipal, f countersign.RequestFilter) ([]*countersign.Request, error) {
	if f.Status != "" && !f.Status.Valid() {
		return nil, countersign.Errorf(countersign.EINVALID, "status must be one of pending, approved, denied, responded, stopped, expired, cancelled, consumed")
	}
	for _, st := range f.Statuses {
		if !st.Valid() {
			return nil, countersign.Errorf(countersign.EINVALID, "unknown status %q", st)
		}
	}
	if f.Kind != "" && !f.Kind.Valid() {
		return nil, countersign.Errorf(countersign.EINVALID, "kind must be one of rm, tool, mcp, generic")
	}
	if f.Limit < 0 || f.Limit > 500 {
		return nil, countersign.Errorf(countersign.EINVALID, "limit must be between 1 and 500")
	}
	if f.Reference != "" {
		ref, ok := countersign.ParseReference(f.Reference)
		if !ok {
			return nil, countersign.Errorf(countersign.EINVALID, "reference must look like K7F-2QX")
		}
		f.Reference = ref
	}
	f.AccountID = ap.AccountID
	// Sweep first, so that a list of pending requests holds none that has
	// expired since the last sweep.
	if _, err := s.Sweep(ctx); err != nil {
		return nil, err
	}
	return s.store.Requests(ctx, f)
}

// Find returns one request of the approver's account by request id, or by
// the reference code of the account's newest request that has it. Errors:
// ENOTFOUND.
func (s *Service) Find(ctx context.Context, ap countersign.ApproverPrincipal, idOrRef string) (*countersign.Request, error) {
	var r *countersign.Request
	if strings.HasPrefix(idOrRef, "req_") {
		got, err := s.store.Request(ctx, idOrRef)
		if err != nil {
			return nil, sameNotFound(err)
		}
		r = got
	} else {
		ref, ok := countersign.ParseReference(idOrRef)
		if !ok {
			return nil, notFound()
		}
		list, err := s.store.Requests(ctx, countersign.RequestFilter{AccountID: ap.AccountID, Reference: ref, Limit: 1})
		if err != nil {
			return nil, err
		} else if len(list) == 0 {
			return nil, notFound()
		}
		r = list[0]
	}
	if r.AccountID != ap.AccountID {
		return nil, notFound()
	}
	return s.expireLazily(ctx, r)
}

// Decide records the first decision on a pending request. The first
// decision wins: the change is one conditional update, and a later one gets
// ECONFLICT. Errors: EINVALID, ENOTFOUND, ECONFLICT.
func (s *Service) Decide(ctx context.Context, ap countersign.ApproverPrincipal, idOrRef string, d countersign.DecisionInput) (*countersign.Request, error) {
	to, ok := d.Decision.Status()
	if !ok {
		return nil, countersign.Errorf(countersign.EINVALID, "decision must be one of approve, deny, respond, stop")
	}
	if err := validText("text", d.Text, maxText, d.Decision == countersign.DecisionRespond); err != nil {
		return nil, err
	}
	if d.AutoApproveMinutes != 0 && (d.Decision != countersign.DecisionApprove || d.AutoApproveMinutes < 1 || d.AutoApproveMinutes > 60) {
		return nil, countersign.Errorf(countersign.EINVALID, "auto_approve_minutes goes only with approve, from 1 to 60")
	}
	if d.Edit != nil && d.Decision != countersign.DecisionApprove {
		return nil, countersign.Errorf(countersign.EINVALID, "edit goes only with approve")
	}
	if d.Edit != nil && d.AutoApproveMinutes != 0 {
		return nil, countersign.Errorf(countersign.EINVALID, "an edited action opens no auto-approve window; approve the edit without auto_approve_minutes")
	}
	if err := s.checkTeams(ctx); err != nil {
		return nil, err
	}
	if strings.HasPrefix(idOrRef, "req_") && d.AutoApproveMinutes == 0 && d.Edit == nil && d.Binding == "" && !s.stepUpPossible(d) && s.cfg.Teams == nil {
		// By id and without a window, nothing of the request is needed
		// before the change: the conditional update checks the account,
		// the state and the expiry. When it refuses, the way through
		// Find below expires a request whose time has passed and says
		// why; a request the approver may not see is not found either
		// way.
		got, err := s.decide(ctx, ap, idOrRef, to, d, nil, nil)
		if err == nil || countersign.ErrorCode(err) == countersign.ENOTFOUND {
			return got, err
		}
	}
	r, err := s.Find(ctx, ap, idOrRef)
	if err != nil {
		return nil, err
	}
	if err := sawAction(r, d); err != nil {
		return nil, err
	}
	if d.Edit != nil {
		if !ap.Role.Decides() {
			return nil, ErrViewer()
		}
		edited, same, err := s.editRequest(r, *d.Edit)
		if err != nil {
			return nil, err
		}
		if !same {
			return s.decideEdited(ctx, ap, r, edited, d)
		}
	}
	rule := s.cfg.Teams.Rule(r)
	if rule != nil {
		if err := s.mayDecide(ap, rule); err != nil {
			return nil, err
		}
	}
	if err := s.checkStepUp(r, d); err != nil {
		return nil, err
	}
	if rule != nil && rule.Votes() && d.Decision == countersign.DecisionApprove {
		return s.vote(ctx, ap, r, rule, d)
	}
	return s.decide(ctx, ap, r.ID, to, d, r, nil)
}

// sawAction refuses an approval d of r that names the binding of another
// action than r's, or, on a pending request another approver edited,
// names none: its approver did not see the action as it now is.
func sawAction(r *countersign.Request, d countersign.DecisionInput) error {
	switch {
	case d.Decision != countersign.DecisionApprove:
		return nil
	case d.Binding != "" && d.Binding != r.BindingHash():
		return countersign.Errorf(countersign.ECONFLICT, "the request's action changed since it was read; reload the request and decide again")
	case d.Binding == "" && d.Edit == nil && r.Original != nil && r.Status == countersign.StatusPending:
		return countersign.Errorf(countersign.ECONFLICT, "an approver edited this request's action since it was asked; "+
			"review the edited action and approve it naming its binding_hash")
	}
	return nil
}

// decideEdited approves r as the approver's edit makes it (edited): the
// team rules and the step-up of both the original and the edited request
// apply, the passkey binding the edited one. On a request that needs
// several votes, the edit replaces the action and is the approver's vote
// for it; the votes for the action before it count for nothing.
func (s *Service) decideEdited(ctx context.Context, ap countersign.ApproverPrincipal, r, edited *countersign.Request, d countersign.DecisionInput) (*countersign.Request, error) {
	var voting *TeamRule
	for _, x := range []*countersign.Request{edited, r} {
		rule := s.cfg.Teams.Rule(x)
		if rule == nil {
			continue
		}
		if err := s.mayDecide(ap, rule); err != nil {
			return nil, err
		}
		if rule.Votes() && voting == nil {
			voting = rule
		}
	}
	if s.cfg.StepUp.Requires(r, d) && !s.cfg.StepUp.Requires(edited, d) {
		return nil, ErrPasskeyNeeded // never reached: an edit only adds risk
	}
	if err := s.checkStepUp(edited, d); err != nil {
		return nil, err
	}
	if voting != nil {
		return s.voteAs(ctx, ap, r, voting, d, edited)
	}
	return s.decideAs(ctx, ap, r.ID, countersign.StatusApproved, d, edited, nil, edited)
}

// decide makes the change of a decision on the request id. r, the request
// as read, is needed only to open an auto-approve window. by is the agent
// key whose client's answer to an elicitation is the decision
// (DecideByElicitation), nil for an approver's.
func (s *Service) decide(ctx context.Context, ap countersign.ApproverPrincipal, id string, to countersign.Status, d countersign.DecisionInput, r *countersign.Request, by *countersign.Agent) (*countersign.Request, error) {
	return s.decideAs(ctx, ap, id, to, d, r, by, nil)
}

// decideAs is decide, approving the request as edited when edited is set
// (see Service.Edited).
func (s *Service) decideAs(ctx context.Context, ap countersign.ApproverPrincipal, id string, to countersign.Status, d countersign.DecisionInput, r *countersign.Request, by *countersign.Agent, edited *countersign.Request) (*countersign.Request, error) {
	if !ap.Role.Decides() {
		return nil, ErrViewer()
	}
	now := s.clock.Now()
	t := countersign.Transition{
		ID: id, From: []countersign.Status{countersign.StatusPending}, To: to, Now: now,
		AccountID: ap.AccountID, DecidedBy: ap.Username, Reason: d.Text,
	}
	detail := map[string]any{}
	if to == countersign.StatusApproved {
		// The store keeps the later of this and the request's expiry.
		t.ExpiresAt = now.Add(s.cfg.ConsumeGrace)
	}
	if d.AutoApproveMinutes > 0 {
		if r.Context.SessionID == "" {
			return nil, countersign.Errorf(countersign.EINVALID, "this request names no agent session, so no auto-approve window can be opened; approve it without one")
		}
		t.Window = &countersign.AutoApproveWindow{
			ID: countersign.NewID("win_"), AccountID: r.AccountID, KeyID: r.KeyID, SessionID: r.Context.SessionID,
			Kind: r.Kind, Action: WindowAction(r.Kind, r.Action), Until: now.Add(time.Duration(d.AutoApproveMinutes) * time.Minute),
			CreatedAt: now, RequestID: r.ID, Scope: windowScope(r),
		}
		detail["auto_approve_minutes"] = d.AutoApproveMinutes
	}
	if d.Text != "" {
		detail["text"] = d.Text
	}
	if edited != nil {
		t.Edited = edited
		editDetail(detail, edited)
	}
	if v := d.Verified; v != nil {
		detail["verified"] = v.Method
		detail["credential_id"] = v.CredentialID
	}
	actor := "approver:" + ap.Username
	if by != nil {
		actor = "key:" + by.KeyID
		detail["decided_by"] = DecidedByElicitation
	}
	b, _ := json.Marshal(detail)
	got, err := s.transition(ctx, t, countersign.AuditEvent{Event: string(to), Actor: actor, Detail: string(b)})
	if err != nil {
		return nil, err
	}
	s.metrics.decided(got)
	s.log.Info("request decided", "request", got.ID, "reference", got.Reference, "status", got.Status, "approver", ap.Username)
	return got, nil
}

// transition runs one conditional change and rings the hub after it is
// committed.
func (s *Service) transition(ctx context.Context, t countersign.Transition, ev countersign.AuditEvent) (*countersign.Request, error) {
	if t.Now.IsZero() {
		t.Now = s.clock.Now()
	}
	r, err := s.store.Transition(ctx, t, ev)
	if err != nil {
		return nil, sameNotFound(err)
	}
	rung := *r // the waiters' own copy: the caller may change r
	s.hub.NotifyRequest(&rung)
	s.hub.Notify(AccountTopic(r.AccountID))
	s.metrics.entered(r)
	s.followUp(ctx, r)
	return r, nil
}

// Sweep expires every live request that is past its expiry and wakes its
// waiters. It returns how many it expired.
func (s *Service) Sweep(ctx context.Context) (int, error) {
	ids, err := s.store.ExpireRequests(ctx, "", s.clock.Now())
	if err != nil {
		return 0, err
	}
	s.expired(ids)
	s.followUpExpired(ctx, ids)
	return len(ids), nil
}

func (s *Service) expired(list []countersign.Expired) {
	for _, e := range list {
		s.hub.Notify(e.ID)
		s.hub.Notify(AccountTopic(e.AccountID))
		s.metrics.requests.Inc(string(e.Kind), string(countersign.StatusExpired))
	}
}

// RunSweeper sweeps every SweepInterval until ctx is done.
func (s *Service) RunSweeper(ctx context.Context) {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("sweep expired requests", "err", err)
			} else if n > 0 {
				s.log.Info("requests expired", "count", n)
			}
		}
	}
}

func notFound() error {
	return countersign.Errorf(countersign.ENOTFOUND, "no such request")
}

// sameNotFound gives every not-found of a request one message, whether the
// request does not exist or belongs to another key or account, so that the
// answer never tells which.
// ErrViewer is the refusal of a decision by an approver whose role in the
// account lets them see its requests, not decide them. Nothing changes.
func ErrViewer() error {
	return countersign.Errorf(countersign.EFORBIDDEN, "your role in this account is viewer: you may see its requests, not decide them; an admin of the account can make you an approver")
}

func sameNotFound(err error) error {
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return notFound()
	}
	return err
}

// OffStack runs fn on another goroutine and returns its result. A long
// poll's goroutine stays parked for up to a minute with the stack its
// deepest call grew, and the store's calls are deep (modernc.org/sqlite is
// transpiled C): reading elsewhere keeps each of thousands of parked waits
// small. The reads run on a few long-lived workers, whose stacks have grown
// once, so that no read pays for growing a new stack; when every worker is
// busy, fn runs on a goroutine of its own.
func OffStack[T any](fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	job := func() {
		v, err := fn()
		ch <- result{v, err}
	}
	startWorkers.Do(func() {
		for range offStackWorkers {
			go func() {
				for job := range offStackJobs {
					job()
				}
			}()
		}
	})
	select {
	case offStackJobs <- job:
	default:
		go job()
	}
	r := <-ch
	return r.v, r.err
}

// offStackWorkers is how many goroutines run OffStack's calls: about as
// many as the store has read connections, a few more for the waits on the
// writer.
const offStackWorkers = 16

var (
	offStackJobs = make(chan func()) // unbuffered: taken only by an idle worker
	startWorkers sync.Once
)
