package approval

import (
	"context"
	"encoding/json"
	"time"

	"github.com/countersign/countersign"
)

// mayDecide refuses a decision on a request of rule by an approver the
// rule does not route it to, or by one of the service's own deciders (an
// e-mailed link, an MCP client's answer, the gateway's local page), which
// stand for no approver and so can be neither routed to nor counted.
func (s *Service) mayDecide(ap countersign.ApproverPrincipal, rule *TeamRule) error {
	if !rule.Routed() && !rule.Votes() {
		return nil
	}
	if ap.ApproverID == "" {
		return ErrNeedsApprover(rule)
	}
	if !rule.May(ap.Username) {
		return ErrNotRouted(rule)
	}
	return nil
}

// vote records the approver's approval of r as one vote of those rule
// asks for. The vote that reaches the quorum approves r in the same
// transaction; an earlier one leaves r pending, and so unusable.
func (s *Service) vote(ctx context.Context, ap countersign.ApproverPrincipal, r *countersign.Request, rule *TeamRule, d countersign.DecisionInput) (*countersign.Request, error) {
	return s.voteAs(ctx, ap, r, rule, d, nil)
}

// voteAs is vote, with the approver's edit of the request (edited, see
// Service.Edited) made in the same transaction when set: the vote is for
// the edited binding, and the votes for the action before it count for
// nothing.
func (s *Service) voteAs(ctx context.Context, ap countersign.ApproverPrincipal, r *countersign.Request, rule *TeamRule, d countersign.DecisionInput, edited *countersign.Request) (*countersign.Request, error) {
	if !ap.Role.Decides() {
		return nil, ErrViewer()
	}
	if d.AutoApproveMinutes > 0 {
		return nil, countersign.Errorf(countersign.EINVALID, "this request needs %s, so no auto-approve window can be opened on it; approve it without one", rule.needs())
	}
	now := s.clock.Now()
	hash := r.BindingHash()
	if edited != nil {
		hash = edited.BindingHash()
	}
	detail := map[string]any{"binding_hash": hash, "quorum": rule.Quorum}
	if edited != nil {
		editDetail(detail, edited)
	}
	if v := d.Verified; v != nil {
		detail["verified"] = v.Method
		detail["credential_id"] = v.CredentialID
	}
	b, _ := json.Marshal(detail)
	done, _ := json.Marshal(map[string]any{"binding_hash": hash, "quorum": rule.Quorum})
	actor := "approver:" + ap.Username
	counted, err := s.counted(ctx, r.AccountID, rule)
	if err != nil {
		return nil, err
	}
	if len(counted) < rule.Quorum {
		s.log.Warn("a team rule's quorum is out of reach", "request", r.ID, "route", rule.Route, "quorum", rule.Quorum, "approvers", len(counted))
		return nil, ErrQuorumOutOfReach(rule, len(counted))
	}
	// Who counts and the session's last stop are read again in the
	// vote's own transaction: a removal or a stop in between is seen.
	got, votes, err := s.store.Vote(ctx, countersign.VoteInput{
		Vote:      countersign.Vote{RequestID: r.ID, ApproverID: ap.ApproverID, Username: ap.Username, BindingHash: hash, CreatedAt: now},
		AccountID: ap.AccountID, Quorum: rule.Quorum, Separate: rule.Separate, ExpiresAt: now.Add(s.cfg.ConsumeGrace), Now: now,
		Members: true, Routed: routed(rule), Edited: edited,
	}, countersign.AuditEvent{Event: "voted", Actor: actor, Detail: string(b)},
		countersign.AuditEvent{Event: string(countersign.StatusApproved), Actor: actor, Detail: string(done)})
	if err != nil {
		return nil, sameNotFound(err)
	}
	s.log.Info("request voted", "request", got.ID, "reference", got.Reference, "approver", ap.Username, "votes", len(votes), "quorum", rule.Quorum)
	if got.Status == countersign.StatusPending {
		// Nothing an agent waits for changed; the inbox shows the vote.
		s.hub.Notify(AccountTopic(got.AccountID))
		return got, nil
	}
	rung := *got
	s.hub.NotifyRequest(&rung)
	s.hub.Notify(AccountTopic(got.AccountID))
	s.metrics.entered(got)
	s.followUp(ctx, got)
	s.metrics.decided(got)
	s.log.Info("request decided", "request", got.ID, "reference", got.Reference, "status", got.Status, "approver", got.DecidedBy)
	return got, nil
}

