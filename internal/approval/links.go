package approval

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/countersign/countersign"
)

// Link actions.
const (
	LinkApprove     = "approve"
	LinkDeny        = "deny"
	LinkRespond     = "respond"
	LinkAutoApprove = "auto_approve"
	LinkStop        = "stop"
)

// DecidedByLink is who decided through an e-mailed link: whoever held the
// link, which is all the server knows.
const DecidedByLink = "email link"

// NewLinks draws one 32-byte token per action. It returns the tokens, to
// put in URLs once, and the links to store, which hold only their hashes.
func NewLinks(actions ...string) (map[string]string, []countersign.Link) {
	tokens := make(map[string]string, len(actions))
	links := make([]countersign.Link, 0, len(actions))
	for _, a := range actions {
		b := make([]byte, 32)
		rand.Read(b)
		tok := hex.EncodeToString(b)
		tokens[a] = tok
		links = append(links, countersign.Link{Hash: countersign.HashSecret(tok), Action: a})
	}
	return tokens, links
}

// LinkRequest returns the request a link opens: the token must belong to
// the request of that seed id, for that action. An unknown token, another
// request's token and another action's token are all ENOTFOUND alike.
func (s *Service) LinkRequest(ctx context.Context, seedID, action, token string) (*countersign.Request, error) {
	if len(token) != 64 {
		return nil, linkNotFound()
	}
	r, err := s.store.RequestBySeedID(ctx, seedID)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, linkNotFound()
	} else if err != nil {
		return nil, err
	}
	l, err := s.store.Link(ctx, countersign.HashSecret(strings.ToLower(token)))
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, linkNotFound()
	} else if err != nil {
		return nil, err
	}
	if l.RequestID != r.ID || l.Action != action {
		return nil, linkNotFound()
	}
	return s.expireLazily(ctx, r)
}

// DecideByLink takes the decision a link stands for. The decision is the
// request's first or none, so a link works once and every other link of the
// request dies with it.
func (s *Service) DecideByLink(ctx context.Context, seedID, action, token string, d countersign.DecisionInput) (*countersign.Request, error) {
	r, err := s.LinkRequest(ctx, seedID, action, token)
	if err != nil {
		return nil, err
	}
	return s.decideByLink(ctx, r, action, d)
}

// decideByLink takes the decision of the link of action on r, unless r's
// account has a viewer: a link decides for whoever holds it, and a viewer
// may read the channel that carried it.
func (s *Service) decideByLink(ctx context.Context, r *countersign.Request, action string, d countersign.DecisionInput) (*countersign.Request, error) {
	d, ok := linkDecision(action, d)
	if !ok {
		return nil, linkNotFound()
	}
	if err := s.LinksDecide(ctx, r); err != nil {
		return nil, err
	}
	ap := countersign.ApproverPrincipal{Username: DecidedByLink, AccountID: r.AccountID, Role: countersign.RoleApprover}
	return s.Decide(ctx, ap, r.ID, d)
}

// LinksDecide returns ErrLinksOff when no link may decide r now (its
// account has a viewer), so that a link's page says so before anyone
// presses its button; nil otherwise.
func (s *Service) LinksDecide(ctx context.Context, r *countersign.Request) error {
	viewers, err := s.hasViewers(ctx, r.AccountID)
	if err != nil {
		return err
	}
	if viewers {
		return ErrLinksOff()
	}
	return nil
}

// ErrLinksOff is the refusal of a one-time link on an account that has a
// viewer. Nothing changes.
func ErrLinksOff() error {
	return countersign.Errorf(countersign.EFORBIDDEN, "this account has viewers, so a link decides nothing: decide it in the inbox, signed in")
}

// hasViewers reports whether any member of the account is a viewer. Such
// an account's notifications carry no one-time links, and the links sent
// before a viewer joined decide nothing: a link stands for no approver,
// and the people who read the account's channels may include one who may
// see its requests but not decide them.
func (s *Service) hasViewers(ctx context.Context, accountID string) (bool, error) {
	members, err := s.store.Members(ctx, accountID)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(members, func(m *countersign.Member) bool { return !m.Role.Decides() }), nil
}

// linkDecision is the decision a link's action stands for, with only the
// details that action may carry.
func linkDecision(action string, d countersign.DecisionInput) (countersign.DecisionInput, bool) {
	switch action {
	case LinkApprove:
		return countersign.DecisionInput{Decision: countersign.DecisionApprove}, true
	case LinkDeny:
		return countersign.DecisionInput{Decision: countersign.DecisionDeny, Text: d.Text}, true
	case LinkRespond:
		return countersign.DecisionInput{Decision: countersign.DecisionRespond, Text: d.Text}, true
	case LinkAutoApprove:
		return countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: d.AutoApproveMinutes}, true
	case LinkStop:
		return countersign.DecisionInput{Decision: countersign.DecisionStop, Text: d.Text}, true
	}
	return countersign.DecisionInput{}, false
}

func linkNotFound() error {
	return countersign.Errorf(countersign.ENOTFOUND, "this link is not valid")
}

// SeedRequest returns a request by the id its seed-compatible client chose,
// for the unsigned status routes of the seed's API, which show only its
// status. Errors: ENOTFOUND.
func (s *Service) SeedRequest(ctx context.Context, seedID string) (*countersign.Request, error) {
	r, err := s.store.RequestBySeedID(ctx, seedID)
	if err != nil {
		return nil, err
	}
	return s.expireLazily(ctx, r)
}

// TokenLink returns the request a one-time link of a notification opens,
// found by its token alone, and the link's action. The links a token alone
// opens are those of one decision without further details: approve, deny,
// respond and stop; an unknown token and any other link are ENOTFOUND
// alike.
func (s *Service) TokenLink(ctx context.Context, token string) (*countersign.Request, string, error) {
	if len(token) != 64 {
		return nil, "", linkNotFound()
	}
	l, err := s.store.Link(ctx, countersign.HashSecret(strings.ToLower(token)))
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, "", linkNotFound()
	} else if err != nil {
		return nil, "", err
	}
	switch l.Action {
	case LinkApprove, LinkDeny, LinkRespond, LinkStop:
	default:
		return nil, "", linkNotFound()
	}
	r, err := s.store.Request(ctx, l.RequestID)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return nil, "", linkNotFound()
	} else if err != nil {
		return nil, "", err
	}
	r, err = s.expireLazily(ctx, r)
	if err != nil {
		return nil, "", err
	}
	return r, l.Action, nil
}

// DecideByToken takes the decision of a link found by its token alone. Like
// every link, it works once: the decision is the request's first or none.
// Errors: EINVALID, ENOTFOUND, ECONFLICT.
func (s *Service) DecideByToken(ctx context.Context, token string, d countersign.DecisionInput) (*countersign.Request, error) {
	r, action, err := s.TokenLink(ctx, token)
	if err != nil {
		return nil, err
	}
	return s.decideByLink(ctx, r, action, d)
}
