package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// newGrant stores a grant of acc, allowed by ap, with its consent's session
// and an authorization code; it returns the grant, the session and the
// code's hash.
func newGrant(t *testing.T, s countersign.Store, acc *countersign.Account, ap *countersign.Approver, name string) (*countersign.Grant, *countersign.Session, string) {
	t.Helper()
	g, key, sess, code := grantParts(acc, ap, name)
	mustClient(t, s, g.ClientID)
	if err := s.CreateGrant(t.Context(), g, key, sess, code); err != nil {
		t.Fatalf("CreateGrant: %v", err)
	}
	return g, sess, code.Hash
}

// grantParts is what CreateGrant stores for a grant of acc allowed by ap.
func grantParts(acc *countersign.Account, ap *countersign.Approver, name string) (*countersign.Grant, *countersign.AgentKey, *countersign.Session, *countersign.OAuthToken) {
	g := &countersign.Grant{AccountID: acc.ID, ClientID: "csc_" + name, ClientName: "Claude " + name, ApproverID: ap.ID, ApproverName: ap.Username,
		Tiers: []string{"read", "commit"}, CreatedAt: Base}
	key := &countersign.AgentKey{AccountID: acc.ID, Name: "grant-" + name, Hash: sha("grant-key-" + name), Hint: "(grant)", CreatedAt: Base}
	sess := &countersign.Session{Hash: sha("grant-session-" + name), ApproverID: ap.ID, AccountID: acc.ID,
		CreatedAt: Base, ExpiresAt: Base.Add(12 * time.Hour), LastSeenAt: Base, UserAgent: "b", Client: "192.0.2.1"}
	code := &countersign.OAuthToken{Hash: sha("code-" + name), Kind: countersign.TokenCode, ClientID: g.ClientID, Resource: "https://x.example/mcp",
		RedirectURI: "https://claude.ai/api/mcp/auth_callback", Challenge: "challenge", CreatedAt: Base, ExpiresAt: Base.Add(time.Minute)}
	return g, key, sess, code
}

// testGrantNeedsAdmin: a grant allowed by a member who is not an admin of
// the account (demoted since the consent's check) is refused with
// EFORBIDDEN, and nothing of it is stored.
func testGrantNeedsAdmin(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	acc := mustAccount(t, s, "one")
	ap := approverIn(t, s, "x", acc)
	for _, role := range []countersign.Role{countersign.RoleViewer, countersign.RoleApprover} {
		if err := s.SetRole(ctx, ap.ID, acc.ID, role); err != nil {
			t.Fatalf("SetRole: %v", err)
		}
		g, key, sess, code := grantParts(acc, ap, string(role))
		mustClient(t, s, g.ClientID)
		wantCode(t, "CreateGrant by an "+string(role), s.CreateGrant(ctx, g, key, sess, code), countersign.EFORBIDDEN)
		_, _, err := s.SessionByHash(ctx, sess.Hash, Base)
		wantCode(t, "the refused grant's session", err, countersign.ENOTFOUND)
		_, err = s.AgentKeyByHash(ctx, key.Hash)
		wantCode(t, "the refused grant's key", err, countersign.ENOTFOUND)
	}
	if grants, err := s.Grants(ctx, acc.ID); err != nil || len(grants) != 0 {
		t.Errorf("refused grants stored: %d, %v", len(grants), err)
	}
}

// mustClient registers the OAuth client id unless it is registered.
func mustClient(t *testing.T, s countersign.Store, id string) {
	t.Helper()
	if _, err := s.OAuthClient(t.Context(), id); err == nil {
		return
	}
	c := &countersign.OAuthClient{ID: id, Name: "n", RedirectURIs: []string{"https://a.example/cb"}, AuthMethod: "none",
		RegisteredFrom: "192.0.2.1", CreatedAt: Base}
	if err := s.CreateOAuthClient(t.Context(), c, countersign.ClientLimits{}); err != nil {
		t.Fatalf("CreateOAuthClient(%s): %v", id, err)
	}
}

