package claudehook

import (
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
)

// testServer is the real server — handler, approval service, SQLite store —
// on a testutil.World, with an agent key of acme for the hook and a token
// of the approver alice for the human.
type testServer struct {
	URL      string
	svc      *approval.Service
	clock    *testutil.Clock
	agentKey string
	human    *client.Client // the approver alice
	agent    *client.Client // the hook's key, for setting up windows
	// otherKey is an agent key of the account other, whose approver bob
	// is otherHuman: the hook serves acme only.
	otherKey   string
	otherHuman *client.Client
	log        *testutil.LogBuffer // what the server logged
	store      countersign.Store   // the server's store, for its audit log
}

// publicURL is the server's public URL: inbox links start with it.
const publicURL = "https://approve.example.com"

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	return newTestServerWith(t, nil)
}

// newTestServerWith is newTestServer with a server configuration changed
// by set.
func newTestServerWith(t testing.TB, set func(*server.Config)) *testServer {
	t.Helper()
	return newTestServerOn(t, set, nil)
}

// newTestServerOn is newTestServerWith on the listener listen makes of a
// loopback one; nil: the loopback one.
func newTestServerOn(t testing.TB, set func(*server.Config), listen func(net.Listener) net.Listener) *testServer {
	t.Helper()
	w := testutil.NewWorld(t)
	key, token := w.Key("acme", "claude"), w.Token("alice", "acme")
	pub, _ := url.Parse(publicURL)
	reg := metrics.NewRegistry()
	hub := approval.NewHub()
	var logs testutil.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	svc := approval.New(w.Store, w.Clock, hub, approval.Config{}, log, approval.NewMetrics(reg, hub))
	cfg := server.Config{PublicURL: pub}
	if set != nil {
		set(&cfg)
	}
	if cfg.ClaudeHook != nil && cfg.ClaudeHookAccount == "" {
		cfg.ClaudeHookAccount = w.Acme.ID
	}
	srv, err := server.New(cfg, svc, w.Auth, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv.Handler())
	if listen != nil {
		ts.Listener = listen(ts.Listener)
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return &testServer{URL: ts.URL, svc: svc, clock: w.Clock, agentKey: key,
		human: client.New(ts.URL, token), agent: client.New(ts.URL, key),
		otherKey: w.KeyX, otherHuman: client.New(ts.URL, w.Token("bob", "other")), log: &logs, store: w.Store}
}

// requests returns the account's requests, newest first.
func (s *testServer) requests(t testing.TB) []*client.Request {
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
	var r *client.Request
	if !testutil.Wait(func() bool {
		list, err := s.human.List(context.Background(), "pending", 5)
		if err == nil && len(list) > 0 {
			r = list[0]
		}
		return r != nil
	}, testutil.EventuallyWithin) {
		t.Errorf("no request became pending")
	}
	return r
}

// decide records a human's decision.
func (s *testServer) decide(t testing.TB, r *client.Request, d client.Decision) {
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
