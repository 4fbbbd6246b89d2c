package approval_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
)

type waitResult struct {
	r   *countersign.Request
	err error
}

// waitAsync runs Wait in a goroutine and returns where its answer arrives.
func (e *env) waitAsync(ctx context.Context, agent countersign.Agent, id string, wait time.Duration) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		r, err := e.svc.Wait(ctx, agent, id, wait)
		out <- waitResult{r, err}
	}()
	return out
}

// answer returns the result of a Wait, failing the test if none came within
// testutil.Receive's bound, which only guards against a hang.
func answer(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	return testutil.Receive(t, ch, "Wait's return")
}

func TestWaitWakesOnDecision(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	// The wait (a minute) is longer than the test's bound: only the hub's
	// ring can make it return approved in time.
	res := e.waitAsync(e.ctx, e.keyA, r.ID, time.Minute)
	waitForWaiters(t, e.hub, 1)
	go e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove})

	if got := testutil.Receive(t, res, "Wait's return after the decision"); got.err != nil || got.r.Status != countersign.StatusApproved {
		t.Errorf("Wait = %v, %v; want approved", got.r, got.err)
	}
	if n := e.hub.Waiters(); n != 0 {
		t.Errorf("hub still counts %d waiters", n)
	}
}

func TestWaitReturnsAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	// No wait: the current state.
	got := answer(t, e.waitAsync(e.ctx, e.keyA, r.ID, 0))
	if got.err != nil || got.r.Status != countersign.StatusPending {
		t.Errorf("Wait(0) = %v, %v", got.r, got.err)
	}
	// A request that is no longer pending is answered without waiting.
	e.decide(r.ID, countersign.DecisionDeny)
	got = answer(t, e.waitAsync(e.ctx, e.keyA, r.ID, time.Hour))
	if got.err != nil || got.r.Status != countersign.StatusDenied {
		t.Errorf("Wait on denied = %v, %v", got.r, got.err)
	}
	// Another key's request is unknown, at once.
	got = answer(t, e.waitAsync(e.ctx, e.keyB, r.ID, time.Hour))
	wantCode(t, "Wait by another key", got.err, countersign.ENOTFOUND)
}

func TestWaitEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	got := answer(t, e.waitAsync(e.ctx, e.keyA, r.ID, 50*time.Millisecond))
	if got.err != nil || got.r.Status != countersign.StatusPending {
		t.Errorf("Wait past its end = %v, %v; want pending", got.r, got.err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	res := e.waitAsync(ctx, e.keyA, r.ID, time.Hour)
	waitForWaiters(t, e.hub, 1)
	cancel()
	got = answer(t, res)
	if got.err != nil || got.r.Status != countersign.StatusPending {
		t.Errorf("Wait with a cancelled context = %v, %v; want pending", got.r, got.err)
	}
}

func TestWaitHubClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	res := e.waitAsync(e.ctx, e.keyA, r.ID, time.Hour)
	waitForWaiters(t, e.hub, 1)
	e.hub.Close()
	got := answer(t, res)
	if got.err != nil || got.r.Status != countersign.StatusPending {
		t.Errorf("Wait when the hub closed = %v, %v; want pending", got.r, got.err)
	}
	// After the close a new wait answers at once too.
	got = answer(t, e.waitAsync(e.ctx, e.keyA, r.ID, time.Hour))
	if got.err != nil || got.r.Status != countersign.StatusPending {
		t.Errorf("Wait on a closed hub = %v, %v; want pending", got.r, got.err)
	}
}

func TestWaitSeesExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	res := e.waitAsync(e.ctx, e.keyA, r.ID, time.Hour)
	waitForWaiters(t, e.hub, 1)
	e.clock.Advance(10 * time.Minute)
	if _, err := e.svc.Sweep(e.ctx); err != nil {
		t.Fatal(err)
	}
	got := answer(t, res)
	if got.err != nil || got.r.Status != countersign.StatusExpired {
		t.Errorf("Wait across a sweep = %v, %v; want expired", got.r, got.err)
	}
}

// A ring that carries the request as its change committed it answers the
// wait without a read; one that is stale (past its expiry) or of another
// key is read again instead of believed.
func TestWaitTakesTheRungRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	res := e.waitAsync(e.ctx, e.keyA, r.ID, time.Hour)

	// Neither of these may end the wait: the store still says pending.
	watching := func() {
		t.Helper()
		testutil.Eventually(t, func() bool { return e.hub.Watching(r.ID) == 1 }, "the wait subscribing again")
	}
	watching()
	stale := *r
	stale.Status, stale.ExpiresAt = countersign.StatusApproved, e.clock.Now().Add(-time.Second)
	e.hub.NotifyRequest(&stale)
	watching()
	foreign := *r
	foreign.Status, foreign.KeyID = countersign.StatusApproved, e.keyB.KeyID
	e.hub.NotifyRequest(&foreign)
	watching()
	select {
	case got := <-res:
		t.Fatalf("Wait believed a stale or foreign ring: %v, %v", got.r, got.err)
	default:
	}

	// A ring with a decided request ends the wait with it, unread: the
	// store, which says pending, is not asked.
	rung := *r
	rung.Status, rung.DecidedBy = countersign.StatusDenied, "ring"
	e.hub.NotifyRequest(&rung)
	got := answer(t, res)
	if got.err != nil || got.r.Status != countersign.StatusDenied || got.r.DecidedBy != "ring" {
		t.Fatalf("Wait = %+v, %v; want the rung request", got.r, got.err)
	}
	if got.r == &rung {
		t.Error("Wait returned the hub's request itself, not a copy")
	}
	e.wantStatus(r.ID, countersign.StatusPending)
}
