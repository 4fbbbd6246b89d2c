package cli

import (
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// TestGrantListRevoke: the CLI lists an account's grants and revokes one on
// the data directory: its access token stops and its consent's session
// ends; another account's grant cannot be revoked through this one.
func TestGrantListRevoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	run := func(args ...string) (int, string) {
		env, stdout, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": dir})
		env.Stdin = strings.NewReader("pw-for-ann\n")
		code := Run(t.Context(), env, args)
		return code, stdout.String() + stderr.String()
	}
	for _, args := range [][]string{
		{"account", "create", "one"}, {"account", "create", "two"},
		{"approver", "create", "--account", "one", "--username", "ann", "--role", "admin", "--password-stdin"},
	} {
		if code, out := run(args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, out)
		}
	}
	store, err := openStore(t.Context(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := t.Context()
	o := &identity.OAuth{Store: store, Clock: countersign.SystemClock{}, Resource: "http://127.0.0.1:8080/mcp"}
	c, _, err := o.Register(ctx, &identity.ClientMetadata{ClientName: "Claude", RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"},
		TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"}}, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	one, _ := store.AccountByName(ctx, "one")
	ann, _ := store.ApproverByUsername(ctx, "ann")
	verifier := strings.Repeat("v", 43)
	code, sessionID, g, err := o.Allow(ctx, identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: ann.ID, Username: "ann", AccountID: one.ID, Role: countersign.RoleAdmin},
		AccountID: one.ID, Client: c, RedirectURI: c.RedirectURIs[0], Challenge: identity.S256(verifier), Tiers: []string{"read"}, Proof: identity.PasswordProof(ann.ID)})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := o.ExchangeCode(ctx, c, code, c.RedirectURIs[0], verifier, "")
	if err != nil {
		t.Fatal(err)
	}
	auth := &identity.Authenticator{Store: store}
	sessions := &identity.Sessions{Store: store, Clock: countersign.SystemClock{}}

	if code, out := run("grant", "list", "--account", "one"); code != 0 || !strings.Contains(out, g.ID) || !strings.Contains(out, "Claude") || !strings.Contains(out, "ann") || !strings.Contains(out, "active") {
		t.Fatalf("grant list: %d %s", code, out)
	}
	if code, out := run("grant", "revoke", "--account", "two", g.ID); code == 0 {
		t.Fatalf("revoke through another account: %d %s", code, out)
	}
	if _, err := auth.AccessAgent(ctx, ts.AccessToken, o.Resource, o.Clock.Now()); err != nil {
		t.Fatalf("the access token before revoke: %v", err)
	}
	if code, out := run("grant", "revoke", "--account", "one", g.ID); code != 0 {
		t.Fatalf("grant revoke: %d %s", code, out)
	}
	if _, err := auth.AccessAgent(ctx, ts.AccessToken, o.Resource, o.Clock.Now()); countersign.ErrorCode(err) != countersign.EUNAUTHORIZED {
		t.Errorf("the access token after grant revoke: %v", err)
	}
	if _, _, err := sessions.Session(ctx, sessionID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the consent's session after grant revoke: %v", err)
	}
	if code, out := run("grant", "list", "--account", "one"); code != 0 || !strings.Contains(out, "revoked") {
		t.Errorf("grant list after revoke: %d %s", code, out)
	}
	if code, _ := run("grant", "revoke", "--account", "one"); code != 2 {
		t.Errorf("grant revoke without an id: exit %d, want 2", code)
	}
}
