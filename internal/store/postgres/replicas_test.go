package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// replica is one in-process server on a shared database: its own store
// (pool and listener), hub, service and HTTP handler, as one `countersign
// serve` has, following the other replicas.
type replica struct {
	*testserver.Server
	store *postgres.DB
}

// newReplica starts a replica on url and stops it when t ends: the first
// one (of nil) makes the World, the accounts acme and other with their
// agent keys and approvers, the others share it. appName names its
// connections in pg_stat_activity.
func newReplica(t *testing.T, url, appName string, of *replica) *replica {
	t.Helper()
	store, err := postgres.Open(t.Context(), url+"&application_name="+appName, nil)
	if err != nil {
		t.Fatalf("open replica %s: %v", appName, err)
	}
	t.Cleanup(func() { store.Close() })
	on := testserver.OnStore(store)
	if of != nil {
		on = testserver.ReplicaOf(of.Server, store)
	}
	s := testserver.New(t, on, testserver.At(time.Now()), testserver.WallClock(),
		testserver.Approval(func(_ *testserver.Server, c *approval.Config) { c.MaxPending = 1000 }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Service.FollowReplicas(ctx, store) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("FollowReplicas of %s: %v", appName, err)
		}
	})
	return &replica{Server: s, store: store}
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

// answer returns a long poll's answer; Receive's bound guards against a
// hang, well below the poll's own wait (50 s), so that an answer in time
// can only come from a wake-up.
func answer(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	return testutil.Receive(t, ch, "the long poll's answer")
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
	a := newReplica(t, url, "replica-a", nil)
	b := newReplica(t, url, "replica-b", a)
	agentA := client.New(a.URL, a.AgentKey)
	approverB := client.New(b.URL, a.ApproverToken)

	for i := range 5 {
		r := createOn(t, agentA, i)
		res := waitAsync(t.Context(), agentA, r.ID, 50*time.Second)
		waitForWaiters(t, a.Hub, 1)
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
	a := newReplica(t, url, "race-a", nil)
	b := newReplica(t, url, "race-b", a)
	agent := client.New(a.URL, a.AgentKey)
	approvers := []*client.Client{client.New(a.URL, a.ApproverToken), client.New(b.URL, a.ApproverToken)}

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
	a := newReplica(t, url, appName, nil)
	b := newReplica(t, url, appName+"-b", a)
	agentA := client.New(a.URL, a.AgentKey)
	approverB := client.New(b.URL, a.ApproverToken)

	for i := range 3 {
		r := createOn(t, agentA, i)
		res := waitAsync(t.Context(), agentA, r.ID, 50*time.Second)
		waitForWaiters(t, a.Hub, 1)
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