// testGrantForGoneClient: a grant for a client deleted meanwhile (expired
// unused, or evicted to make room) is refused with ENOTFOUND, and nothing
// of it is stored: no grant, key, session nor code.
func testGrantForGoneClient(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	acc := mustAccount(t, s, "one")
	ap := approverIn(t, s, "x", acc)
	g := &countersign.Grant{ID: countersign.NewID("grt_"), AccountID: acc.ID, ClientID: "csc_gone", ClientName: "gone", ApproverID: ap.ID,
		ApproverName: ap.Username, Tiers: []string{"read"}, CreatedAt: Base}
	key := &countersign.AgentKey{AccountID: acc.ID, Name: "grant-gone", Hash: sha("grant-key-gone"), Hint: "(grant)", CreatedAt: Base}
	sess := &countersign.Session{Hash: sha("grant-session-gone"), ApproverID: ap.ID, AccountID: acc.ID,
		CreatedAt: Base, ExpiresAt: Base.Add(12 * time.Hour), LastSeenAt: Base, UserAgent: "b", Client: "192.0.2.1"}
	code := &countersign.OAuthToken{Hash: sha("code-gone"), Kind: countersign.TokenCode, ClientID: g.ClientID, Resource: "https://x.example/mcp",
		RedirectURI: "https://a.example/cb", Challenge: "challenge", CreatedAt: Base, ExpiresAt: Base.Add(time.Minute)}
	err := s.CreateGrant(ctx, g, key, sess, code)
	wantError(t, "CreateGrant for a client that is gone", err, countersign.ENOTFOUND,
		"the application is no longer registered with this server")
	_, err = s.Grant(ctx, g.ID)
	wantCode(t, "the refused grant", err, countersign.ENOTFOUND)
	_, _, err = s.SessionByHash(ctx, sess.Hash, Base)
	wantCode(t, "the refused grant's session", err, countersign.ENOTFOUND)
	_, err = s.AgentKeyByHash(ctx, key.Hash)
	wantCode(t, "the refused grant's key", err, countersign.ENOTFOUND)
	_, _, err = s.RedeemOAuthToken(ctx, code.Hash, countersign.TokenCode, Base, func(*countersign.OAuthToken) error { return nil }, nil)
	wantCode(t, "the refused grant's code", err, countersign.ENOTFOUND)
}

func tokens(name string, expires time.Time) []*countersign.OAuthToken {
	return []*countersign.OAuthToken{
		{Hash: sha("access-" + name), Kind: countersign.TokenAccess, ClientID: "c", Resource: "https://x.example/mcp", CreatedAt: Base, ExpiresAt: expires},
		{Hash: sha("refresh-" + name), Kind: countersign.TokenRefresh, ClientID: "c", Resource: "https://x.example/mcp", CreatedAt: Base, ExpiresAt: expires.Add(time.Hour)},
	}
}

