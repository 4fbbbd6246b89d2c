package server

import (
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// The account API lets an admin of an account manage it with an approver
// token: its agent keys, its approvers' roles and its OAuth grants
// (identity.Manager). Any other role is refused (identity.ErrNotAdmin).

// manage runs h with the manager of the token's account.
func (s *Server) manage(h func(http.ResponseWriter, *http.Request, *identity.Manager) error) apiHandler {
	return s.approver(func(w http.ResponseWriter, r *http.Request, ap countersign.ApproverPrincipal) error {
		m, err := (&identity.Admin{Store: s.cfg.Store}).Manage(r.Context(), ap)
		if err != nil {
			return err
		}
		return h(w, r, m)
	})
}

func (s *Server) accountRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/account/keys", s.api(s.manage(s.listKeys)))
	mux.HandleFunc("POST /api/v1/account/keys", s.api(s.manage(s.createKey)))
	mux.HandleFunc("DELETE /api/v1/account/keys/{key}", s.api(s.manage(s.revokeKey)))
	mux.HandleFunc("GET /api/v1/account/approvers", s.api(s.manage(s.listMembers)))
	mux.HandleFunc("PUT /api/v1/account/approvers/{username}", s.api(s.manage(s.putMember)))
	mux.HandleFunc("DELETE /api/v1/account/approvers/{username}", s.api(s.manage(s.removeMember)))
	mux.HandleFunc("GET /api/v1/account/grants", s.api(s.manage(s.listGrants)))
	mux.HandleFunc("DELETE /api/v1/account/grants/{id}", s.api(s.manage(s.revokeGrantAPI)))
}

type keyJSON struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Hint      string     `json:"hint"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Secret is the new key's secret, in the answer to its creation only.
	Secret string `json:"secret,omitempty"`
}

func keyOf(k *countersign.AgentKey) keyJSON {
	return keyJSON{ID: k.ID, Name: k.Name, Hint: k.Hint, CreatedAt: k.CreatedAt, RevokedAt: timeOrNil(k.RevokedAt)}
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, m *identity.Manager) error {
	keys, err := m.Keys(r.Context())
	if err != nil {
		return err
	}
	out := struct {
		Keys []keyJSON `json:"keys"`
	}{Keys: make([]keyJSON, 0, len(keys))}
	for _, k := range keys {
		out.Keys = append(out.Keys, keyOf(k))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, m *identity.Manager) error {
	var in struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	k, secret, err := m.CreateKey(r.Context(), in.Name)
	if err != nil {
		return err
	}
	s.log.Info("agent key created through the API", "account", m.Account().Name, "key", k.Name)
	out := keyOf(k)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, m *identity.Manager) error {
	g, err := m.RevokeKey(r.Context(), r.PathValue("key"))
	if err != nil {
		return err
	}
	s.log.Info("agent key revoked through the API", "account", m.Account().Name)
	out := struct {
		Revoked      bool   `json:"revoked"`
		RevokedGrant string `json:"revoked_grant,omitempty"`
	}{Revoked: true}
	if g != nil {
		out.RevokedGrant = g.ID
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type memberJSON struct {
	Username    string           `json:"username"`
	Role        countersign.Role `json:"role"`
	MemberSince time.Time        `json:"member_since"`
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request, m *identity.Manager) error {
	members, err := m.Members(r.Context())
	if err != nil {
		return err
	}
	out := struct {
		Approvers []memberJSON `json:"approvers"`
	}{Approvers: make([]memberJSON, 0, len(members))}
	for _, x := range members {
		out.Approvers = append(out.Approvers, memberJSON{Username: x.Username, Role: x.Role, MemberSince: x.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) putMember(w http.ResponseWriter, r *http.Request, m *identity.Manager) error {
	var in struct {
		Role countersign.Role `json:"role"`
	}
	if err := decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	username := r.PathValue("username")
	added, err := m.PutMember(r.Context(), username, in.Role)
	if err != nil {
		return err
	}
	s.log.Info("approver's role set through the API", "account", m.Account().Name, "approver", username, "role", in.Role, "added", added)
	status := http.StatusOK
	if added {
		status = http.StatusCreated
	}
	writeJSON(w, status, memberJSON{Username: username, Role: in.Role})
	return nil
}

func (s *Server) removeMember(w http.ResponseWriter, r *http.Request, m *identity.Manager) error {
	username := r.PathValue("username")
	revoked, err := m.RemoveMember(r.Context(), username)
	if err != nil {
		return err
	}
	s.log.Info("approver removed from the account through the API", "account", m.Account().Name, "approver", username, "grants_revoked", len(revoked))
	out := struct {
		Removed       bool     `json:"removed"`
		RevokedGrants []string `json:"revoked_grants"`
	}{Removed: true, RevokedGrants: append([]string{}, revoked...)}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type grantJSON struct {
	ID         string     `json:"id"`
	Client     string     `json:"client"`
	Key        string     `json:"key"`
	Approver   string     `json:"approver"`
	Tiers      []string   `json:"tiers"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

func (s *Server) listGrants(w http.ResponseWriter, r *http.Request, m *identity.Manager) error {
	grants, err := m.Grants(r.Context())
	if err != nil {
		return err
	}
	out := struct {
		Grants []grantJSON `json:"grants"`
	}{Grants: make([]grantJSON, 0, len(grants))}
	for _, g := range grants {
		out.Grants = append(out.Grants, grantJSON{ID: g.ID, Client: g.ClientName, Key: g.KeyName, Approver: g.ApproverName,
			Tiers: g.Tiers, CreatedAt: g.CreatedAt, LastUsedAt: timeOrNil(g.LastUsedAt), RevokedAt: timeOrNil(g.RevokedAt)})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) revokeGrantAPI(w http.ResponseWriter, r *http.Request, m *identity.Manager) error {
	id := r.PathValue("id")
	if err := m.RevokeGrant(r.Context(), id); err != nil {
		return err
	}
	s.log.Info("oauth grant revoked", "grant", id, "reason", "revoked through the API")
	writeJSON(w, http.StatusOK, struct {
		Revoked bool `json:"revoked"`
	}{true})
	return nil
}
