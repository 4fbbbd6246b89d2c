package testserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// TestServer: on each backend, the agent key asks, the approver's token
// sees and decides the request, and a signed-in browser's inbox lists it.
func TestServer(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]testserver.Option{
		"sqlite":   nil,
		"postgres": {testserver.Postgres()},
		"serve":    {testserver.Serve(), testserver.Localhost()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := testserver.New(t, append(opts, testserver.Approval(func(_ *testserver.Server, c *approval.Config) { c.MaxPending = 7 }))...)
			r, created, err := client.New(s.URL, s.AgentKey).Create(t.Context(), client.CreateInput{Kind: "generic", Action: "deploy the harness"})
			if err != nil || !created || r.Status != "pending" {
				t.Fatalf("create with the agent key: %+v, %v, %v", r, created, err)
			}
			if d, err := client.New(s.URL, s.ApproverToken).Decide(t.Context(), r.ID, client.Decision{Decision: "approve"}); err != nil || d.Status != "approved" {
				t.Fatalf("decide with the approver token: %+v, %v", d, err)
			}
			if got := inbox(t, s.Browser(t, "alice"), s.URL); !strings.Contains(got, "deploy the harness") {
				t.Errorf("alice's inbox does not show the request:\n%s", got)
			}
		})
	}
}

// TestReplicaOf: a replica on a second handle of the same database knows
// the first one's credentials and sees its requests.
func TestReplicaOf(t *testing.T) {
	t.Parallel()
	u := pgtest.SchemaURL(t)
	open := func() *postgres.DB {
		db, err := postgres.Open(t.Context(), u, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a := testserver.New(t, testserver.OnStore(open()))
	b := testserver.New(t, testserver.ReplicaOf(a, open()))
	r, _, err := client.New(a.URL, a.AgentKey).Create(t.Context(), client.CreateInput{Kind: "generic", Action: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := client.New(b.URL, b.AgentKey).Get(t.Context(), r.ID); err != nil || got.ID != r.ID {
		t.Fatalf("the replica's Get(%s) = %+v, %v", r.ID, got, err)
	}
}

// TestNoSession: a client that did not sign in is sent to the sign-in
// page, so that TestServer's inbox is a signed-in browser's.
func TestNoSession(t *testing.T) {
	t.Parallel()
	s := testserver.New(t)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(s.URL + "/approvals")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Errorf("GET /approvals without a session: %d to %q, want 303 to /signin", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func inbox(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	resp, err := c.Get(base + "/approvals")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /approvals: %d\n%s", resp.StatusCode, b)
	}
	return string(b)
}

// TestRestart: after a restart on the store opened again, the same URL
// answers from the new service, which finds what the old one stored.
func TestRestart(t *testing.T) {
	t.Parallel()
	s := testserver.New(t)
	agent := client.New(s.URL, s.AgentKey)
	r, _, err := agent.Create(t.Context(), client.CreateInput{Kind: "generic", Action: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	old := s.Service
	if err := s.World.Store.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(t.Context(), s.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s.Restart(t, db)
	if s.Service == old || s.World.Store != db {
		t.Fatalf("Restart kept the old service or store")
	}
	if got, err := agent.Get(t.Context(), r.ID); err != nil || got.Status != "pending" {
		t.Fatalf("Get(%s) after the restart = %+v, %v", r.ID, got, err)
	}
}

// TestClock: the approval service runs on the clock Clock gives it, not
// on the World's.
func TestClock(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock(testutil.Start.Add(42 * time.Hour))
	s := testserver.New(t, testserver.Clock(clock))
	r, _, err := client.New(s.URL, s.AgentKey).Create(t.Context(), client.CreateInput{Kind: "generic", Action: "deploy"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.CreatedAt.Equal(clock.Now()) {
		t.Errorf("the request was created at %s, want the clock's %s (the World's is %s)", r.CreatedAt, clock.Now(), s.Clock.Now())
	}
}
