package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// recordingNotifier builds one item per call for one channel and records
// what it was asked; failAnnounce makes Announce fail.
type recordingNotifier struct {
	mu           sync.Mutex
	channel      string
	failAnnounce bool
	announced    []string
	followed     []string // "id status"
	tokens       []string // the stop tokens it drew
}

func (n *recordingNotifier) Announce(_ context.Context, r *countersign.Request) ([]countersign.OutboxItem, []countersign.Link, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.announced = append(n.announced, r.ID)
	if n.failAnnounce {
		return nil, nil, errors.New("the notifier is broken")
	}
	tokens, links := approval.NewLinks(approval.LinkStop)
	n.tokens = append(n.tokens, tokens[approval.LinkStop])
	return []countersign.OutboxItem{{ChannelID: n.channel, Event: countersign.EventCreated, Payload: []byte("p")}}, links, nil
}

func (n *recordingNotifier) FollowUp(_ context.Context, r *countersign.Request) ([]countersign.OutboxItem, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.followed = append(n.followed, r.ID+" "+string(r.Status))
	return []countersign.OutboxItem{{AccountID: r.AccountID, ChannelID: n.channel, RequestID: r.ID, Event: "follow-up"}}, nil
}

func notifierEnv(t *testing.T) (*env, *recordingNotifier) {
	t.Helper()
	n := &recordingNotifier{}
	e := newEnv(t, approval.Config{Notifier: n})
	c := &countersign.Channel{AccountID: e.acme.ID, Name: "hook", Type: countersign.ChannelWebhook, Config: json.RawMessage(`{}`), CreatedAt: start}
	if err := e.store.CreateChannel(e.ctx, c); err != nil {
		t.Fatal(err)
	}
	n.channel = c.ID
	return e, n
}

// queued claims everything due, marks it sent, and returns "request event" of each item.
func (e *env) queued() []string {
	e.t.Helper()
	items, err := e.store.ClaimDue(e.ctx, e.clock.Now().Add(time.Hour), 100, time.Minute)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.RequestID+" "+it.Event)
		if err := e.store.MarkSent(e.ctx, it.ID, it.Claim, e.clock.Now()); err != nil {
			e.t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

func TestNotifierAtCreate(t *testing.T) {
	e, n := notifierEnv(t)
	r := e.pending()
	if got := e.queued(); !slices.Equal(got, []string{r.ID + " created"}) {
		t.Fatalf("queued = %v, want the announcement of the request", got)
	}
	// The link the notifier drew was stored with the request.
	n.mu.Lock()
	tok := n.tokens[0]
	n.mu.Unlock()
	if l, err := e.store.Link(e.ctx, countersign.HashSecret(tok)); err != nil || l.RequestID != r.ID || l.Action != approval.LinkStop {
		t.Errorf("the notifier's link = %+v, %v", l, err)
	}

	// An identical request asked again stores nothing new.
	in := e.toolCall("Bash", "")
	first := e.create(e.keyA, in)
	if _, created, err := e.svc.Create(e.ctx, e.keyA, in); err != nil || created {
		t.Fatalf("twin: created=%v err=%v", created, err)
	}
	if got := e.queued(); !slices.Equal(got, []string{first.ID + " created"}) {
		t.Errorf("queued after a twin = %v", got)
	}

	// An auto-approved request asked nobody, so nobody is told.
	w := e.create(e.keyA, e.toolCall("WebFetch", "s1"))
	if _, err := e.svc.Decide(e.ctx, e.alice, w.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: 5}); err != nil {
		t.Fatal(err)
	}
	e.queued()
	n.mu.Lock()
	before := len(n.announced)
	n.mu.Unlock()
	auto := e.create(e.keyA, e.toolCall("WebFetch", "s1"))
	if auto.Status != countersign.StatusApproved {
		t.Fatalf("not auto-approved: %s", auto.Status)
	}
	n.mu.Lock()
	after := len(n.announced)
	n.mu.Unlock()
	if after != before {
		t.Errorf("an auto-approved request was announced")
	}
}

func TestNotifierFailureNeverFailsTheAgent(t *testing.T) {
	e, n := notifierEnv(t)
	n.failAnnounce = true
	r := e.pending()
	if r.Status != countersign.StatusPending {
		t.Fatalf("status %s", r.Status)
	}
	if got := e.queued(); len(got) != 0 {
		t.Errorf("queued = %v, want nothing", got)
	}
}

func TestNotifierFollowUps(t *testing.T) {
	e, n := notifierEnv(t)
	decided := e.pending()
	cancelled := e.pending()
	expiring := e.pending()
	consumed := e.pending()
	e.queued()

	e.decide(decided.ID, countersign.DecisionDeny)
	if _, err := e.svc.Cancel(e.ctx, e.keyA, cancelled.ID); err != nil {
		t.Fatal(err)
	}
	e.decide(consumed.ID, countersign.DecisionApprove)
	if _, err := e.svc.Consume(e.ctx, e.keyA, consumed.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(11 * time.Minute)
	if _, err := e.svc.Sweep(e.ctx); err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	got := slices.Clone(n.followed)
	n.mu.Unlock()
	slices.Sort(got)
	want := []string{decided.ID + " denied", cancelled.ID + " cancelled", expiring.ID + " expired", consumed.ID + " approved"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("follow-ups = %v, want %v (none for the consumption)", got, want)
	}
	q := e.queued()
	if len(q) != 4 {
		t.Errorf("queued follow-ups = %v, want 4", q)
	}
}
