package storetest

import (
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// testStoreStats: a store that reports on itself names, as the oldest
// undelivered notification, the oldest item still pending: not one sent,
// nor one given up on.
func testStoreStats(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	rep, ok := s.(countersign.StatsReporter)
	if !ok {
		t.Fatal("the store reports no stats")
	}
	st, err := rep.StoreStats(ctx)
	if err != nil || !st.OldestUndelivered.IsZero() {
		t.Fatalf("StoreStats of an empty outbox: %+v, %v; want no oldest item", st, err)
	}
	c := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	for i, at := range []time.Time{Base, Base.Add(time.Minute), Base.Add(2 * time.Minute)} {
		if err := s.Enqueue(ctx, []countersign.OutboxItem{item(c, "req_"+string(rune('a'+i)), countersign.EventCreated)}, at); err != nil {
			t.Fatal(err)
		}
	}
	// The first is sent, the second given up on: the third is the oldest
	// still waiting.
	got := claim(t, s, Base.Add(3*time.Minute), 2)
	if len(got) != 2 {
		t.Fatalf("claimed %d items, want 2", len(got))
	}
	if err := s.MarkSent(ctx, got[0].ID, got[0].Claim, Base.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFailed(ctx, got[1].ID, got[1].Claim, Base.Add(3*time.Minute), time.Time{}, "gone"); err != nil {
		t.Fatal(err)
	}
	st, err = rep.StoreStats(ctx)
	if err != nil || !st.OldestUndelivered.Equal(Base.Add(2*time.Minute)) {
		t.Errorf("StoreStats: oldest undelivered %v, %v; want %v", st.OldestUndelivered, err, Base.Add(2*time.Minute))
	}
}
