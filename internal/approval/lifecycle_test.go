package approval_test

import (
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil"
)

func TestDecideFirstWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	decisions := []struct {
		in   countersign.DecisionInput
		want countersign.Status
	}{
		{countersign.DecisionInput{Decision: countersign.DecisionApprove}, countersign.StatusApproved},
		{countersign.DecisionInput{Decision: countersign.DecisionDeny, Text: "not now"}, countersign.StatusDenied},
		{countersign.DecisionInput{Decision: countersign.DecisionRespond, Text: "use trash instead"}, countersign.StatusResponded},
		{countersign.DecisionInput{Decision: countersign.DecisionStop}, countersign.StatusStopped},
	}
	for _, first := range decisions {
		name := string(first.in.Decision)
		r := e.pending()
		e.clock.Advance(time.Second)
		got, err := e.svc.Decide(e.ctx, e.alice, r.ID, first.in)
		if err != nil {
			t.Fatalf("%s first: %v", name, err)
		}
		if got.Status != first.want || got.DecidedBy != "alice" || got.Reason != first.in.Text || !got.DecidedAt.Equal(e.clock.Now()) {
			t.Errorf("after %s: status %s by %q reason %q at %v", name, got.Status, got.DecidedBy, got.Reason, got.DecidedAt)
		}
		for _, second := range decisions {
			_, err := e.svc.Decide(e.ctx, e.alice, r.ID, second.in)
			wantCode(t, name+" then "+string(second.in.Decision), err, countersign.ECONFLICT)
		}
		if s := e.stored(r.ID); s.Status != first.want || s.Reason != first.in.Text {
			t.Errorf("%s: stored after refused decisions: %s %q", name, s.Status, s.Reason)
		}
		if ev := e.events(r.ID); len(ev) != 2 || ev[1] != string(first.want) {
			t.Errorf("%s: audit events = %v, want [created %s]", name, ev, first.want)
		}
	}
}

func TestDecideByReference(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	got := e.decide(countersign.FormatReference(r.Reference), countersign.DecisionApprove)
	if got.ID != r.ID || got.Status != countersign.StatusApproved {
		t.Errorf("decide by reference: %s %s", got.ID, got.Status)
	}
	// The reference of another account's request is unknown.
	x := e.create(e.keyX, e.toolCall("Bash", ""))
	_, err := e.svc.Decide(e.ctx, e.alice, x.Reference, countersign.DecisionInput{Decision: countersign.DecisionApprove})
	wantCode(t, "other account's reference", err, countersign.ENOTFOUND)
	e.wantStatus(x.ID, countersign.StatusPending)
}

func TestDecideInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	withSession := e.create(e.keyA, e.toolCall("Bash", "s1"))
	tests := []struct {
		name string
		id   string
		in   countersign.DecisionInput
	}{
		{"unknown decision", r.ID, countersign.DecisionInput{Decision: "maybe"}},
		{"respond without text", r.ID, countersign.DecisionInput{Decision: countersign.DecisionRespond}},
		{"respond with blank text", r.ID, countersign.DecisionInput{Decision: countersign.DecisionRespond, Text: " \n "}},
		{"window with deny", withSession.ID, countersign.DecisionInput{Decision: countersign.DecisionDeny, AutoApproveMinutes: 5}},
		{"window of 61 minutes", withSession.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: 61}},
		{"negative window", withSession.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: -1}},
		{"window without a session", r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: 5}},
	}
	before := e.auditCount()
	for _, tt := range tests {
		_, err := e.svc.Decide(e.ctx, e.alice, tt.id, tt.in)
		wantCode(t, tt.name, err, countersign.EINVALID)
		e.wantStatus(tt.id, countersign.StatusPending)
	}
	if got := e.auditCount(); got != before {
		t.Errorf("audit log grew from %d to %d on refused decisions", before, got)
	}
}

func TestRespondRequiresText(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	_, err := e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionRespond})
	wantCode(t, "respond without text", err, countersign.EINVALID)
	e.wantStatus(r.ID, countersign.StatusPending)

	got, err := e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionRespond, Text: "use /tmp/scratch"})
	if err != nil || got.Status != countersign.StatusResponded || got.Reason != "use /tmp/scratch" {
		t.Errorf("respond with text: %v, %v", got, err)
	}
}

