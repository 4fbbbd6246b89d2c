package approval_test

import (
	"context"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
)

// fakeFeed is a countersign.ChangeFeed the test drives: it hands the
// callbacks of Listen to the test.
type fakeFeed struct {
	listening chan struct{}
	change    func(requestID, accountID string)
	resync    func()
}

func (f *fakeFeed) Listen(ctx context.Context, onChange func(string, string), onResync func()) error {
	f.change, f.resync = onChange, onResync
	close(f.listening)
	<-ctx.Done()
	return nil
}

// follow starts FollowReplicas on a fake feed and returns the feed once it
// listens.
func follow(t *testing.T, e *env) *fakeFeed {
	t.Helper()
	f := &fakeFeed{listening: make(chan struct{})}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- e.svc.FollowReplicas(ctx, f) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("FollowReplicas: %v", err)
		}
	})
	<-f.listening
	return f
}

// approveBehindTheBack approves a request in the store directly, as
// another replica would: this service's hub hears nothing of it.
func (e *env) approveBehindTheBack(id string) {
	e.t.Helper()
	_, err := e.store.Transition(e.ctx, countersign.Transition{
		ID: id, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusApproved,
		Now: e.clock.Now(), DecidedBy: "alice",
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
	if err != nil {
		e.t.Fatalf("approve in the store: %v", err)
	}
}

func TestFollowReplicasChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	feed := follow(t, e)
	r := e.pending()

	// A change rings the request's and its account's waiters, and no one
	// else's.
	mine, stopMine := e.hub.Subscribe(r.ID)
	inbox, stopInbox := e.hub.Subscribe(approval.AccountTopic(r.AccountID))
	feed.change("req_other", "acc_other")
	select {
	case <-mine:
		t.Fatal("a change of another request rang this one")
	case <-inbox:
		t.Fatal("a change of another account rang this one")
	default:
	}
	feed.change(r.ID, r.AccountID)
	testutil.Receive(t, mine, "the change's ring of the request's waiters")
	testutil.Receive(t, inbox, "the change's ring of the account's waiters")
	stopMine()
	stopInbox()

	// A long poll wakes on a change another replica made.
	res := e.waitAsync(e.ctx, e.keyA, r.ID, time.Minute)
	waitForWaiters(t, e.hub, 1)
	e.approveBehindTheBack(r.ID)
	feed.change(r.ID, r.AccountID)
	if got := answer(t, res); got.err != nil || got.r.Status != countersign.StatusApproved {
		t.Errorf("Wait = %+v, %v; want approved", got.r, got.err)
	}
}

func TestFollowReplicasResync(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	feed := follow(t, e)
	r1, r2 := e.pending(), e.pending()
	res1 := e.waitAsync(e.ctx, e.keyA, r1.ID, time.Minute)
	res2 := e.waitAsync(e.ctx, e.keyA, r2.ID, time.Minute)
	waitForWaiters(t, e.hub, 2)

	// r1 changed while the feed was down: only a resync tells.
	e.approveBehindTheBack(r1.ID)
	feed.resync()
	if got := answer(t, res1); got.err != nil || got.r.Status != countersign.StatusApproved {
		t.Errorf("Wait of the changed request = %+v, %v; want approved", got.r, got.err)
	}
	// r2 did not change: its waiter read the store again and waits on.
	waitForWaiters(t, e.hub, 1)
	// A wait for something not to happen: nothing tells that the waiter
	// will not return, so a while without an answer is the check.
	select {
	case got := <-res2:
		t.Fatalf("the wait of an unchanged request returned: %+v", got)
	case <-time.After(50 * time.Millisecond):
	}
	e.decide(r2.ID, countersign.DecisionDeny)
	if got := answer(t, res2); got.err != nil || got.r.Status != countersign.StatusDenied {
		t.Errorf("Wait of the unchanged request = %+v, %v; want denied after the decision", got.r, got.err)
	}
}

func TestHubNotifyAll(t *testing.T) {
	t.Parallel()
	hub := approval.NewHub()
	a, stopA := hub.Subscribe("req_a")
	b, stopB := hub.Subscribe(approval.AccountTopic("acc_1"))
	hub.NotifyAll()
	testutil.Receive(t, a, "NotifyAll's ring of a request's waiter")
	testutil.Receive(t, b, "NotifyAll's ring of an account's waiter")
	stopA()
	stopB()
	if n := hub.Waiters(); n != 0 {
		t.Errorf("hub counts %d waiters after they stopped", n)
	}
	// A waiter subscribed after NotifyAll waits for the next ring.
	c, stopC := hub.Subscribe("req_a")
	defer stopC()
	select {
	case <-c:
		t.Fatal("a new subscription was closed by an earlier NotifyAll")
	default:
	}
}
