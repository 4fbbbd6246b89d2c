package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/metrics"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/testutil"
)

// replica is one in-process server on a shared database: its own store
// (pool and listener), hub, service and HTTP handler, as one `countersign
// serve` has.
type replica struct {
	name  string
	store *postgres.DB
	hub   *approval.Hub
	svc   *approval.Service
	URL   string
}

// newReplica starts a replica on url and stops it when t ends. appName
// names its connections in pg_stat_activity.
func newReplica(t *testing.T, url, appName string) *replica {
	t.Helper()
	store, err := postgres.Open(t.Context(), url+"&application_name="+appName, nil)
	if err != nil {
		t.Fatalf("open replica %s: %v", appName, err)
	}
	hub := approval.NewHub()
	svc := approval.New(store, nil, hub, approval.Config{MaxPending: 1000}, nil, nil)
	srv, err := server.New(server.Config{}, svc, &identity.Authenticator{Store: store}, metrics.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.FollowReplicas(ctx, store) }()
	t.Cleanup(func() {
		hub.Close()
		ts.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("FollowReplicas of %s: %v", appName, err)
		}
		store.Close()
	})
	return &replica{name: appName, store: store, hub: hub, svc: svc, URL: ts.URL}
}

// credentials are an agent key and an approver token of one account.
type credentials struct {
	agent, approver string
}

// setUp creates the account acme with an agent key and the approver alice
// with an API token, through one replica's store.
func setUp(t *testing.T, s countersign.Store) credentials {
	t.Helper()
	ctx := t.Context()
	admin := &identity.Admin{Store: s}
	if _, err := admin.CreateAccount(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	_, key, err := admin.CreateAgentKey(ctx, "acme", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	// The approver row gets a dummy hash: no test here signs in, and a real
	// argon2id hash takes seconds under the race detector.
	acc, _ := s.AccountByName(ctx, "acme")
	ap := &countersign.Approver{Username: "alice", PasswordHash: "$argon2id$unused", CreatedAt: time.Now().UTC()}
	if err := s.CreateApprover(ctx, ap); err != nil {
		t.Fatal(err)
	}
	if err := s.AddMembership(ctx, ap.ID, acc.ID, countersign.RoleAdmin, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	_, token, err := admin.CreateApproverToken(ctx, "alice", "acme", "cli")
	if err != nil {
		t.Fatal(err)
	}
	return credentials{agent: key, approver: token}
}

// waitResult is the answer of a long poll.
type waitResult struct {
	r   *client.Request
	err error
	at  time.Time
}

// waitAsync long-polls a request in a goroutine.
func waitAsync(ctx context.Context, c *client.Client, id string, wait time.Duration) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		r, err := c.Wait(ctx, id, wait)
		out <- waitResult{r, err, time.Now()}
	}()
	return out
}

// answer returns a long poll's answer; the bound guards against a hang,
// well below the poll's own wait, so that an answer in time can only come
// from a wake-up.
func answer(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(20 * time.Second):
		t.Fatal("the long poll did not answer")
		return waitResult{}
	}
}

// waitForWaiters blocks until the hub holds n waiters.
func waitForWaiters(t *testing.T, hub *approval.Hub, n int64) {
	t.Helper()
	if !testutil.Wait(func() bool { return hub.Waiters() >= n }, testutil.EventuallyWithin) {
		t.Fatalf("hub holds %d waiters, want %d", hub.Waiters(), n)
	}
}

// createOn asks on a replica for a new request.
func createOn(t *testing.T, c *client.Client, n int) *client.Request {
	t.Helper()
	r, created, err := c.Create(t.Context(), client.CreateInput{Kind: "generic", Action: "deploy",
		Arguments: []byte(fmt.Sprintf(`{"n":%d}`, n))})
	if err != nil || !created {
		t.Fatalf("create: created=%v, %v", created, err)
	}
	return r
}

