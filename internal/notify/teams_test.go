package notify_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/notify"
)

// TestRoutedNotifications: a request a team rule routes to alice is
// announced only on the channel that names alice, without one-time links
// (a link is no approver); a request no rule routes is announced on every
// channel of the account, with links, as before.
func TestRoutedNotifications(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		name      string
		approvers []string
	}{{"alices", []string{"alice"}}, {"carols", []string{"carol"}}, {"everyone", nil}} {
		if _, err := e.admin.Add(e.ctx, notify.Spec{Account: "acme", Name: c.name, Type: countersign.ChannelWebhook, Secret: "s3cret",
			Settings: notify.Settings{URL: "https://hooks.example.com/" + c.name, Approvers: c.approvers}}); err != nil {
			t.Fatal(err)
		}
	}
	channels, err := e.store.Channels(e.ctx, e.account.ID)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, c := range channels {
		names[c.ID] = c.Name
		if c.Name == "alices" {
			var s notify.Settings
			if err := json.Unmarshal(c.Config, &s); err != nil || !slices.Equal(s.Approvers, []string{"alice"}) {
				t.Fatalf("stored settings %s: %v", c.Config, err)
			}
		}
	}
	svc := approval.New(e.store, e.clock, approval.NewHub(), approval.Config{Notifier: notify.NewNotifier(e.store),
		Teams: &approval.Teams{Rules: []approval.TeamRule{{Tool: "deploy*", Approvers: []string{"alice"}, Route: "alice", Quorum: 2}}}}, e.log, nil)

	told := func(action string) []string {
		t.Helper()
		_, _, err := svc.Create(e.ctx, e.agent, countersign.CreateInput{Kind: countersign.KindTool, Action: action, Arguments: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		items, err := e.store.ClaimDue(e.ctx, e.clock.Now().Add(time.Hour), 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, it := range items {
			out = append(out, names[it.ChannelID])
			if err := e.store.MarkSent(e.ctx, it.ID, it.Claim, e.clock.Now()); err != nil {
				t.Fatal(err)
			}
		}
		slices.Sort(out)
		return out
	}
	if got := told("deploy-prod"); !slices.Equal(got, []string{"alices"}) {
		t.Errorf("a routed request was announced on %v, want alices only", got)
	}
	if got := told("Bash"); !slices.Equal(got, []string{"alices", "carols", "everyone"}) {
		t.Errorf("an unrouted request was announced on %v, want every channel", got)
	}

	// The links the notifier draws: none for a request of an audience
	// that no link may decide.
	n := notify.NewNotifier(e.store)
	r := &countersign.Request{ID: countersign.NewID("req_"), AccountID: e.account.ID, Status: countersign.StatusPending}
	if items, links, err := n.Announce(e.ctx, r); err != nil || len(items) != 3 || len(links) != 3 {
		t.Errorf("Announce of no audience: %d items, %d links, %v; want 3 and 3", len(items), len(links), err)
	}
	r.Audience = &countersign.Audience{Approvers: []string{"carol"}, NoLinks: true}
	if items, links, err := n.Announce(e.ctx, r); err != nil || len(items) != 1 || names[items[0].ChannelID] != "carols" || len(links) != 0 {
		t.Errorf("Announce to carol: %d items, %d links, %v; want carols' alone, no link", len(items), len(links), err)
	}
}
