package approval_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// stopBetween is the real store, but for one call in the middle of a
// create: when armed, it runs stop once, before the create reads the
// session's windows (at "windows") or before it stores a request that a
// window or a hook approval let through (at "insert").
type stopBetween struct {
	countersign.Store
	at   string
	mu   sync.Mutex
	stop func()
}

func (s *stopBetween) fire(at string) {
	s.mu.Lock()
	stop := s.stop
	if s.at != at {
		stop = nil
	}
	if stop != nil {
		s.stop = nil
	}
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (s *stopBetween) ActiveWindows(ctx context.Context, keyID, sessionID string, kind countersign.Kind, action string, now time.Time) ([]*countersign.AutoApproveWindow, error) {
	s.fire("windows")
	return s.Store.ActiveWindows(ctx, keyID, sessionID, kind, action, now)
}

func (s *stopBetween) CreateRequest(ctx context.Context, r *countersign.Request, maxPending int, now time.Time, ev countersign.AuditEvent) (*countersign.Request, bool, error) {
	if r.Status == countersign.StatusApproved {
		s.fire("insert")
	}
	return s.Store.CreateRequest(ctx, r, maxPending, now, ev)
}

// TestStopWinsOverCreatesInFlight: the human presses Stop while a request
// the session's window or its hook approval would let through is being
// made, after the request read its clock. Once Stop has answered, that
// request is no approval anyone can use: it is asked, or refused.
func TestStopWinsOverCreatesInFlight(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		at   string
		// setup opens what would let the request through and returns the
		// input of the request.
		setup func(e *env) countersign.CreateInput
		// asked: the request is made and waits for a human; otherwise it
		// is refused with a conflict.
		asked bool
	}{
		{"stop before the window is read", "windows", func(e *env) countersign.CreateInput {
			e.openWindow(e.create(e.keyA, e.toolCall("WebFetch", "s1")), 10)
			return e.toolCall("WebFetch", "s1")
		}, true},
		{"stop before the insert, the window ended by itself", "insert", func(e *env) countersign.CreateInput {
			e.openWindow(e.create(e.keyA, e.toolCall("WebFetch", "s1")), 1)
			e.clock.Advance(59 * time.Second) // open when the request reads it
			return e.toolCall("WebFetch", "s1")
		}, false},
		{"stop before the insert of a covered delete", "insert", func(e *env) countersign.CreateInput {
			h := e.hookApproval(3, 100)
			return wrapperRm("s1", h.ID, 3, 100, "/src/build")
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, approval.Config{MaxPending: 50})
			store := &stopBetween{Store: e.store, at: c.at}
			e.svc = approval.New(store, e.clock, e.hub, approval.Config{MaxPending: 50}, nil, nil)
			in := c.setup(e)
			stopper := e.create(e.keyA, e.toolCall("Read", "s1"))
			stopped := false
			store.mu.Lock()
			store.stop = func() {
				e.clock.Advance(2 * time.Second) // the stop reads its clock after the request did
				e.decide(stopper.ID, countersign.DecisionStop)
				stopped = true
			}
			store.mu.Unlock()

			r, created, err := e.svc.Create(e.ctx, e.keyA, in)
			if !stopped {
				t.Fatal("the stop did not run in the middle of the create")
			}
			if c.asked {
				if err != nil || !created || r.Status != countersign.StatusPending {
					t.Fatalf("a request made while the session was stopped: %+v, %v, %v; want it asked", r, created, err)
				}
				_, err = e.svc.Consume(e.ctx, e.keyA, r.ID)
				wantCode(t, "consume a request made while the session was stopped", err, countersign.ECONFLICT)
				return
			}
			if err == nil {
				_, cerr := e.svc.Consume(e.ctx, e.keyA, r.ID)
				t.Fatalf("a request made while the session was stopped: %s by %q (consume: %v); want a conflict", r.Status, r.DecidedBy, cerr)
			}
			wantCode(t, "a request made while the session was stopped", err, countersign.ECONFLICT)
		})
	}
}
