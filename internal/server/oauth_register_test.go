package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
)

// TestOAuthRegistrationFlood: registrations from many addresses fill the
// server's cap with clients nobody uses, and a new client still registers
// and connects: the oldest never-used clients make room. The never-used
// ones are gone minutes later; a client that was allowed stays.
func TestOAuthRegistrationFlood(t *testing.T) {
	t.Parallel()
	const max = 30
	clock := testutil.NewClock(time.Now())
	e := ibSetup(t, oaMCP, func(c *server.Config) { c.Clock, c.MaxOAuthClients = clock, max })
	allowed := e.registerClient(oaCallback)
	code, _ := e.consent(e.signIn("alice"), e.authzQuery(allowed))
	if st, tok := e.exchange(allowed, code); st != http.StatusOK {
		t.Fatalf("exchange of the allowed client: %d %+v", st, tok)
	}

	// The flood: the cap filled with clients nobody uses, each from an
	// address of its own, a millisecond apart.
	var flood []string
	for range max {
		clock.Advance(time.Millisecond)
		flood = append(flood, e.registerClient("https://evil.example/phish-login").id)
	}
	clock.Advance(time.Millisecond)
	fresh := e.registerClient(oaCallback)
	code, _ = e.consent(e.signIn("alice"), e.authzQuery(fresh))
	if st, tok := e.exchange(fresh, code); st != http.StatusOK {
		t.Fatalf("a client registered at the full cap cannot connect: %d %+v", st, tok)
	}
	// The allowed client holds one place: the last of the flood took the
	// first one's, the fresh client the second one's.
	for i, id := range flood {
		_, err := e.Store.OAuthClient(e.Ctx, id)
		if gone := countersign.ErrorCode(err) == countersign.ENOTFOUND; gone != (i < 2) {
			t.Errorf("flood client %d after the fresh one registered: %v; want only the two oldest deleted", i, err)
		}
	}
	for _, c := range []oaClient{allowed, fresh} {
		if _, err := e.Store.OAuthClient(e.Ctx, c.id); err != nil {
			t.Errorf("an allowed client after the flood: %v", err)
		}
	}

	// Eleven minutes later the never-used clients are gone, at the next
	// registration; the allowed ones stay.
	clock.Advance(11 * time.Minute)
	e.registerClient(oaCallback)
	left := 0
	for _, id := range flood {
		if _, err := e.Store.OAuthClient(e.Ctx, id); err == nil {
			left++
		}
	}
	if left != 0 {
		t.Errorf("%d never-used clients are left 11 minutes after they registered", left)
	}
	for _, c := range []oaClient{allowed, fresh} {
		if _, err := e.Store.OAuthClient(e.Ctx, c.id); err != nil {
			t.Errorf("an allowed client after the never-used ones expired: %v", err)
		}
	}
}

// TestOAuthRegistrationNetworks: registrations from IPv6 count per /64
// and per /48, so that one site's many /64s hold no more clients than the
// /48 may; another /48 is not held back.
func TestOAuthRegistrationNetworks(t *testing.T) {
	t.Parallel()
	e := ibSetup(t)
	body := `{"client_name":"x","redirect_uris":["https://evil.example/cb"],"token_endpoint_auth_method":"none"}`
	register := func(from string) (int, oaTokens) {
		var out oaTokens
		return e.oauthPost("/oauth/register", "application/json", body, &out, ibFrom(from)), out
	}
	// Each from a /64 of its own, so that only the /48's count can hold
	// them back.
	for i := range identity.DefaultClientsPerNetwork {
		if st, out := register(fmt.Sprintf("2001:db8:7:%x::1", i)); st != http.StatusCreated {
			t.Fatalf("registration %d from its own /64 of one /48: %d %+v", i+1, st, out)
		}
	}
	st, out := register("2001:db8:7:ffff::1")
	if st != http.StatusTooManyRequests || out.Error != "slow_down" || !strings.Contains(out.Description, "network") {
		t.Errorf("one registration past the /48's %d: %d %+v; want 429 slow_down naming the network", identity.DefaultClientsPerNetwork, st, out)
	}
	if st, out := register("2001:db8:8::1"); st != http.StatusCreated {
		t.Errorf("a registration from another /48: %d %+v", st, out)
	}
	if got := identity.NetworkOf("2001:db8:7:ffff::/64"); got != "2001:db8:7::/48" {
		t.Errorf("NetworkOf(a /64) = %q", got)
	}
	for _, from := range []string{"203.0.113.9", "::ffff:203.0.113.9", "", "garbage"} {
		if got := identity.NetworkOf(from); got != "" {
			t.Errorf("NetworkOf(%q) = %q, want none", from, got)
		}
	}
}
