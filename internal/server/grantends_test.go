package server_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// oaGrant is a grant a client got through the consent page: its tokens,
// the cookie of the browser that allowed it, and the grant as stored.
type oaGrant struct {
	client  oaClient
	tokens  oaTokens
	consent *http.Cookie
	grant   *countersign.Grant
}

// allowAs has username allow a new client on the consent page and
// exchanges the code: a client that works, at /mcp and at the token
// endpoint.
func (e *ibEnv) allowAs(username string) oaGrant {
	e.t.Helper()
	c := e.registerClient(oaCallback)
	code, consent := e.consent(e.session(username), e.authzQuery(c))
	st, tok := e.exchange(c, code)
	if st != http.StatusOK {
		e.t.Fatalf("exchange: %d %+v", st, tok)
	}
	if st, _ := e.mcpStatus(tok.AccessToken); st != http.StatusOK {
		e.t.Fatalf("/mcp with a new grant's token: %d", st)
	}
	agent, err := e.authenticator().AccessAgent(e.Ctx, tok.AccessToken, e.URL+"/mcp", time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	g, err := e.Store.Grant(e.Ctx, agent.GrantID)
	if err != nil {
		e.t.Fatal(err)
	}
	return oaGrant{client: c, tokens: tok, consent: consent, grant: g}
}

// wantEnded checks that nothing of the grant works any more: its refresh
// token gets invalid_grant, /mcp refuses its access token, the browser its
// consent signed in is signed out, and the grant reads as revoked.
func (e *ibEnv) wantEnded(what string, g oaGrant) {
	e.t.Helper()
	if st, out := e.refresh(g.client, g.tokens.RefreshToken); st != http.StatusBadRequest || out.Error != "invalid_grant" {
		e.t.Errorf("%s: refresh: %d %+v, want 400 invalid_grant", what, st, out)
	}
	if st, _ := e.mcpStatus(g.tokens.AccessToken); st != http.StatusUnauthorized {
		e.t.Errorf("%s: /mcp with the access token: %d, want 401", what, st)
	}
	if e.signedIn(g.consent.Value) {
		e.t.Errorf("%s: the consent's browser is still signed in", what)
	}
	if got, err := e.Store.Grant(e.Ctx, g.grant.ID); err != nil || !got.Revoked() {
		e.t.Errorf("%s: grant = %+v, %v; want revoked", what, got, err)
	}
}

// TestGrantEndsWithApprover: after a password reset, a removal from the
// account and a removal of the approver (what countersign approver
// passwd|remove runs), the OAuth client the approver allowed can neither
// refresh nor call /mcp, and the grant reads as revoked; a password reset
// that keeps the grants leaves the client working.
func TestGrantEndsWithApprover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		change func(e *ibEnv) ([]string, error)
	}{
		{"password reset", func(e *ibEnv) ([]string, error) {
			_, ids, err := e.Admin.SetPassword(e.Ctx, "alice", "a brand new password", false)
			return ids, err
		}},
		{"removal from the account", func(e *ibEnv) ([]string, error) { return e.Admin.RemoveMembership(e.Ctx, "alice", "acme") }},
		{"removal of the approver", func(e *ibEnv) ([]string, error) { return e.Admin.RemoveApprover(e.Ctx, "alice") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := ibSetup(t, oaMCP)
			g := e.allowAs("alice")
			theirs := e.allowAs("carol")
			ids, err := tc.change(e)
			if err != nil || !slices.Equal(ids, []string{g.grant.ID}) {
				t.Fatalf("%s = %v, %v; want [%s]", tc.name, ids, err, g.grant.ID)
			}
			e.wantEnded("after the "+tc.name, g)
			if st, _ := e.mcpStatus(theirs.tokens.AccessToken); st != http.StatusOK {
				t.Errorf("another approver's grant after the %s: /mcp %d", tc.name, st)
			}
			if strings.Contains(e.Logs.String(), g.tokens.RefreshToken) || strings.Contains(e.Logs.String(), g.tokens.AccessToken) {
				t.Error("the log holds a token of the grant")
			}
		})
	}
	t.Run("password reset keeping grants", func(t *testing.T) {
		t.Parallel()
		e := ibSetup(t, oaMCP)
		g := e.allowAs("alice")
		_, kept, err := e.Admin.SetPassword(e.Ctx, "alice", "a brand new password", true)
		if err != nil || !slices.Equal(kept, []string{g.grant.ID}) {
			t.Fatalf("SetPassword keeping grants = %v, %v; want [%s] kept", kept, err, g.grant.ID)
		}
		st, tok := e.refresh(g.client, g.tokens.RefreshToken)
		if st != http.StatusOK {
			t.Fatalf("refresh of a kept grant: %d %+v", st, tok)
		}
		if st, _ := e.mcpStatus(tok.AccessToken); st != http.StatusOK {
			t.Errorf("/mcp with a kept grant: %d", st)
		}
	})
}

// TestKeyRevokeEndsConsent: revoking a grant's key (countersign key revoke
// grant-…) does what revoking the grant does: the browser its consent
// signed in is signed out, its tokens stop, and it reads as revoked. The
// approver's own sign-in stays.
func TestKeyRevokeEndsConsent(t *testing.T) {
	t.Parallel()
	e := ibSetup(t, oaMCP)
	g := e.allowAs("alice")
	own := e.session("alice")
	if !e.signedIn(g.consent.Value) {
		t.Fatal("the consent's browser is not signed in")
	}
	got, err := e.Admin.RevokeAgentKey(e.Ctx, "acme", g.grant.KeyName)
	if err != nil || got == nil || got.ID != g.grant.ID {
		t.Fatalf("RevokeAgentKey of the grant's key = %+v, %v; want grant %s", got, err, g.grant.ID)
	}
	e.wantEnded("after key revoke", g)
	if !e.signedIn(own.id) {
		t.Error("revoking a grant's key signed out a session that did not come from its consent")
	}
	page := e.get("/grants", e.as(own.id)).want(t, "grants page", http.StatusOK)
	if strings.Contains(page.body, "/grants/"+g.grant.ID+"/revoke") {
		t.Error("the grants page offers to revoke a grant whose key was revoked")
	}
}
