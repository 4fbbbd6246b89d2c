package cli

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/identity"
)

// grantBed is a data directory, the store a running server would hold on
// it, the /mcp that server serves, and an OAuth client with grants.
type grantBed struct {
	t        *testing.T
	dir      string
	store    countersign.Store
	mcp      http.Handler
	oauth    *identity.OAuth
	client   *countersign.OAuthClient
	sessions *identity.Sessions
}

// bedGrant is one grant the client got: its tokens and the consent's
// browser session.
type bedGrant struct {
	grant            *countersign.Grant
	access, refresh  string
	session, account string
}

func newGrantBed(t *testing.T) *grantBed {
	b := &grantBed{t: t, dir: t.TempDir()}
	for _, args := range [][]string{
		{"account", "create", "one"}, {"account", "create", "two"},
		{"approver", "create", "--account", "one", "--username", "ann", "--role", "admin", "--password-stdin"},
		{"approver", "create", "--account", "two", "--username", "ann", "--role", "admin"},
		{"approver", "create", "--account", "one", "--username", "bob", "--role", "admin", "--password-stdin"},
	} {
		if code, out := b.run("pw-for-everyone\n", args...); code != 0 {
			t.Fatalf("%v: %d %s", args, code, out)
		}
	}
	store, err := openStore(t.Context(), b.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	b.store = store
	public, _ := url.Parse("https://approve.example.com")
	fileStore, err := files.Open(files.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc := approval.New(store, nil, approval.NewHub(), approval.Config{}, nil, nil)
	h, stop, err := startMCP(t.Context(), gateway.NewConfig(), store, svc, public, fileStore, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	b.mcp = h
	b.oauth = &identity.OAuth{Store: store, Clock: countersign.SystemClock{}, Resource: "https://approve.example.com/mcp"}
	b.client, _, err = b.oauth.Register(t.Context(), &identity.ClientMetadata{ClientName: "Claude", RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"},
		TokenEndpointAuthMethod: "none", GrantTypes: []string{"authorization_code", "refresh_token"}}, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	b.sessions = &identity.Sessions{Store: store, Clock: countersign.SystemClock{}}
	return b
}

// run runs the CLI on the data directory.
func (b *grantBed) run(stdin string, args ...string) (int, string) {
	env, stdout, stderr := testEnv(map[string]string{"COUNTERSIGN_DATA": b.dir})
	env.Stdin = strings.NewReader(stdin)
	code := Run(b.t.Context(), env, args)
	return code, stdout.String() + stderr.String()
}

// allow has the approver allow the client in the account and exchanges
// the code, as the consent page and the token endpoint do.
func (b *grantBed) allow(username, account string) *bedGrant {
	b.t.Helper()
	ctx := b.t.Context()
	ap, err := b.store.ApproverByUsername(ctx, username)
	if err != nil {
		b.t.Fatal(err)
	}
	acc, err := b.store.AccountByName(ctx, account)
	if err != nil {
		b.t.Fatal(err)
	}
	verifier := strings.Repeat("v", 43)
	code, sessionID, g, err := b.oauth.Allow(ctx, identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: ap.ID, Username: username, AccountID: acc.ID, Role: countersign.RoleAdmin},
		AccountID: acc.ID, Client: b.client, RedirectURI: b.client.RedirectURIs[0], Challenge: identity.S256(verifier), Tiers: []string{"read"}, Proof: identity.PasswordProof(ap.ID)})
	if err != nil {
		b.t.Fatal(err)
	}
	ts, err := b.oauth.ExchangeCode(ctx, b.client, code, b.client.RedirectURIs[0], verifier, "")
	if err != nil {
		b.t.Fatal(err)
	}
	bg := &bedGrant{grant: g, access: ts.AccessToken, refresh: ts.RefreshToken, session: sessionID, account: account}
	b.wantLive("a new grant", bg)
	return bg
}

// mcpStatus is what /mcp answers an initialize with the bearer token.
func (b *grantBed) mcpStatus(bearer string) int {
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bearer)
	w := httptest.NewRecorder()
	b.mcp.ServeHTTP(w, req)
	return w.Code
}

// grantState is the STATE column of the grant's row in grant list.
func (b *grantBed) grantState(g *bedGrant) string {
	b.t.Helper()
	code, out := b.run("", "grant", "list", "--account", g.account)
	if code != 0 {
		b.t.Fatalf("grant list: %d %s", code, out)
	}
	m := regexp.MustCompile(`(?m)^` + g.grant.ID + `\s.*?\s(active|revoked [0-9-]+ [0-9:]+)$`).FindStringSubmatch(out)
	if m == nil {
		b.t.Fatalf("grant list lacks %s:\n%s", g.grant.ID, out)
	}
	return m[1]
}

// wantLive checks that the grant works: it refreshes (the new tokens are
// kept), /mcp takes its access token, and grant list shows it active.
func (b *grantBed) wantLive(what string, g *bedGrant) {
	b.t.Helper()
	ts, err := b.oauth.Refresh(b.t.Context(), b.client, g.refresh, "")
	if err != nil {
		b.t.Fatalf("%s: refresh: %v", what, err)
	}
	g.access, g.refresh = ts.AccessToken, ts.RefreshToken
	if st := b.mcpStatus(g.access); st != http.StatusOK {
		b.t.Errorf("%s: /mcp with the access token: %d", what, st)
	}
	if st := b.grantState(g); st != "active" {
		b.t.Errorf("%s: grant list shows %q", what, st)
	}
}

// wantEnded checks that nothing of the grant works: its refresh token
// gets invalid_grant, /mcp refuses its access token, its consent's session
// is gone and grant list shows it revoked.
func (b *grantBed) wantEnded(what string, g *bedGrant) {
	b.t.Helper()
	_, err := b.oauth.Refresh(b.t.Context(), b.client, g.refresh, "")
	var oe *identity.OAuthError
	if !errors.As(err, &oe) || oe.Code != "invalid_grant" {
		b.t.Errorf("%s: refresh: %v, want invalid_grant", what, err)
	}
	if st := b.mcpStatus(g.access); st != http.StatusUnauthorized {
		b.t.Errorf("%s: /mcp with the access token: %d, want 401", what, st)
	}
	if _, _, err := b.sessions.Session(b.t.Context(), g.session); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		b.t.Errorf("%s: the consent's session: %v, want not found", what, err)
	}
	if st := b.grantState(g); !strings.HasPrefix(st, "revoked ") {
		b.t.Errorf("%s: grant list shows %q", what, st)
	}
}

