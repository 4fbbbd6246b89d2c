package claudehook

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
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
	opts := []testserver.Option{testserver.Config(func(s *testserver.Server, c *server.Config) {
		c.PublicURL, _ = url.Parse(publicURL)
		if set != nil {
			set(c)
		}
		if c.ClaudeHook != nil && c.ClaudeHookAccount == "" {
			c.ClaudeHookAccount = s.Acme.ID
		}
	})}
	if listen != nil {
		opts = append(opts, testserver.Listener(listen))
	}
	s := testserver.New(t, opts...)
	key := s.Key("acme", "claude")
	return &testServer{URL: s.URL, svc: s.Service, clock: s.Clock, agentKey: key,
		human: client.New(s.URL, s.ApproverToken), agent: client.New(s.URL, key),
		otherKey: s.KeyX, otherHuman: client.New(s.URL, s.Token("bob", "other")), log: s.Logs, store: s.Store}
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