func TestScope(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	approved := e.pending()
	e.decide(approved.ID, countersign.DecisionApprove)
	before := e.auditCount()

	_, unknownErr := e.svc.Get(e.ctx, e.keyA, "req_doesnotexist")
	wantCode(t, "unknown id", unknownErr, countersign.ENOTFOUND)
	for _, agent := range []countersign.Agent{e.keyB, e.keyX} {
		_, err := e.svc.Get(e.ctx, agent, r.ID)
		wantCode(t, "Get of another key", err, countersign.ENOTFOUND)
		if err != nil && err.Error() != unknownErr.Error() {
			t.Errorf("another key's request answers %q, an unknown one %q: existence leaks", err, unknownErr)
		}
		_, err = e.svc.Wait(e.ctx, agent, r.ID, time.Second)
		wantCode(t, "Wait on another key's request", err, countersign.ENOTFOUND)
		_, err = e.svc.Cancel(e.ctx, agent, r.ID)
		wantCode(t, "Cancel of another key's request", err, countersign.ENOTFOUND)
		_, err = e.svc.Consume(e.ctx, agent, approved.ID)
		wantCode(t, "Consume of another key's request", err, countersign.ENOTFOUND)
		if err != nil && err.Error() != unknownErr.Error() {
			t.Errorf("consume of another key's request answers %q, an unknown one %q", err, unknownErr)
		}
	}
	_, err := e.svc.Decide(e.ctx, e.bob, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove})
	wantCode(t, "Decide by another account's approver", err, countersign.ENOTFOUND)
	if err != nil && err.Error() != unknownErr.Error() {
		t.Errorf("another account's request answers %q, an unknown one %q", err, unknownErr)
	}
	_, err = e.svc.Find(e.ctx, e.bob, r.ID)
	wantCode(t, "Find by another account's approver", err, countersign.ENOTFOUND)
	list, err := e.svc.List(e.ctx, e.bob, countersign.RequestFilter{})
	if err != nil || len(list) != 0 {
		t.Errorf("bob's list = %d requests, %v; want none", len(list), err)
	}
	list, err = e.svc.List(e.ctx, e.alice, countersign.RequestFilter{Status: countersign.StatusPending})
	if err != nil || len(list) != 1 || list[0].ID != r.ID {
		t.Errorf("alice's pending list = %v, %v; want only %s", list, err, r.ID)
	}

	e.wantStatus(r.ID, countersign.StatusPending)
	e.wantStatus(approved.ID, countersign.StatusApproved)
	if got := e.auditCount(); got != before {
		t.Errorf("audit log grew from %d to %d on refused calls", before, got)
	}
}

func TestExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	e.clock.Advance(10 * time.Minute) // exactly at expires_at: expired

	// The store still says pending: Get expires it lazily.
	e.wantStatus(r.ID, countersign.StatusPending)
	got, err := e.svc.Get(e.ctx, e.keyA, r.ID)
	if err != nil || got.Status != countersign.StatusExpired {
		t.Fatalf("Get after expiry: %v, %v", got, err)
	}
	e.wantStatus(r.ID, countersign.StatusExpired)

	_, err = e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove})
	wantCode(t, "Decide expired", err, countersign.ECONFLICT)
	_, err = e.svc.Consume(e.ctx, e.keyA, r.ID)
	wantCode(t, "Consume expired", err, countersign.ECONFLICT)
	_, err = e.svc.Cancel(e.ctx, e.keyA, r.ID)
	wantCode(t, "Cancel expired", err, countersign.ECONFLICT)
	e.wantStatus(r.ID, countersign.StatusExpired)
	if ev := e.events(r.ID); len(ev) != 2 || ev[1] != "expired" {
		t.Errorf("audit events = %v, want [created expired]", ev)
	}
}

func TestExpiryUndecidedLazilyOnDecide(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	e.clock.Advance(11 * time.Minute)
	// No read came first: the decision itself finds the request expired.
	_, err := e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove})
	wantCode(t, "Decide after expiry", err, countersign.ECONFLICT)
	e.wantStatus(r.ID, countersign.StatusExpired)
}

func TestApprovalExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	e.clock.Advance(time.Minute)
	e.decide(r.ID, countersign.DecisionApprove)
	e.clock.Advance(9 * time.Minute)

	_, err := e.svc.Consume(e.ctx, e.keyA, r.ID)
	wantCode(t, "Consume of an expired approval", err, countersign.ECONFLICT)
	if got, err := e.svc.Get(e.ctx, e.keyA, r.ID); err != nil || got.Status != countersign.StatusExpired {
		t.Errorf("Get of an expired approval: %v, %v", got, err)
	}
	_, err = e.svc.Consume(e.ctx, e.keyA, r.ID)
	wantCode(t, "Consume after the expiry was recorded", err, countersign.ECONFLICT)
	e.wantStatus(r.ID, countersign.StatusExpired)
}

func TestApprovalGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	e.clock.Advance(10*time.Minute - time.Second)
	got := e.decide(r.ID, countersign.DecisionApprove)
	if want := e.clock.Now().Add(time.Minute); !got.ExpiresAt.Equal(want) {
		t.Errorf("approval in the last second expires at %v, want %v (one minute of grace)", got.ExpiresAt, want)
	}
	e.clock.Advance(30 * time.Second) // past the original expiry, within the grace
	if got, err := e.svc.Consume(e.ctx, e.keyA, r.ID); err != nil || got.Status != countersign.StatusConsumed {
		t.Errorf("Consume within the grace: %v, %v", got, err)
	}
}

func TestSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	in := e.toolCall("Bash", "")
	in.TTL = 10 * time.Second
	short := e.create(e.keyA, in)
	long := e.pending()
	ch, stop := e.hub.Subscribe(short.ID)
	defer stop()

	e.clock.Advance(10 * time.Second)
	n, err := e.svc.Sweep(e.ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	testutil.Receive(t, ch, "Sweep's ring of the hub for the expired request")
	e.wantStatus(short.ID, countersign.StatusExpired)
	e.wantStatus(long.ID, countersign.StatusPending)
	if n, err := e.svc.Sweep(e.ctx); err != nil || n != 0 {
		t.Errorf("second Sweep = %d, %v; want 0", n, err)
	}
}

func TestConsumeOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	_, err := e.svc.Consume(e.ctx, e.keyA, r.ID)
	wantCode(t, "Consume pending", err, countersign.ECONFLICT)
	e.decide(r.ID, countersign.DecisionApprove)
	e.clock.Advance(time.Second)

	got, err := e.svc.Consume(e.ctx, e.keyA, r.ID)
	if err != nil || got.Status != countersign.StatusConsumed || !got.ConsumedAt.Equal(e.clock.Now()) {
		t.Fatalf("Consume: %v, %v", got, err)
	}
	_, err = e.svc.Consume(e.ctx, e.keyA, r.ID)
	wantCode(t, "second Consume", err, countersign.ECONFLICT)
	e.wantStatus(r.ID, countersign.StatusConsumed)
	if ev := e.events(r.ID); len(ev) != 3 || ev[2] != "consumed" {
		t.Errorf("audit events = %v, want [created approved consumed]", ev)
	}

	denied := e.pending()
	e.decide(denied.ID, countersign.DecisionDeny)
	_, err = e.svc.Consume(e.ctx, e.keyA, denied.ID)
	wantCode(t, "Consume denied", err, countersign.ECONFLICT)
	e.wantStatus(denied.ID, countersign.StatusDenied)
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	r := e.pending()
	for _, other := range []countersign.Agent{e.keyB, e.keyX} {
		_, err := e.svc.Cancel(e.ctx, other, r.ID)
		wantCode(t, "Cancel by another key", err, countersign.ENOTFOUND)
	}
	e.wantStatus(r.ID, countersign.StatusPending)

	got, err := e.svc.Cancel(e.ctx, e.keyA, r.ID)
	if err != nil || got.Status != countersign.StatusCancelled || !got.DecidedAt.IsZero() {
		t.Fatalf("Cancel by the owner: %v, %v", got, err)
	}
	_, err = e.svc.Cancel(e.ctx, e.keyA, r.ID)
	wantCode(t, "second Cancel", err, countersign.ECONFLICT)
	_, err = e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove})
	wantCode(t, "Decide cancelled", err, countersign.ECONFLICT)
	e.wantStatus(r.ID, countersign.StatusCancelled)

	approved := e.pending()
	e.decide(approved.ID, countersign.DecisionApprove)
	_, err = e.svc.Cancel(e.ctx, e.keyA, approved.ID)
	wantCode(t, "Cancel approved", err, countersign.ECONFLICT)
	e.wantStatus(approved.ID, countersign.StatusApproved)
}

func TestListInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, approval.Config{})
	for _, f := range []countersign.RequestFilter{{Status: "done"}, {Limit: 501}, {Limit: -1}, {Reference: "OOO-000"}} {
		_, err := e.svc.List(e.ctx, e.alice, f)
		wantCode(t, "List invalid filter", err, countersign.EINVALID)
	}
}
