package approval

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/bashscope"
)

// applyCoverage approves a delete of the rm wrapper at once when the
// approval of the Claude Code hook it names (coveredBy) was given for
// exactly this delete: the same key and agent session, a Bash call the
// hook consumed, the same resolved targets, each one a delete of the
// command line the human saw (CoveredDeletes), holding no more files or bytes
// than the human saw, no risk the hook's request lacked, within that
// approval's lifetime, and no stop of the session since. The approval covers one delete at most; the claim
// is recorded in the store before the request, and the request's audit
// entry says which approval covered it. Anything else is not an error:
// the delete is asked like any other, so a reference the agent made up
// gets nothing.
func (s *Service) applyCoverage(ctx context.Context, r *countersign.Request, coveredBy string, rule *TeamRule, ev *countersign.AuditEvent, extra map[string]string) (bool, error) {
	if coveredBy == "" || !strings.HasPrefix(coveredBy, "req_") {
		return false, nil
	}
	h, err := s.store.Request(ctx, coveredBy)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if !coversDelete(h, r) || (rule != nil && !rule.May(h.DecidedBy)) {
		// Nor does the approval of an approver a team rule does not
		// route the delete to cover it.
		return false, nil
	}
	if stopped, err := s.stoppedSince(ctx, r, h.DecidedAt); err != nil || stopped {
		return false, err
	}
	err = s.store.ClaimCoverage(ctx, countersign.Coverage{ApprovalID: h.ID, RequestID: r.ID, CreatedAt: r.CreatedAt})
	if code := countersign.ErrorCode(err); code == countersign.ECONFLICT || code == countersign.ENOTFOUND {
		return false, nil // already used for another delete
	} else if err != nil {
		return false, err
	}
	r.Status = countersign.StatusApproved
	r.DecidedAt = r.CreatedAt
	r.DecidedBy = countersign.DecidedByCoverage
	// The wrapper uses the approval at once; it lasts no longer than the
	// one that covers it, and at least the grace to be consumed in.
	usable := h.ExpiresAt
	if grace := r.CreatedAt.Add(s.cfg.ConsumeGrace); grace.After(usable) {
		usable = grace
	}
	if usable.Before(r.ExpiresAt) {
		r.ExpiresAt = usable
	}
	ev.Event = "covered"
	extra["covered_by"] = h.ID
	extra["covered_by_reference"] = countersign.FormatReference(h.Reference)
	return true, nil
}

// coversDelete reports whether the hook's request h covers the wrapper's
// request r, as applyCoverage says.
func coversDelete(h, r *countersign.Request) bool {
	hs, rs := h.Scope, r.Scope
	switch {
	case h.AccountID != r.AccountID || h.KeyID != r.KeyID:
		return false
	case h.Kind != countersign.KindTool || h.Action != "Bash" || h.Status != countersign.StatusConsumed:
		return false
	case h.Context.SessionID == "" || h.Context.SessionID != r.Context.SessionID:
		return false
	case !r.CreatedAt.Before(h.ExpiresAt):
		return false
	case hs == nil || rs == nil || len(rs.Paths) == 0 || !slices.Equal(CoveredDeletes(h), rs.Paths):
		return false
	case rs.Files > hs.Files || rs.Bytes > hs.Bytes || (rs.FilesCapped && !hs.FilesCapped):
		return false // grown since the human saw it
	case r.Protected && !h.Protected:
		return false // a protected path the human was not told of
	}
	for _, c := range rs.Classes {
		if unbounded(c) || !slices.Contains(hs.Classes, c) {
			return false
		}
	}
	return true
}

// CoveredDeletes returns the paths of the one delete of the rm wrapper
// that approving r once also lets run without asking again: for a Bash
// call of the Claude Code hook in an agent session, the paths its scope
// names, when each of them is a path the command line shown to the human
// deletes (bashscope.Ties: an operand of rm or unlink, or a root of
// find -delete, resolved against the request's working directory). The
// server cannot look at the agent's files, so it checks the paths against
// the words of the line: a path it cannot tie to the line, or a line it
// cannot follow, makes the approval cover nothing (nil), and the delete
// is asked again.
func CoveredDeletes(r *countersign.Request) []string {
	if r.Kind != countersign.KindTool || r.Action != "Bash" || r.Context.SessionID == "" || r.Scope == nil {
		return nil
	}
	if !bashscope.Ties(bashCommand(r.Arguments), r.Context.Cwd, r.Scope.Paths) {
		return nil
	}
	return r.Scope.Paths
}

// stoppedSince reports whether the human stopped r's agent session (of
// r's key) at or after since: the hook's approval was used, but a stop
// ends what it still gives.
func (s *Service) stoppedSince(ctx context.Context, r *countersign.Request, since time.Time) (bool, error) {
	last, err := s.lastStop(ctx, r)
	return !last.IsZero() && !last.Before(since), err
}
