package countersign

import (
	"context"
	"slices"
	"time"
)

// Vote is one approver's approval of a request that needs several
// (a quorum): bound to the request's BindingHash, and counted once per
// approver whatever session or token it came from.
type Vote struct {
	RequestID   string
	ApproverID  string
	Username    string
	BindingHash string
	CreatedAt   time.Time
}

// VoteInput is a vote to record, with what decides whether it is the last
// one the request needs.
type VoteInput struct {
	Vote
	// AccountID must be the request's account; another account's request
	// is ENOTFOUND.
	AccountID string
	// Quorum is how many votes of distinct approvers approve the request
	// (at least 1).
	Quorum int
	// Separate keeps the approver who made the asking agent key, or who
	// allowed the grant whose key it is, from voting on its requests.
	Separate bool
	// ExpiresAt, when not zero, is the least expiry the request keeps
	// once approved, as Transition's.
	ExpiresAt time.Time
	// Now is when the vote is cast: the request must be pending and not
	// expired at Now.
	Now time.Time
	// Members: only the votes of approvers who may decide the request
	// now count toward Quorum, and only those cast at or after the human
	// last stopped the request's agent session (of its key), as a stop
	// ends the approvals given before it. Who may decide is a member of
	// the account whose role decides and, when Routed is not nil, whom
	// Routed names (usernames). The vote of anyone else (an approver
	// since made a viewer, taken out of the account or no longer routed
	// the request) stays recorded, but counts for nothing. Both are read
	// inside the vote's transaction: a change of membership or a stop
	// committed before the vote is seen by it, and one that comes later
	// comes after the vote. Without Members, every vote counts.
	Members bool
	Routed  []string
	// Edited, when set, is the request as the voter's edit makes it
	// (see Transition.Edited): in the same transaction its action
	// replaces the request's, which must still hold the binding of
	// Edited.Original and no original of its own (else ECONFLICT), and
	// the vote, for Edited's binding (v.BindingHash), is counted with
	// only the votes for that binding: those cast before the edit count
	// for nothing, and their approvers may vote again.
	Edited *Request
}

// MayCount reports whether the member's votes count under v (Members):
// their role decides, and Routed, when set, names them.
func (v *VoteInput) MayCount(m *Member) bool {
	return m.Role.Decides() && (v.Routed == nil || slices.Contains(v.Routed, m.Username))
}

// CountedVotes returns the votes of votes cast for binding (the
// request's BindingHash now: a vote for the action before an approver
// edited it counts for nothing), whose approver is in counted (any, when
// counted is nil) and that were cast at or after since, in their order.
func CountedVotes(votes []Vote, binding string, counted []string, since time.Time) []Vote {
	out := []Vote{}
	for _, v := range votes {
		if v.BindingHash == binding && (counted == nil || slices.Contains(counted, v.ApproverID)) && !v.CreatedAt.Before(since) {
			out = append(out, v)
		}
	}
	return out
}

// VoteStore records the votes of requests that need several approvers.
type VoteStore interface {
	// Vote records v in one transaction: the request must be of
	// v.AccountID (else ENOTFOUND), pending and unexpired at v.Now, and
	// have v.BindingHash (else ECONFLICT), or with v.Edited be edited in
	// the same transaction; a second vote of the same approver for the
	// same binding is ErrAlreadyVoted and changes nothing, while one for
	// the binding of an edit replaces the approver's earlier vote; with v.Separate,
	// a vote of the approver who made the request's key or allowed its
	// grant is ErrOwnKey. It writes voted for the vote; when the votes
	// that count (v.Members) reach v.Quorum it moves the request to approved in the same
	// transaction, with one conditional statement (DecidedBy the voters'
	// usernames in the order they voted), and writes approved. It returns
	// the request as it is after the vote and its votes that count,
	// oldest first.
	// Errors: ENOTFOUND, ECONFLICT, EFORBIDDEN.
	Vote(ctx context.Context, v VoteInput, voted, approved AuditEvent) (*Request, []Vote, error)
	// Votes returns the votes of a request, oldest first; none is not an
	// error.
	Votes(ctx context.Context, requestID string) ([]Vote, error)
}

// ErrAlreadyVoted is the conflict of a second vote of one approver on a
// request: a vote counts once per person, whatever session or token it
// came from.
func ErrAlreadyVoted() *Error {
	return Errorf(ECONFLICT, "you have already approved this request; it needs the approval of another approver")
}

// ErrOwnKey is the refusal of a vote of the approver who made the asking
// agent key, or allowed the grant whose key it is, on a request whose rule
// keeps them apart.
func ErrOwnKey() *Error {
	return Errorf(EFORBIDDEN, "you made or allowed the agent key that asks, and this request needs the approval of other approvers")
}

// VotersOf is the DecidedBy of a request its votes approved: the voters'
// usernames in the order they voted.
func VotersOf(votes []Vote) string {
	s := ""
	for i, v := range votes {
		if i > 0 {
			s += ", "
		}
		s += v.Username
	}
	return s
}

// ErrVoteBinding is the conflict of a vote cast for another binding than
// the request's: what the approver saw is not what would be approved.
func ErrVoteBinding() *Error {
	return Errorf(ECONFLICT, "this vote is for another binding than the request's; reload the request and decide again")
}
