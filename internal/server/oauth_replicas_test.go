package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/sqlite"
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
	ln := httptest.NewUnstartedServer(nil)
	public := &url.URL{Scheme: "http", Host: ln.Listener.Addr().String()}
	resource := public.String() + "/mcp"
	log := slog.New(slog.DiscardHandler)
	mcp := func(c *server.Config) {
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	}
	cfg := server.Config{PublicURL: public}
	mcp(&cfg)
	hub := approval.NewHub()
	t.Cleanup(hub.Close)
	svc := approval.New(a, nil, hub, approval.Config{}, log, nil)
	srv, err := server.New(cfg, svc, &identity.Authenticator{Store: a}, metrics.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	ln.Config.Handler = srv.Handler()
	ln.Start()
	t.Cleanup(ln.Close)

	admin := &identity.Admin{Store: b}
	acc, err := admin.CreateAccount(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	ap := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "ann", PasswordHash: "x", CreatedAt: time.Now()}
	if err := b.CreateApprover(ctx, ap); err != nil {
		t.Fatal(err)
	}
	if err := b.AddMembership(ctx, ap.ID, acc.ID, countersign.RoleAdmin, time.Now()); err != nil {
		t.Fatal(err)
	}
	o := &identity.OAuth{Store: a, Clock: countersign.SystemClock{}, Resource: resource}
	c, _, err := o.Register(ctx, &identity.ClientMetadata{RedirectURIs: []string{oaCallback}, TokenEndpointAuthMethod: "none"}, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	verifier := strings.Repeat("v", 43)
	code, _, g, err := o.Allow(ctx, identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: ap.ID, Username: "ann", AccountID: acc.ID, Role: countersign.RoleAdmin},
		AccountID: acc.ID, Client: c, RedirectURI: oaCallback, Challenge: identity.S256(verifier), Tiers: []string{"read"}, Proof: identity.PasswordProof(ap.ID)})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := o.ExchangeCode(ctx, c, code, oaCallback, verifier, resource)
	if err != nil {
		t.Fatal(err)
	}
	status := func() int {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, ln.URL+"/mcp", strings.NewReader("{}"))
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