// ErrQuorumOutOfReach is the refusal of an approval that could never be
// counted to the quorum: fewer approvers may decide the request than it
// needs, as when one the rule names was taken out of the account or made
// a viewer. Nothing changes; a deny still ends the request.
func ErrQuorumOutOfReach(rule *TeamRule, may int) error {
	who := "approvers"
	if may == 1 {
		who = "approver"
	}
	return countersign.Errorf(countersign.ECONFLICT, "this request needs %d approvals, but only %d %s of the account may give them (%s): the operator must change the teams configuration; you may still deny it",
		rule.Quorum, may, who, rule.Route)
}

// counted returns the ids of the approvers whose votes count toward the
// quorum of a request of rule in the account: its members who decide now
// and whom the rule routes it to. A vote cast before its approver was
// made a viewer, taken out of the account, or left out of the rule, counts
// for nothing; nor does the vote of an approver removed and made again
// under the same name, which would make one person two voters.
func (s *Service) counted(ctx context.Context, accountID string, rule *TeamRule) ([]string, error) {
	members, err := s.store.Members(ctx, accountID)
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, m := range members {
		if m.Role.Decides() && rule.May(m.Username) {
			ids = append(ids, m.ApproverID)
		}
	}
	return ids, nil
}

// routed is who a vote under rule may come from, as VoteInput.Routed
// says it: nil for any approver of the account whose role decides.
func routed(rule *TeamRule) []string {
	if !rule.Routed() {
		return nil
	}
	return rule.Approvers
}

// lastStop returns when the human last stopped r's agent session (of r's
// key), zero for never or for a request of no session: the votes cast
// before it count for nothing, as the approvals given before it end.
func (s *Service) lastStop(ctx context.Context, r *countersign.Request) (time.Time, error) {
	var last time.Time
	if r.Context.SessionID == "" {
		return last, nil
	}
	list, err := s.store.Requests(ctx, countersign.RequestFilter{AccountID: r.AccountID, Status: countersign.StatusStopped,
		SessionID: r.Context.SessionID, Limit: 100})
	if err != nil {
		return last, err
	}
	for _, x := range list {
		if x.KeyID == r.KeyID && x.DecidedAt.After(last) {
			last = x.DecidedAt
		}
	}
	return last, nil
}

// Team is what the inbox shows of a request's team rule: who it is
// routed to, and how many approvals it needs and has.
type Team struct {
	// Route names the approvers who may decide it ("group:sre"); empty
	// when any approver of the account may.
	Route string
	// May reports whether the approver asking may decide it.
	May bool
	// Quorum is how many approvals it needs; Votes are those it has
	// that count, oldest first. Quorum is 0 for a request the first decision ends.
	Quorum int
	Votes  []countersign.Vote
}

// TeamOf returns what the team rule of the approver's account's request r
// says of it for ap, nil when no rule routes it or counts its approvals.
func (s *Service) TeamOf(ctx context.Context, ap countersign.ApproverPrincipal, r *countersign.Request) (*Team, error) {
	rule := s.cfg.Teams.Rule(r)
	if rule == nil || r.AccountID != ap.AccountID || (!rule.Routed() && !rule.Votes()) {
		return nil, nil
	}
	t := &Team{May: ap.Role.Decides() && rule.May(ap.Username)}
	if rule.Routed() {
		t.Route = rule.Route
	}
	if rule.Votes() {
		t.Quorum = rule.Quorum
		votes, err := s.store.Votes(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if len(votes) == 0 {
			// No vote yet, as on most rows of an inbox: nothing to weigh.
			t.Votes = votes
			return t, nil
		}
		counted, err := s.counted(ctx, r.AccountID, rule)
		if err != nil {
			return nil, err
		}
		since, err := s.lastStop(ctx, r)
		if err != nil {
			return nil, err
		}
		t.Votes = countersign.CountedVotes(votes, r.BindingHash(), counted, since)
	}
	return t, nil
}

// openedByRouted reports whether the auto-approve window w was opened by
// an approver rule routes its requests to: a window opened before the
// rule, by another approver, approves none of them. A window whose
// opening request is gone approves none either.
func (s *Service) openedByRouted(ctx context.Context, w *countersign.AutoApproveWindow, rule *TeamRule) (bool, error) {
	if rule == nil || !rule.Routed() {
		return true, nil
	}
	opened, err := s.store.Request(ctx, w.RequestID)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return rule.May(opened.DecidedBy), nil
}
