package approval

import (
	"context"

	"github.com/countersign/countersign"
)

// Notifier builds the notifications of requests: who is told, and what
// they need to act. It only builds; the service stores what it builds, with
// the request where it can, so that the rule of what is told lives in one
// place and the service stays the only one that changes state.
type Notifier interface {
	// Announce returns the outbox items that tell an account's channels
	// about a new pending request, and the one-time links they carry, to
	// be stored in the request's own transaction. r has its id, account,
	// binding and expiry, but not yet its reference code.
	Announce(ctx context.Context, r *countersign.Request) ([]countersign.OutboxItem, []countersign.Link, error)
	// FollowUp returns the outbox items that tell the channels able to
	// take it that r is no longer pending (decided, expired or cancelled).
	FollowUp(ctx context.Context, r *countersign.Request) ([]countersign.OutboxItem, error)
}

// announce adds the notifications of a new pending request to it, so that
// CreateRequest stores them with the request. A failure to build them is
// logged and leaves the request without notifications: a notification never
// blocks or fails the agent's request.
func (s *Service) announce(ctx context.Context, r *countersign.Request) {
	n := s.cfg.Notifier
	if n == nil || r.Status != countersign.StatusPending {
		return
	}
	r.Audience = s.audience(r)
	if r.Audience == nil {
		// An account with a viewer gets no one-time links either: its
		// channels may be read by someone who may not decide.
		viewers, err := s.hasViewers(ctx, r.AccountID)
		if err != nil {
			s.log.Error("read the account's members; the request goes on without notifications", "request", r.ID, "err", err)
			return
		}
		if viewers {
			r.Audience = &countersign.Audience{NoLinks: true}
		}
	}
	items, links, err := n.Announce(ctx, r)
	r.Audience = nil
	if err != nil {
		s.log.Error("prepare notifications; the request goes on without them", "request", r.ID, "err", err)
		return
	}
	r.Links = append(r.Links, links...)
	r.Outbox = items
}

// followUp enqueues the follow-ups of a request that left pending. It runs
// after the change is committed; a failure is logged and changes nothing
// else (a crash between the two loses only the follow-up).
func (s *Service) followUp(ctx context.Context, r *countersign.Request) {
	n := s.cfg.Notifier
	if n == nil {
		return
	}
	switch r.Status {
	case countersign.StatusApproved, countersign.StatusDenied, countersign.StatusResponded,
		countersign.StatusStopped, countersign.StatusCancelled, countersign.StatusExpired:
	default:
		return
	}
	// The follow-up must go out even when the caller has gone (an agent
	// that cancelled and hung up), but no longer than a store call takes.
	ctx = context.WithoutCancel(ctx)
	c := *r
	c.Audience = s.audience(r)
	items, err := n.FollowUp(ctx, &c)
	if err == nil && len(items) > 0 {
		err = s.store.Enqueue(ctx, items, s.clock.Now())
	}
	if err != nil {
		s.log.Error("enqueue follow-up notifications", "request", r.ID, "status", r.Status, "err", err)
	}
}

// followUpExpired enqueues the follow-ups of requests that expired.
func (s *Service) followUpExpired(ctx context.Context, list []countersign.Expired) {
	if s.cfg.Notifier == nil {
		return
	}
	for _, e := range list {
		r, err := s.store.Request(context.WithoutCancel(ctx), e.ID)
		if err != nil {
			s.log.Error("read an expired request for its follow-ups", "request", e.ID, "err", err)
			continue
		}
		s.followUp(ctx, r)
	}
}

// audience is who r's notifications are for under the team rules: the
// approvers a rule routes it to, and no decision link when a rule routes
// it or counts its approvals; nil when no rule does. announce adds that an
// account with a viewer gets no decision link.
func (s *Service) audience(r *countersign.Request) *countersign.Audience {
	rule := s.cfg.Teams.Rule(r)
	if rule == nil || (!rule.Routed() && !rule.Votes()) {
		return nil
	}
	return &countersign.Audience{Approvers: rule.Approvers, NoLinks: true}
}
