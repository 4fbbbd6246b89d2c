package cli

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/files"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/testutil"
)

// TestServeMCPTakesAccessTokens: the gateway countersign serve starts takes
// an OAuth access token issued for <public URL>/mcp, as it takes an agent
// key, and refuses it once its grant is revoked or for another public URL.
func TestServeMCPTakesAccessTokens(t *testing.T) {
	t.Parallel()
	w := testutil.NewWorld(t)
	ctx, store, acc, ap, key := w.Ctx, w.Store, w.Acme, w.Alice, w.KeyA
	public, _ := url.Parse("https://approve.example.com")
	svc := approval.New(store, nil, approval.NewHub(), approval.Config{}, nil, nil)
	fileStore, err := files.Open(files.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, stop, err := startMCP(ctx, gateway.NewConfig(), store, svc, public, fileStore, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	token := func(resource string) (string, *countersign.Grant) {
		o := &identity.OAuth{Store: store, Clock: countersign.SystemClock{}, Resource: resource}
		c, _, err := o.Register(ctx, &identity.ClientMetadata{RedirectURIs: []string{"https://claude.ai/api/mcp/auth_callback"}, TokenEndpointAuthMethod: "none"}, "192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		verifier := strings.Repeat("v", 43)
		code, _, g, err := o.Allow(ctx, identity.AllowInput{Approver: countersign.ApproverPrincipal{ApproverID: ap.ID, Username: ap.Username, AccountID: acc.ID, Role: countersign.RoleAdmin},
			AccountID: acc.ID, Client: c, RedirectURI: c.RedirectURIs[0], Challenge: identity.S256(verifier), Tiers: []string{"read"}, Proof: identity.PasswordProof(ap.ID)})
		if err != nil {
			t.Fatal(err)
		}
		ts, err := o.ExchangeCode(ctx, c, code, c.RedirectURIs[0], verifier, "")
		if err != nil {
			t.Fatal(err)
		}
		return ts.AccessToken, g
	}
	status := func(bearer string) int {
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+bearer)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	mine, g := token("https://approve.example.com/mcp")
	other, _ := token("https://elsewhere.example.com/mcp")
	if st := status(key); st != http.StatusOK {
		t.Fatalf("the agent key: %d", st)
	}
	if st := status(mine); st != http.StatusOK {
		t.Fatalf("the access token for this server: %d", st)
	}
	if st := status(other); st != http.StatusUnauthorized {
		t.Errorf("an access token for another server: %d", st)
	}
	if err := store.RevokeGrant(ctx, "", g.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if st := status(mine); st != http.StatusUnauthorized {
		t.Errorf("the access token after its grant's revocation: %d", st)
	}
}
