package identity_test

import (
	"context"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/testutil"
)

// TestAllowNeedsProof: the service makes no grant without a fresh proof of
// the approver who allows, whoever calls it: none, another approver's, or
// a passkey's made for another consent are refused and make nothing; a
// password's or a passkey's of exactly this consent make the grant.
func TestAllowNeedsProof(t *testing.T) {
	w := testutil.NewWorld(t)
	o := &identity.OAuth{Store: w.Store, Clock: w.Clock, Resource: "http://127.0.0.1:8080/mcp"}
	c, _, err := o.Register(w.Ctx, &identity.ClientMetadata{RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"},
		TokenEndpointAuthMethod: "none"}, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	in := identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: w.Alice.ID, Username: w.Alice.Username, AccountID: w.Acme.ID, Role: countersign.RoleAdmin},
		AccountID: w.Acme.ID, Client: c, RedirectURI: c.RedirectURIs[0], Challenge: identity.S256(strings.Repeat("v", 43)), Tiers: []string{"write", "read"}}
	other := in
	other.Tiers = []string{"read", "write", "commit"}
	for name, proof := range map[string]*identity.ConsentProof{
		"no proof":                      nil,
		"another approver's password":   identity.PasswordProof(w.Bob.ID),
		"an unknown method":             {Method: "cookie", ApproverID: w.Alice.ID},
		"a passkey of no consent":       {Method: identity.ProofPasskey, ApproverID: w.Alice.ID},
		"a passkey of more tiers":       {Method: identity.ProofPasskey, ApproverID: w.Alice.ID, Binding: other.Binding().Hash()},
		"another approver's passkey":    {Method: identity.ProofPasskey, ApproverID: w.Bob.ID, Binding: in.Binding().Hash()},
		"a password of no one at all":   {Method: identity.ProofPassword},
		"a passkey of another redirect": {Method: identity.ProofPasskey, ApproverID: w.Alice.ID, Binding: withRedirect(in, "https://evil.example/cb").Binding().Hash()},
	} {
		try := in
		try.Proof = proof
		if _, _, _, err := o.Allow(w.Ctx, try); countersign.ErrorCode(err) != countersign.EFORBIDDEN || err != identity.ErrConsentProof {
			t.Errorf("%s: %v, want ErrConsentProof", name, err)
		}
	}
	if grants, _ := w.Store.Grants(w.Ctx, ""); len(grants) != 0 {
		t.Fatalf("refused consents made %d grants", len(grants))
	}
	for name, proof := range map[string]*identity.ConsentProof{
		"the password":              identity.PasswordProof(w.Alice.ID),
		"a passkey of this consent": {Method: identity.ProofPasskey, ApproverID: w.Alice.ID, Binding: in.Binding().Hash()},
	} {
		try := in
		try.Proof = proof
		_, _, g, err := o.Allow(w.Ctx, try)
		if err != nil || strings.Join(g.Tiers, " ") != "read write" {
			t.Errorf("%s: %+v, %v; want a grant of read write", name, g, err)
		}
	}
}

func withRedirect(in identity.AllowInput, redirect string) identity.AllowInput {
	in.RedirectURI = redirect
	return in
}

// TestAllowNeedsAdmin: only an admin of the account connects a client; an
// approver or a viewer of it, with their own fresh proof, makes no grant,
// whatever role the principal claims.
func TestAllowNeedsAdmin(t *testing.T) {
	w := testutil.NewWorld(t)
	o := &identity.OAuth{Store: w.Store, Clock: w.Clock, Resource: "http://127.0.0.1:8080/mcp"}
	c, _, err := o.Register(w.Ctx, &identity.ClientMetadata{RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"},
		TokenEndpointAuthMethod: "none"}, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []countersign.Role{countersign.RoleViewer, countersign.RoleApprover} {
		if err := w.Admin.SetRole(w.Ctx, "acme", "alice", role); err != nil {
			t.Fatal(err)
		}
		in := identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: w.Alice.ID, Username: w.Alice.Username, AccountID: w.Acme.ID, Role: countersign.RoleAdmin},
			AccountID: w.Acme.ID, Client: c, RedirectURI: c.RedirectURIs[0], Challenge: identity.S256(strings.Repeat("v", 43)), Tiers: []string{"read"},
			Proof: identity.PasswordProof(w.Alice.ID)}
		if _, _, _, err := o.Allow(w.Ctx, in); err == nil || !strings.Contains(err.Error(), "Only an admin") {
			t.Errorf("a consent by an %s: %v, want refused: only an admin", role, err)
		}
	}
	if grants, _ := w.Store.Grants(w.Ctx, ""); len(grants) != 0 {
		t.Fatalf("refused consents made %d grants", len(grants))
	}
}

// demotingStore demotes the consenting approver to approver just before
// the grant is stored: a change of role that lands between the consent's
// check and its grant.
type demotingStore struct {
	countersign.Store
	w *testutil.World
}

func (s demotingStore) CreateGrant(ctx context.Context, g *countersign.Grant, key *countersign.AgentKey, sess *countersign.Session, code *countersign.OAuthToken) error {
	if err := s.w.Store.SetRole(ctx, g.ApproverID, g.AccountID, countersign.RoleApprover); err != nil {
		return err
	}
	return s.Store.CreateGrant(ctx, g, key, sess, code)
}

// TestAllowNeedsAdminAtTheGrant: an admin demoted while consenting makes
// no grant: the role is checked where the grant is stored, not only
// before.
func TestAllowNeedsAdminAtTheGrant(t *testing.T) {
	w := testutil.NewWorld(t)
	o := &identity.OAuth{Store: demotingStore{Store: w.Store, w: w}, Clock: w.Clock, Resource: "http://127.0.0.1:8080/mcp"}
	c, _, err := o.Register(w.Ctx, &identity.ClientMetadata{RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"},
		TokenEndpointAuthMethod: "none"}, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	in := identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: w.Alice.ID, Username: w.Alice.Username, AccountID: w.Acme.ID, Role: countersign.RoleAdmin},
		AccountID: w.Acme.ID, Client: c, RedirectURI: c.RedirectURIs[0], Challenge: identity.S256(strings.Repeat("v", 43)), Tiers: []string{"read"},
		Proof: identity.PasswordProof(w.Alice.ID)}
	if _, _, _, err := o.Allow(w.Ctx, in); err == nil || !strings.Contains(err.Error(), "Only an admin") {
		t.Errorf("a consent by an admin demoted meanwhile: %v, want refused: only an admin", err)
	}
	if grants, _ := w.Store.Grants(w.Ctx, ""); len(grants) != 0 {
		t.Fatalf("the refused consent made %d grants", len(grants))
	}
}
