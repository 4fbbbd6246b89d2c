package server_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// TestGrantRevocationReplicas: two servers on one store, each with its own
// handle (and, on SQLite, its own cache). A grant's token works on the
// first; the grant is revoked through the second (as the inbox of another
// replica, or the CLI, would); the first refuses the token at once.
func TestGrantRevocationReplicas(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "c.db")
		open := func() countersign.Store {
			db, err := sqlite.Open(t.Context(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		testReplicas(t, open(), open())
	})
	t.Run("postgres", func(t *testing.T) {
		u := pgtest.SchemaURL(t)
		open := func() countersign.Store {
			db, err := postgres.Open(t.Context(), u, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		testReplicas(t, open(), open())
	})
}

func testReplicas(t *testing.T, a, b countersign.Store) {
	ctx := t.Context()
	s := testserver.New(t, testserver.OnStore(a), testserver.At(time.Now()), testserver.WallClock(),
		testserver.Config(func(_ *testserver.Server, c *server.Config) {
			c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
		}))
	resource := s.Public.String() + "/mcp"
	acc, ap := s.Acme, s.Alice
	o := &identity.OAuth{Store: a, Clock: countersign.SystemClock{}, Resource: resource}
	c, _, err := o.Register(ctx, &identity.ClientMetadata{RedirectURIs: []string{oaCallback}, TokenEndpointAuthMethod: "none"}, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	verifier := strings.Repeat("v", 43)
	code, _, g, err := o.Allow(ctx, identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: ap.ID, Username: ap.Username, AccountID: acc.ID, Role: countersign.RoleAdmin},
		AccountID: acc.ID, Client: c, RedirectURI: oaCallback, Challenge: identity.S256(verifier), Tiers: []string{"read"}, Proof: identity.PasswordProof(ap.ID)})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := o.ExchangeCode(ctx, c, code, oaCallback, verifier, resource)
	if err != nil {
		t.Fatal(err)
	}
	status := func() int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL+"/mcp", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+ts.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 3 { // the first replica has the token cached now
		if st := status(); st != http.StatusOK {
			t.Fatalf("/mcp with the token: %d", st)
		}
	}
	if err := b.RevokeGrant(ctx, acc.ID, g.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if st := status(); st != http.StatusUnauthorized {
		t.Fatalf("/mcp on the first replica right after the second revoked the grant: %d", st)
	}
}
