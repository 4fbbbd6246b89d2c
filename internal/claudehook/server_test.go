package claudehook

import (
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
)

// testServer is the real server — handler, approval service, SQLite store —
// with one account, an agent key for the hook and an approver token for
// the human.
type testServer struct {
	URL      string
	svc      *approval.Service
	clock    *testutil.Clock
	agentKey string
	human    *client.Client // the approver alice
	agent    *client.Client // the hook's key, for setting up windows
}

// publicURL is the server's public URL: inbox links start with it.
const publicURL = "https://approve.example.com"

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	clock := testutil.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	admin := &approval.Admin{Store: store, Clock: clock}
	if _, err := admin.CreateAccount(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	_, key, err := admin.CreateAgentKey(ctx, "acme", "claude")
	if err != nil {
		t.Fatal(err)
	}
	// The approver row gets a cheap hash: no test here is about passwords.
	ap := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "alice", PasswordHash: cheapHash(), CreatedAt: clock.Now()}
	if err := store.CreateApprover(ctx, ap); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateApprover(ctx, "acme", "alice", ""); err != nil {
		t.Fatal(err)
	}
	_, token, err := admin.CreateApproverToken(ctx, "alice", "acme", "test")
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := url.Parse(publicURL)
	reg := metrics.NewRegistry()
	hub := approval.NewHub()
	log := slog.New(slog.DiscardHandler)
	svc := approval.New(store, clock, hub, approval.Config{}, log, approval.NewMetrics(reg, hub))
	srv, err := server.New(server.Config{PublicURL: pub}, svc, &approval.Authenticator{Store: store}, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &testServer{URL: ts.URL, svc: svc, clock: clock, agentKey: key,
		human: client.New(ts.URL, token), agent: client.New(ts.URL, key)}
}

// cheapHash is an argon2id hash in the format of approval.HashPassword
// with tiny parameters.
func cheapHash() string {
	salt := []byte("countersign-test")
	key := argon2.IDKey([]byte("a long test password"), salt, 1, 64, 1, 32)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=64,t=1,p=1$%s$%s", argon2.Version, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// requests returns the account's requests, newest first.
func (s *testServer) requests(t *testing.T) []*client.Request {
	t.Helper()
	list, err := s.human.List(context.Background(), "", 50)
	if err != nil {
		t.Fatalf("list requests: %v", err)
	}
	return list
}

// pending waits until a request is pending and returns it.
func (s *testServer) pending(t *testing.T) *client.Request {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		list, err := s.human.List(context.Background(), "pending", 5)
		if err == nil && len(list) > 0 {
			return list[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("no request became pending")
	return nil
}

// decide records a human's decision.
func (s *testServer) decide(t *testing.T, r *client.Request, d client.Decision) {
	t.Helper()
	if _, err := s.human.Decide(context.Background(), r.ID, d); err != nil {
		t.Errorf("decide %s: %v", d.Decision, err)
	}
}

// expire moves the clock past every request's expiry and sweeps.
func (s *testServer) expire(t *testing.T) {
	t.Helper()
	s.clock.Advance(2 * time.Hour)
	if _, err := s.svc.Sweep(context.Background()); err != nil {
		t.Errorf("sweep: %v", err)
	}
}