// testOAuthClients: the limits count never-used clients per address and
// per network; at the server's cap the oldest never-used clients make
// room, and only a server of used clients is full; a grant marks its
// client used; stale never-used clients expire.
func testOAuthClients(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	lim := countersign.ClientLimits{Max: 3, PerAddress: 2, PerNetwork: 2}
	reg := func(id, from, network string, at time.Time, used bool) error {
		c := &countersign.OAuthClient{ID: id, Name: "n", RedirectURIs: []string{"https://a.example/cb"},
			AuthMethod: "none", RegisteredFrom: from, RegisteredNet: network, CreatedAt: at}
		if used {
			c.LastUsedAt = at
		}
		return s.CreateOAuthClient(ctx, c, lim)
	}
	gone := func(what string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			_, err := s.OAuthClient(ctx, id)
			wantCode(t, what+": "+id, err, countersign.ENOTFOUND)
		}
	}
	held := func(what string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := s.OAuthClient(ctx, id); err != nil {
				t.Errorf("%s: %s: %v", what, id, err)
			}
		}
	}
	at := func(i int) time.Time { return Base.Add(time.Duration(i) * time.Second) }
	for i, c := range []struct{ id, from string }{{"c1", "a"}, {"c2", "a"}, {"c3", "b"}} {
		if err := reg(c.id, c.from, "", at(i), false); err != nil {
			t.Fatalf("register %s: %v", c.id, err)
		}
	}
	wantCode(t, "a third never-used client of one address", reg("c4", "a", "", at(3), false), countersign.ELIMIT)
	got, err := s.OAuthClient(ctx, "c1")
	if err != nil || got.Name != "n" || len(got.RedirectURIs) != 1 || got.RedirectURIs[0] != "https://a.example/cb" || got.RegisteredFrom != "a" {
		t.Fatalf("OAuthClient = %+v, %v", got, err)
	}
	_, err = s.OAuthClient(ctx, "nope")
	wantCode(t, "unknown client", err, countersign.ENOTFOUND)

	// The server holds 3: a fourth makes room by deleting the oldest
	// never-used client, and so does the next.
	if err := reg("c4", "c", "", at(4), false); err != nil {
		t.Fatalf("register at the cap: %v", err)
	}
	gone("the oldest never-used client at the cap", "c1")
	held("the younger clients at the cap", "c2", "c3", "c4")

	// A used client counts against no address and never makes room.
	if err := reg("u1", "a", "", at(5), true); err != nil {
		t.Fatalf("register a used client: %v", err)
	}
	gone("the next oldest never-used client", "c2")
	if err := reg("c5", "a", "", at(6), false); err != nil {
		t.Fatalf("a never-used client beside a used one of its address: %v", err)
	}
	held("the used client", "u1")

	// Per network: two never-used clients of one network, whatever
	// their addresses; another network is not held back.
	if err := reg("n1", "2001:db8:1:1::/64", "2001:db8:1::/48", at(7), false); err != nil {
		t.Fatal(err)
	}
	if err := reg("n2", "2001:db8:1:2::/64", "2001:db8:1::/48", at(8), false); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a third never-used client of one network", reg("n3", "2001:db8:1:3::/64", "2001:db8:1::/48", at(9), false), countersign.ELIMIT)
	if err := reg("n3", "2001:db8:2:3::/64", "2001:db8:2::/48", at(9), false); err != nil {
		t.Fatalf("a client of another network: %v", err)
	}
	if got, err := s.OAuthClient(ctx, "n3"); err != nil || got.RegisteredNet != "2001:db8:2::/48" {
		t.Errorf("OAuthClient(n3) = %+v, %v", got, err)
	}

	// A grant marks its client used: it no longer makes room.
	one := mustAccount(t, s, "one")
	x := approverIn(t, s, "x", one)
	g := &countersign.Grant{AccountID: one.ID, ClientID: "n3", ClientName: "n", ApproverID: x.ID, ApproverName: x.Username,
		Tiers: []string{"read"}, CreatedAt: at(10)}
	key := &countersign.AgentKey{AccountID: g.AccountID, Name: "grant-n3", Hash: sha("grant-key-n3"), Hint: "(grant)", CreatedAt: at(10)}
	if err := s.CreateGrant(ctx, g, key, nil, nil); err != nil {
		t.Fatalf("CreateGrant: %v", err)
	}
	if got, err := s.OAuthClient(ctx, "n3"); err != nil || !got.LastUsedAt.Equal(at(10)) {
		t.Errorf("the client after its grant = %+v, %v; want used at %v", got, err, at(10))
	}

	// Stale never-used clients expire; used ones stay.
	lim.StaleBefore = at(100)
	if err := reg("c6", "d", "", at(100), false); err != nil {
		t.Fatalf("register after the stale ones expire: %v", err)
	}
	gone("a stale never-used client", "c3", "c4", "c5", "n2")
	held("used clients after the stale ones expired", "u1", "n3")

	// A server of used clients is full.
	lim = countersign.ClientLimits{Max: 3}
	if err := reg("u2", "e", "", at(101), true); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a client when every client held was used", reg("c7", "f", "", at(102), false), countersign.ELIMIT)
	held("the used clients of a full server", "u1", "n3", "u2")
}

