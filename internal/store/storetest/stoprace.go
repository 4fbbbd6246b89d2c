package storetest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// Times of the stop cases: every create reads its clock at asked, before
// the human stops the session at stoppedAt; the approvals a window or a
// hook approval gives are usable for a minute from asked, past the stop.
var (
	asked     = Base.Add(2*time.Minute + 30*time.Second)
	stoppedAt = Base.Add(3 * time.Minute)
	afterStop = stoppedAt.Add(time.Second)
)

// stopSession stops the session sess-1 of key with a request of its own,
// as the human's Stop does.
func stopSession(t *testing.T, s countersign.Store, key *countersign.AgentKey) {
	t.Helper()
	stop := create(t, s, newRequest(key, "Read", `{"stop":1}`, "stop"), Base)
	if _, err := s.Transition(t.Context(), countersign.Transition{ID: stop.ID, From: fromPending, To: countersign.StatusStopped,
		Now: stoppedAt, DecidedBy: "approver:alice"}, countersign.AuditEvent{Event: "stopped", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

// openWindow approves a request of sess-1 with a window of the Bash tool
// open until until.
func openWindow(t *testing.T, s countersign.Store, key *countersign.AgentKey, until time.Time) {
	t.Helper()
	opener := create(t, s, newRequest(key, "Bash", `{"opener":1}`, "opener"), Base)
	if _, err := s.Transition(t.Context(), countersign.Transition{ID: opener.ID, From: fromPending, To: countersign.StatusApproved,
		Now: Base.Add(time.Minute), DecidedBy: "approver:alice",
		Window: &countersign.AutoApproveWindow{SessionID: "sess-1", Kind: countersign.KindTool, Action: "Bash", Until: until}},
		countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatalf("approve with a window: %v", err)
	}
}

// windowRequest is a request of sess-1 that the window open until until
// let through when its clock read asked, as the service builds it.
func windowRequest(key *countersign.AgentKey, n int64, until time.Time) *countersign.Request {
	r := newRequest(key, "Bash", fmt.Sprintf(`{"n":%d}`, n), fmt.Sprintf("run %d", n))
	r.Status, r.DecidedBy, r.DecidedAt, r.AutoApproveUntil = countersign.StatusApproved, countersign.DecidedByAutoApprove, asked, until
	r.CreatedAt, r.ExpiresAt = asked, asked.Add(time.Minute)
	return r
}

// createByWindow does what the service does for one request: it reads the
// session's windows at asked and, when one is open, stores the request
// approved by it. It returns the id of the stored request, "" for none.
func createByWindow(t *testing.T, s countersign.Store, key *countersign.AgentKey, n int64) (string, error) {
	list, err := s.ActiveWindows(t.Context(), key.ID, "sess-1", countersign.KindTool, "Bash", asked)
	if err != nil || len(list) == 0 {
		return "", err
	}
	r := windowRequest(key, n, list[0].Until)
	got, _, err := s.CreateRequest(t.Context(), r, 0, asked,
		countersign.AuditEvent{Event: "auto_approved", Actor: "key:" + key.ID, Detail: "{}"})
	if err != nil {
		return "", err
	}
	return got.ID, nil
}

// wantUnusable fails the test unless none of the requests can be consumed
// after the stop, and no approval of the session is left.
func wantUnusable(t *testing.T, s countersign.Store, f *fixture, ids []string) {
	t.Helper()
	for _, id := range ids {
		_, err := s.Transition(t.Context(), countersign.Transition{ID: id, From: []countersign.Status{countersign.StatusApproved},
			To: countersign.StatusConsumed, Now: afterStop, KeyID: f.key.ID}, countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"})
		wantCode(t, "consume after the stop returned", err, countersign.ECONFLICT)
	}
	left, err := s.Requests(t.Context(), countersign.RequestFilter{AccountID: f.account.ID, Status: countersign.StatusApproved, SessionID: "sess-1", Limit: 1000})
	if err != nil || len(left) != 0 {
		t.Errorf("approvals of the stopped session after the stop returned: %d, %v; want none", len(left), err)
	}
}

// testStopRace: requests a window lets through are created while the
// human stops the session, each reading its clock before the stop. Once
// the stop has returned, no approval of the session can be consumed,
// however each create fell around it: stored before the stop, it was
// ended by it; read or stored after, it is not let through.
func testStopRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	openWindow(t, s, f.key, Base.Add(30*time.Minute))
	const workers = 16
	var (
		stopped atomic.Bool
		n       atomic.Int64
		mu      sync.Mutex
		made    []string
		wg      sync.WaitGroup
	)
	first := make(chan struct{})
	var once sync.Once
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each keeps creating until one of its creates began after
			// the stop had returned.
			for {
				after := stopped.Load()
				id, err := createByWindow(t, s, f.key, n.Add(1))
				if err != nil && countersign.ErrorCode(err) != countersign.ECONFLICT {
					t.Errorf("create under the window: %v", err)
					return
				}
				if id != "" {
					mu.Lock()
					made = append(made, id)
					mu.Unlock()
				}
				once.Do(func() { close(first) })
				if after {
					return
				}
			}
		}()
	}
	select {
	case <-first:
	case <-time.After(30 * time.Second):
		t.Fatal("no create under the window finished")
	}
	stopSession(t, s, f.key)
	stopped.Store(true)
	wg.Wait()
	wantUnusable(t, s, f, made)
}

// testStopInFlight: the interleavings of testStopRace one at a time. A
// create that read the window before the stop and stores after it is
// refused, also when the window had ended by itself before the stop (so
// the stop did not change it); one that reads after the stop finds no
// window; and a delete the hook's approval covered, claimed before the
// stop and stored after it, is refused too.
func testStopInFlight(t *testing.T, open Opener) {
	closed := "the auto-approve window of this agent session closed while the request was made (the session was stopped); ask again"
	t.Run("window ended before the stop", func(t *testing.T) {
		f := newFixture(t, open)
		until := asked.Add(10 * time.Second) // open when the create read it, closed by itself before the stop
		openWindow(t, f.s, f.key, until)
		stopSession(t, f.s, f.key)
		_, _, err := f.s.CreateRequest(t.Context(), windowRequest(f.key, 1, until), 0, asked,
			countersign.AuditEvent{Event: "auto_approved", Actor: "key:" + f.key.ID, Detail: "{}"})
		wantError(t, "a create that read the window before the stop", err, countersign.ECONFLICT, closed)
		wantUnusable(t, f.s, f, nil)
	})
	t.Run("window read after the stop", func(t *testing.T) {
		f := newFixture(t, open)
		openWindow(t, f.s, f.key, Base.Add(30*time.Minute))
		stopSession(t, f.s, f.key)
		if got, err := f.s.ActiveWindows(t.Context(), f.key.ID, "sess-1", countersign.KindTool, "Bash", asked); err != nil || len(got) != 0 {
			t.Errorf("ActiveWindows at a time before the stop, read after it: %+v, %v; want none", got, err)
		}
		// The window as the stop left it, ending at the stop.
		_, _, err := f.s.CreateRequest(t.Context(), windowRequest(f.key, 2, stoppedAt), 0, asked,
			countersign.AuditEvent{Event: "auto_approved", Actor: "key:" + f.key.ID, Detail: "{}"})
		wantError(t, "a create that read the window after the stop", err, countersign.ECONFLICT, closed)
		wantUnusable(t, f.s, f, nil)
	})
	t.Run("coverage claimed before the stop", func(t *testing.T) {
		f := newFixture(t, open)
		covered := func(session string) *countersign.Request {
			hook := newRequest(f.key, "Bash", `{"command":"rm -r build"}`, "rm -r build "+session)
			hook.Context.SessionID = session
			hook = create(t, f.s, hook, Base)
			approve(t, f.s, hook.ID, Base.Add(time.Minute))
			if _, err := f.s.Transition(t.Context(), countersign.Transition{ID: hook.ID, From: []countersign.Status{countersign.StatusApproved},
				To: countersign.StatusConsumed, Now: Base.Add(time.Minute)}, countersign.AuditEvent{Event: "consumed", Actor: "key:x", Detail: "{}"}); err != nil {
				t.Fatalf("consume the hook's approval: %v", err)
			}
			r := newRequest(f.key, "rm -r build", `{"targets":["/src/build"]}`, "rm "+session)
			r.Kind, r.Context.SessionID = countersign.KindRm, session
			r.Status, r.DecidedBy, r.DecidedAt = countersign.StatusApproved, countersign.DecidedByCoverage, asked
			r.CreatedAt, r.ExpiresAt = asked, asked.Add(time.Minute)
			if err := f.s.ClaimCoverage(t.Context(), countersign.Coverage{ApprovalID: hook.ID, RequestID: r.ID, CreatedAt: asked}); err != nil {
				t.Fatalf("ClaimCoverage: %v", err)
			}
			return r
		}
		stays, ends := covered("sess-2"), covered("sess-1")
		stopSession(t, f.s, f.key)
		ev := countersign.AuditEvent{Event: "covered", Actor: "key:" + f.key.ID, Detail: "{}"}
		if _, _, err := f.s.CreateRequest(t.Context(), stays, 0, asked, ev); err != nil {
			t.Errorf("a covered delete of another session: %v", err)
		}
		_, _, err := f.s.CreateRequest(t.Context(), ends, 0, asked, ev)
		wantError(t, "a covered delete claimed before the stop", err, countersign.ECONFLICT,
			"the agent session was stopped while the request was made; ask again")
		wantUnusable(t, f.s, f, nil)
	})
}
