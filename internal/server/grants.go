package server

import (
	"net/http"
	"slices"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// grantsPage is the data of the page that lists an account's grants.
type grantsPage struct {
	pageBase
	Grants []*countersign.Grant
}

// grantList lists the grants of the session's account: client, approver,
// tiers, created, last used.
func (s *Server) grantList(w http.ResponseWriter, r *http.Request, b *browser) error {
	base, err := s.base(r.Context(), b)
	if err != nil {
		return err
	}
	list, err := s.oauth.Grants(r.Context(), b.session.AccountID)
	if err != nil {
		return err
	}
	return s.render(w, http.StatusOK, "grants", grantsPage{pageBase: base, Grants: list})
}

// revokeGrant revokes a grant of the session's account; another account's
// grant is not found. Revoking the grant this browser's session came from
// signs this browser out too.
func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request, b *browser) error {
	id := r.PathValue("id")
	if !b.approver.Role.Administers() {
		// Not an admin: only a grant this approver allowed, which they
		// may always take back.
		list, err := s.oauth.Grants(r.Context(), b.session.AccountID)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(list, func(g *countersign.Grant) bool { return g.ID == id && g.ApproverID == b.approver.ApproverID }) {
			return identity.ErrNotAdmin()
		}
	}
	err := s.oauth.RevokeGrant(r.Context(), b.session.AccountID, id)
	if countersign.ErrorCode(err) == countersign.ENOTFOUND {
		return countersign.Errorf(countersign.ENOTFOUND, "no such grant")
	} else if err != nil && countersign.ErrorCode(err) != countersign.ECONFLICT {
		return err
	}
	s.log.Info("oauth grant revoked", "grant", id, "reason", "revoked in the inbox", "approver", b.approver.Username)
	if b.session.GrantID == id {
		s.clearSessionCookie(w)
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return nil
	}
	http.Redirect(w, r, "/grants", http.StatusSeeOther)
	return nil
}