// TestReplicasWakeAcross: an agent long-polls replica A; the decision is
// made on replica B; A's poll answers approved long before its wait ends.
func TestReplicasWakeAcross(t *testing.T) {
	url := postgres.Migrated.SchemaURL(t)
	a, b := newReplica(t, url, "replica-a"), newReplica(t, url, "replica-b")
	creds := setUp(t, a.store)
	agentA := client.New(a.URL, creds.agent)
	approverB := client.New(b.URL, creds.approver)

	for i := range 5 {
		r := createOn(t, agentA, i)
		res := waitAsync(t.Context(), agentA, r.ID, 50*time.Second)
		waitForWaiters(t, a.hub, 1)
		if _, err := approverB.Decide(t.Context(), r.ID, client.Decision{Decision: "approve"}); err != nil {
			t.Fatalf("decide on B: %v", err)
		}
		decided := time.Now()
		got := answer(t, res)
		if got.err != nil || got.r.Status != "approved" {
			t.Fatalf("long poll on A = %+v, %v; want approved", got.r, got.err)
		}
		t.Logf("decision on B to answer on A: %v", got.at.Sub(decided))
		if c, err := agentA.Consume(t.Context(), r.ID); err != nil || c.Status != "consumed" {
			t.Fatalf("consume on A: %+v, %v", c, err)
		}
	}
}

// TestReplicasDecisionRace: approvers decide the same request on both
// replicas at once; exactly one decision wins, every other gets 409, and
// the audit log records one decision.
func TestReplicasDecisionRace(t *testing.T) {
	url := postgres.Migrated.SchemaURL(t)
	a, b := newReplica(t, url, "race-a"), newReplica(t, url, "race-b")
	creds := setUp(t, a.store)
	agent := client.New(a.URL, creds.agent)
	approvers := []*client.Client{client.New(a.URL, creds.approver), client.New(b.URL, creds.approver)}

	for round := range 10 {
		r := createOn(t, agent, round)
		seq, _, _ := a.store.AuditHead(t.Context())
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, conflicts := 0, 0
		start := make(chan struct{})
		for i := range 16 {
			wg.Go(func() {
				<-start
				d := []string{"approve", "deny"}[i%2]
				_, err := approvers[i%2].Decide(context.Background(), r.ID, client.Decision{Decision: d})
				mu.Lock()
				defer mu.Unlock()
				var ce *client.Error
				switch {
				case err == nil:
					wins++
				case errors.As(err, &ce) && ce.Status == http.StatusConflict:
					conflicts++
				default:
					t.Errorf("decision %d: %v, want a win or 409", i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins != 1 || conflicts != 15 {
			t.Fatalf("round %d: %d decisions won and %d got 409; want 1 and 15", round, wins, conflicts)
		}
		if seq2, _, _ := a.store.AuditHead(t.Context()); seq2 != seq+1 {
			t.Fatalf("round %d: the audit log grew by %d entries, want 1", round, seq2-seq)
		}
	}
}

// TestReplicaListenerDropped: the server ends replica A's notification
// connection while an agent waits on A, and the decision is made on B at
// once, likely before A listens again. A's waiter still answers approved:
// A resyncs when it is back.
func TestReplicaListenerDropped(t *testing.T) {
	url := postgres.Migrated.SchemaURL(t)
	appName := "drop-" + countersign.NewID("")[:8]
	a, b := newReplica(t, url, appName), newReplica(t, url, appName+"-b")
	creds := setUp(t, a.store)
	agentA := client.New(a.URL, creds.agent)
	approverB := client.New(b.URL, creds.approver)

	for i := range 3 {
		r := createOn(t, agentA, i)
		res := waitAsync(t.Context(), agentA, r.ID, 50*time.Second)
		waitForWaiters(t, a.hub, 1)
		var n int
		pgtest.Scan(t, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
			[]any{appName + " listener"}, &n)
		if n != 1 {
			t.Fatalf("terminated %d listener connections of A, want 1", n)
		}
		if _, err := approverB.Decide(t.Context(), r.ID, client.Decision{Decision: "deny", Text: "no"}); err != nil {
			t.Fatalf("decide on B: %v", err)
		}
		if got := answer(t, res); got.err != nil || got.r.Status != "denied" {
			t.Fatalf("long poll on A = %+v, %v; want denied", got.r, got.err)
		}
		// Wait for A to listen again before the next round.
		testutil.Eventually(t, func() bool {
			pgtest.Scan(t, `SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = $1`, []any{appName + " listener"}, &n)
			return n == 1
		}, "A's listener coming back")
	}
}