// wantOutput fails unless the command exits 0 and prints exactly want.
func (b *grantBed) wantOutput(what string, want []string, stdin string, args ...string) {
	b.t.Helper()
	code, out := b.run(stdin, args...)
	if code != 0 || out != strings.Join(want, "\n")+"\n" {
		b.t.Errorf("%s: exit %d, printed\n%s\nwant\n%s", what, code, out, strings.Join(want, "\n"))
	}
}

// TestGrantEndsWithApprover: approver passwd, approver remove --account
// and approver remove revoke the OAuth grants the approver allowed (there,
// or everywhere) and say so; passwd --keep-grants keeps them and says so.
// Another approver's grant goes on working.
func TestGrantEndsWithApprover(t *testing.T) {
	t.Parallel()
	b := newGrantBed(t)
	one, two, bobs := b.allow("ann", "one"), b.allow("ann", "two"), b.allow("bob", "one")

	b.wantOutput("passwd --keep-grants", []string{
		"new password for ann; its browser sessions have ended; 2 grants it allowed kept (--keep-grants)",
		"kept grant " + one.grant.ID, "kept grant " + two.grant.ID,
		"they still work; revoke one with countersign grant revoke --account A ID",
	}, "a second password\n", "approver", "passwd", "--username", "ann", "--password-stdin", "--keep-grants")
	b.wantLive("after passwd --keep-grants", one)
	b.wantLive("after passwd --keep-grants", two)

	b.wantOutput("passwd", []string{
		"new password for ann; its browser sessions have ended and 2 grants it allowed revoked",
		"revoked grant " + one.grant.ID, "revoked grant " + two.grant.ID,
		"their tokens no longer work and the browsers their consent signed in are signed out",
	}, "a third password\n", "approver", "passwd", "--username", "ann", "--password-stdin")
	b.wantEnded("after passwd", one)
	b.wantEnded("after passwd", two)
	b.wantLive("after ann's passwd", bobs)

	one, two = b.allow("ann", "one"), b.allow("ann", "two")
	b.wantOutput("remove --account", []string{
		"removed approver ann from one with its sessions, tokens and 1 grant",
		"revoked grant " + one.grant.ID,
		"their tokens no longer work and the browsers their consent signed in are signed out",
	}, "", "approver", "remove", "--username", "ann", "--account", "one")
	b.wantEnded("after remove --account one", one)
	b.wantLive("after remove --account one", two)
	b.wantLive("after ann's remove --account one", bobs)

	b.wantOutput("remove", []string{
		"removed approver ann with its sessions, tokens, passkeys and 1 grant",
		"revoked grant " + two.grant.ID,
		"their tokens no longer work and the browsers their consent signed in are signed out",
	}, "", "approver", "remove", "--username", "ann")
	b.wantEnded("after remove", two)
	b.wantLive("after ann's remove", bobs)

	if code, out := b.run("", "approver", "remove", "--username", "bob", "--account", "one", "--keep-grants"); code != 2 {
		t.Errorf("remove --keep-grants: exit %d, want 2: %s", code, out)
	}
	b.wantLive("after a refused remove --keep-grants", bobs)
	b.wantOutput("remove without grants", []string{"removed approver bob from one with its sessions, tokens and 1 grant",
		"revoked grant " + bobs.grant.ID, "their tokens no longer work and the browsers their consent signed in are signed out"},
		"", "approver", "remove", "--username", "bob", "--account", "one")
	b.wantOutput("remove of an approver of no grants", []string{"removed approver bob with its sessions, tokens, passkeys and no grants"},
		"", "approver", "remove", "--username", "bob")
}

// TestKeyRevokeEndsGrant: key revoke of a grant's key revokes the grant as
// grant revoke does, and says so: the browser its consent signed in is
// signed out and its tokens stop. Revoking a plain key says nothing of a
// grant.
func TestKeyRevokeEndsGrant(t *testing.T) {
	t.Parallel()
	b := newGrantBed(t)
	g, other := b.allow("ann", "one"), b.allow("bob", "one")
	if code, out := b.run("", "key", "create", "--account", "one", "--name", "plain"); code != 0 {
		t.Fatalf("key create: %d %s", code, out)
	}
	b.wantOutput("key revoke of a plain key", []string{"revoked agent key plain"}, "", "key", "revoke", "--account", "one", "plain")
	b.wantOutput("key revoke of a grant's key", []string{"revoked agent key " + g.grant.KeyName,
		"revoked its grant " + g.grant.ID + ": its tokens no longer work and the browser its consent signed in is signed out"},
		"", "key", "revoke", "--account", "one", g.grant.KeyName)
	b.wantEnded("after key revoke", g)
	b.wantLive("after another grant's key revoke", other)
	if code, out := b.run("", "grant", "revoke", "--account", "one", g.grant.ID); code != 1 || !strings.Contains(out, "already revoked") {
		t.Errorf("grant revoke after key revoke: exit %d, %s", code, out)
	}
}