// testGrants: a grant is a principal with its own key; codes and refresh
// tokens are used once; revoking a grant revokes its key, its tokens and
// the session its consent signed in, and nothing of another grant.
func testGrants(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	one, two := mustAccount(t, s, "one"), mustAccount(t, s, "two")
	alice := approverIn(t, s, "alice", one, two)
	g, sess, code := newGrant(t, s, one, alice, "a")
	other, otherSess, otherCode := newGrant(t, s, two, alice, "b")

	if got, _, err := s.SessionByHash(ctx, sess.Hash, Base); err != nil || got.GrantID != g.ID {
		t.Fatalf("the consent's session = %+v, %v; want grant %s", got, err, g.ID)
	}
	list, err := s.Grants(ctx, one.ID)
	if err != nil || len(list) != 1 || list[0].ID != g.ID || list[0].KeyName != "grant-a" || len(list[0].Tiers) != 2 {
		t.Fatalf("Grants(one) = %+v, %v", list, err)
	}
	if all, _ := s.Grants(ctx, ""); len(all) != 2 {
		t.Errorf("Grants(all) has %d grants, want 2", len(all))
	}

	_, _, err = s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base.Add(time.Minute), nil, nil)
	wantCode(t, "an expired code", err, countersign.ENOTFOUND)
	_, _, err = s.RedeemOAuthToken(ctx, code, countersign.TokenRefresh, Base, nil, nil)
	wantCode(t, "a code as a refresh token", err, countersign.ENOTFOUND)
	refuse := func(*countersign.OAuthToken) error { return countersign.Errorf(countersign.EINVALID, "wrong verifier") }
	_, _, err = s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base, refuse, tokens("x", Base.Add(time.Hour)))
	wantCode(t, "a code its check refuses", err, countersign.EINVALID)
	_, _, err = s.AccessToken(ctx, sha("access-x"), Base)
	wantCode(t, "a token issued by a refused redemption", err, countersign.ENOTFOUND)
	tok, gr, err := s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base.Add(time.Second), nil, tokens("a", Base.Add(time.Hour)))
	if err != nil || tok.RedirectURI != "https://claude.ai/api/mcp/auth_callback" || tok.Challenge != "challenge" || gr.ID != g.ID {
		t.Fatalf("RedeemOAuthToken = %+v, %+v, %v", tok, gr, err)
	}
	// A used code that its check refuses (another client's, another
	// verifier) is refused by the check, not reported as used: a stranger's
	// replay must not look like the owner's.
	tok, _, err = s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base.Add(2*time.Second), refuse, nil)
	wantCode(t, "a used code its check refuses", err, countersign.EINVALID)
	if tok != nil {
		t.Errorf("a used code its check refuses returns %+v, want no token", tok)
	}
	tok, _, err = s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base.Add(2*time.Second), nil, nil)
	wantCode(t, "a code used twice", err, countersign.ECONFLICT)
	if tok == nil || tok.GrantID != g.ID {
		t.Errorf("a reused code returns %+v, want its grant", tok)
	}
	if _, _, err := s.RedeemOAuthToken(ctx, otherCode, countersign.TokenCode, Base, nil, tokens("b", Base.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}

	at, ag, err := s.AccessToken(ctx, sha("access-a"), Base.Add(time.Minute))
	if err != nil || at.GrantID != g.ID || ag.KeyID != g.KeyID || ag.AccountID != one.ID {
		t.Fatalf("AccessToken = %+v, %+v, %v", at, ag, err)
	}
	_, _, err = s.AccessToken(ctx, sha("access-a"), Base.Add(time.Hour))
	wantCode(t, "an expired access token", err, countersign.ENOTFOUND)
	_, _, err = s.AccessToken(ctx, sha("refresh-a"), Base)
	wantCode(t, "a refresh token as an access token", err, countersign.ENOTFOUND)

	// Rotation: the refresh token is used once.
	if _, _, err := s.RedeemOAuthToken(ctx, sha("refresh-a"), countersign.TokenRefresh, Base, nil, tokens("a2", Base.Add(time.Hour))); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	_, _, err = s.RedeemOAuthToken(ctx, sha("refresh-a"), countersign.TokenRefresh, Base, refuse, nil)
	wantCode(t, "a rotated refresh token its check refuses", err, countersign.EINVALID)
	_, _, err = s.RedeemOAuthToken(ctx, sha("refresh-a"), countersign.TokenRefresh, Base, nil, nil)
	wantCode(t, "a replayed refresh token", err, countersign.ECONFLICT)

	wantCode(t, "revoke from another account", s.RevokeGrant(ctx, two.ID, g.ID, Base), countersign.ENOTFOUND)
	if err := s.RevokeGrant(ctx, one.ID, g.ID, Base.Add(time.Minute)); err != nil {
		t.Fatalf("RevokeGrant: %v", err)
	}
	wantCode(t, "revoke twice", s.RevokeGrant(ctx, "", g.ID, Base), countersign.ECONFLICT)
	for _, h := range []string{"access-a", "access-a2"} {
		_, _, err = s.AccessToken(ctx, sha(h), Base)
		wantCode(t, "access token of a revoked grant", err, countersign.ENOTFOUND)
	}
	_, _, err = s.RedeemOAuthToken(ctx, sha("refresh-a2"), countersign.TokenRefresh, Base, nil, nil)
	wantCode(t, "refresh token of a revoked grant", err, countersign.ENOTFOUND)
	_, _, err = s.SessionByHash(ctx, sess.Hash, Base)
	wantCode(t, "the consent's session after revocation", err, countersign.ENOTFOUND)
	if k, err := s.AgentKeyByHash(ctx, sha("grant-key-a")); err != nil || !k.Revoked() {
		t.Errorf("the grant's key after revocation = %+v, %v", k, err)
	}
	if got, err := s.Grant(ctx, g.ID); err != nil || !got.Revoked() {
		t.Errorf("Grant after revocation = %+v, %v", got, err)
	}

	// The other grant is untouched.
	if _, _, err := s.AccessToken(ctx, sha("access-b"), Base); err != nil {
		t.Errorf("the other grant's token: %v", err)
	}
	if _, _, err := s.SessionByHash(ctx, otherSess.Hash, Base); err != nil {
		t.Errorf("the other grant's session: %v", err)
	}

	// RFC 7009: deleting a refresh token revokes the grant with its
	// tokens; another client cannot delete them.
	if revoked, err := s.DeleteOAuthToken(ctx, sha("refresh-b"), "someone-else", Base); err != nil || revoked != "" {
		t.Fatalf("DeleteOAuthToken of another client = %q, %v", revoked, err)
	}
	if _, _, err := s.AccessToken(ctx, sha("access-b"), Base); err != nil {
		t.Errorf("a token deleted by another client: %v", err)
	}
	if got, _ := s.Grant(ctx, other.ID); got.Revoked() {
		t.Errorf("a grant whose token another client tried to delete was revoked")
	}
	if revoked, err := s.DeleteOAuthToken(ctx, sha("refresh-b"), "c", Base.Add(2*time.Minute)); err != nil || revoked != other.ID {
		t.Fatalf("DeleteOAuthToken of the refresh token = %q, %v; want %s revoked", revoked, err, other.ID)
	}
	_, _, err = s.AccessToken(ctx, sha("access-b"), Base)
	wantCode(t, "access token after its refresh token was revoked", err, countersign.ENOTFOUND)
	if got, err := s.Grant(ctx, other.ID); err != nil || !got.RevokedAt.Equal(Base.Add(2*time.Minute)) {
		t.Errorf("the grant after its refresh token was revoked = %+v, %v; want revoked at %v", got, err, Base.Add(2*time.Minute))
	}
	if k, err := s.AgentKeyByHash(ctx, sha("grant-key-b")); err != nil || !k.Revoked() {
		t.Errorf("the grant's key after its refresh token was revoked = %+v, %v", k, err)
	}
	if _, _, err := s.SessionByHash(ctx, otherSess.Hash, Base); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the consent's session after its refresh token was revoked: %v", err)
	}
	if revoked, err := s.DeleteOAuthToken(ctx, sha("refresh-b"), "c", Base); err != nil || revoked != "" {
		t.Errorf("deleting a gone token = %q, %v", revoked, err)
	}
	if err := s.TouchGrant(ctx, other.ID, Base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Grant(ctx, other.ID); !got.LastUsedAt.Equal(Base.Add(time.Hour)) {
		t.Errorf("LastUsedAt = %v", got.LastUsedAt)
	}
}

