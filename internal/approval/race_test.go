package approval_test

import (
	"sync"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

const (
	raceRounds  = 100
	raceWorkers = 8
)

// race runs fn in raceWorkers goroutines released at once and returns their
// errors.
func race(fn func(i int) error) []error {
	errs := make([]error, raceWorkers)
	startGun := make(chan struct{})
	var wg sync.WaitGroup
	for i := range raceWorkers {
		wg.Go(func() {
			<-startGun
			errs[i] = fn(i)
		})
	}
	close(startGun)
	wg.Wait()
	return errs
}

// oneWinner checks that exactly one call succeeded and every other one got
// ECONFLICT, and returns the winner.
func oneWinner(t *testing.T, round int, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("round %d: workers %d and %d both succeeded", round, winner, i)
		case err == nil:
			winner = i
		case countersign.ErrorCode(err) != countersign.ECONFLICT:
			t.Fatalf("round %d: worker %d: %v, want conflict", round, i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("round %d: nobody succeeded", round)
	}
	return winner
}

// TestDecideRace: two approvers, each deciding in several goroutines at
// once, half approving and half denying: exactly one decision wins, and
// the stored request is the winner's, decided by the winner.
func TestDecideRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	approvers := []countersign.ApproverPrincipal{e.alice, e.newApprover("carol", "acme")}
	decisions := []countersign.Decision{countersign.DecisionApprove, countersign.DecisionApprove, countersign.DecisionDeny, countersign.DecisionDeny}
	want := map[string]countersign.Status{}
	wantBy := map[string]string{}
	for round := range raceRounds {
		r := e.pending()
		errs := race(func(i int) error {
			_, err := e.svc.Decide(e.ctx, approvers[i%2], r.ID, countersign.DecisionInput{Decision: decisions[i%4]})
			return err
		})
		w := oneWinner(t, round, errs)
		want[r.ID], _ = decisions[w%4].Status()
		wantBy[r.ID] = approvers[w%2].Username
	}
	// The stored state is the winner's, and the log has exactly one
	// decision per request.
	e.wantOnce(want, func(ev string) bool { return ev == "approved" || ev == "denied" })
	for id, by := range wantBy {
		r, err := e.store.Request(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.DecidedBy != by {
			t.Fatalf("request %s decided by %q, but %s won", id, r.DecidedBy, by)
		}
	}
}

func TestConsumeRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	want := map[string]countersign.Status{}
	for round := range raceRounds {
		r := e.pending()
		e.decide(r.ID, countersign.DecisionApprove)
		errs := race(func(int) error {
			_, err := e.svc.Consume(e.ctx, e.keyA, r.ID)
			return err
		})
		oneWinner(t, round, errs)
		want[r.ID] = countersign.StatusConsumed
	}
	e.wantOnce(want, func(ev string) bool { return ev == "consumed" })
}

// wantOnce checks the stored status of every request in want, and that the
// audit log has exactly one event of the kind for each.
func (e *env) wantOnce(want map[string]countersign.Status, kind func(event string) bool) {
	e.t.Helper()
	list, err := e.store.Requests(e.ctx, countersign.RequestFilter{AccountID: e.acme.ID, Limit: 500})
	if err != nil {
		e.t.Fatal(err)
	}
	seen := 0
	for _, r := range list {
		if s, ok := want[r.ID]; ok {
			seen++
			if r.Status != s {
				e.t.Errorf("request %s is %s, but the winner made it %s", r.ID, r.Status, s)
			}
		}
	}
	if seen != len(want) {
		e.t.Errorf("found %d of the %d requests", seen, len(want))
	}
	entries, err := e.store.AuditLog(e.ctx, 0, 100000)
	if err != nil {
		e.t.Fatal(err)
	}
	count := map[string]int{}
	for _, en := range entries {
		if kind(en.Event) {
			count[en.RequestID]++
		}
	}
	for id := range want {
		if count[id] != 1 {
			e.t.Errorf("request %s has %d audit entries of the winning kind, want 1", id, count[id])
		}
	}
}
