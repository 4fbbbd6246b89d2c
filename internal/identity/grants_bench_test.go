package identity_test

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/testutil"
)

// BenchmarkBearerCheck is what /mcp does with a bearer token before any
// MCP work, side by side on one SQLite store: an agent key (Agent) and an
// OAuth access token (AccessAgent), each served from the store's cache
// between changes.
//
//	go test -run '^$' -bench BenchmarkBearerCheck -benchtime 2s -count 5 ./internal/identity
func BenchmarkBearerCheck(b *testing.B) {
	w := testutil.NewWorld(b)
	ctx, store, acc, ap, key := w.Ctx, w.Store, w.Acme, w.Alice, w.KeyA
	const resource = "http://127.0.0.1:8080/mcp"
	o := &identity.OAuth{Store: store, Clock: countersign.SystemClock{}, Resource: resource}
	c, _, err := o.Register(ctx, &identity.ClientMetadata{RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"}, TokenEndpointAuthMethod: "none"}, "192.0.2.1")
	if err != nil {
		b.Fatal(err)
	}
	verifier := strings.Repeat("v", 43)
	code, _, _, err := o.Allow(ctx, identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: ap.ID, Username: ap.Username, AccountID: acc.ID, Role: countersign.RoleAdmin},
		AccountID: acc.ID, Client: c, RedirectURI: c.RedirectURIs[0], Challenge: identity.S256(verifier), Tiers: []string{"read"}, Proof: identity.PasswordProof(ap.ID)})
	if err != nil {
		b.Fatal(err)
	}
	ts, err := o.ExchangeCode(ctx, c, code, c.RedirectURIs[0], verifier, resource)
	if err != nil {
		b.Fatal(err)
	}
	auth := w.Auth
	b.Run("agent-key", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := auth.Agent(ctx, key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("oauth-token", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := auth.AccessAgent(ctx, ts.AccessToken, resource, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