// testRedeemRace: of N callers redeeming one code at once, exactly one gets
// tokens; the rest are told it was used (or, on a backend that serializes
// writers, see it used), and only the winner's tokens exist.
func testRedeemRace(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	acc := mustAccount(t, s, "one")
	ap := approverIn(t, s, "alice", acc)
	_, _, code := newGrant(t, s, acc, ap, "r")
	const n = 16
	var wg sync.WaitGroup
	var wins, used atomic.Int32
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base, nil, tokens(fmt.Sprint("race-", i), Base.Add(time.Hour)))
			switch countersign.ErrorCode(err) {
			case "":
				wins.Add(1)
			case countersign.ECONFLICT:
				used.Add(1)
			default:
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a racing redemption: %v", err)
	}
	if wins.Load() != 1 || used.Load() != n-1 {
		t.Fatalf("%d redemptions won and %d were told the code was used; want 1 and %d", wins.Load(), used.Load(), n-1)
	}
	live := 0
	for i := range n {
		if _, _, err := s.AccessToken(ctx, sha(fmt.Sprint("access-race-", i)), Base); err == nil {
			live++
		}
	}
	if live != 1 {
		t.Errorf("%d racing redemptions left an access token, want 1", live)
	}
}

// testTokenPruning: using a grant deletes its expired tokens, so that a
// grant refreshed for months holds only what can still be presented; a
// used refresh token that has not expired stays, for reuse detection.
func testTokenPruning(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	exp, ok := s.(countersign.Exporter)
	if !ok {
		t.Skip("the store cannot be exported, so its rows cannot be counted")
	}
	acc := mustAccount(t, s, "one")
	ap := approverIn(t, s, "alice", acc)
	_, _, code := newGrant(t, s, acc, ap, "p")
	if _, _, err := s.RedeemOAuthToken(ctx, code, countersign.TokenCode, Base, nil, tokens("p1", Base.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	later := Base.Add(90 * time.Minute) // the first access token and the code have expired
	if _, _, err := s.RedeemOAuthToken(ctx, sha("refresh-p1"), countersign.TokenRefresh, later, nil, tokens("p2", later.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	if err := exp.Export(ctx, func(r countersign.Record) error {
		if r.OAuthToken != nil {
			held[r.OAuthToken.Hash] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"access-p1": false, "refresh-p1": true, "access-p2": true, "refresh-p2": true} {
		if held[sha(name)] != want {
			t.Errorf("%s held: %v, want %v", name, held[sha(name)], want)
		}
	}
	if held[code] {
		t.Error("the expired, used code is still held")
	}
}
