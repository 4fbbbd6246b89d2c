package storetest

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// lease is the lease of every claim in these tests.
const lease = 2 * time.Minute

func newChannel(f *fixture, name string, typ countersign.ChannelType) *countersign.Channel {
	return &countersign.Channel{
		ID: countersign.NewID("chn_"), AccountID: f.account.ID, Name: name, Type: typ,
		Config: json.RawMessage(`{"url":"https://hooks.example.com/x"}`), Secret: []byte("sealed"), CreatedAt: Base,
	}
}

func mustChannel(t *testing.T, f *fixture, name string, typ countersign.ChannelType) *countersign.Channel {
	t.Helper()
	c := newChannel(f, name, typ)
	if err := f.s.CreateChannel(t.Context(), c); err != nil {
		t.Fatalf("CreateChannel(%s): %v", name, err)
	}
	return c
}

// item returns a pending item of channel c about request r.
func item(c *countersign.Channel, requestID, event string) countersign.OutboxItem {
	return countersign.OutboxItem{
		ID: countersign.NewID("ntf_"), AccountID: c.AccountID, ChannelID: c.ID, RequestID: requestID,
		Event: event, Payload: []byte("sealed " + event),
	}
}

// claim claims at now and fails the test on an error.
func claim(t *testing.T, s countersign.Store, now time.Time, limit int) []*countersign.OutboxItem {
	t.Helper()
	got, err := s.ClaimDue(t.Context(), now, limit, lease)
	if err != nil {
		t.Fatalf("ClaimDue: %v", err)
	}
	return got
}

func ids(items []*countersign.OutboxItem) []string {
	out := []string{}
	for _, it := range items {
		out = append(out, it.ID)
	}
	return out
}

func testChannels(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	hook := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	mail := newChannel(f, "mail", countersign.ChannelEmail)
	mail.Secret = nil
	if err := s.CreateChannel(ctx, mail); err != nil {
		t.Fatalf("CreateChannel(mail): %v", err)
	}

	got, err := s.Channel(ctx, hook.ID)
	if err != nil {
		t.Fatalf("Channel: %v", err)
	}
	same(t, "stored channel", got, hook)
	_, err = s.Channel(ctx, "chn_missing")
	wantCode(t, "Channel(missing)", err, countersign.ENOTFOUND)

	// Names are unique within an account, not across accounts.
	err = s.CreateChannel(ctx, newChannel(f, "n8n", countersign.ChannelNtfy))
	wantCode(t, "a second channel named n8n", err, countersign.ECONFLICT)
	other := mustAccount(t, s, "other")
	oc := &countersign.Channel{AccountID: other.ID, Name: "n8n", Type: countersign.ChannelNtfy, Config: json.RawMessage(`{}`), CreatedAt: Base}
	if err := s.CreateChannel(ctx, oc); err != nil || oc.ID == "" {
		t.Fatalf("the same name in another account: %v (id %q)", err, oc.ID)
	}
	err = s.CreateChannel(ctx, &countersign.Channel{AccountID: "acc_missing", Name: "x", Type: countersign.ChannelNtfy, Config: json.RawMessage(`{}`), CreatedAt: Base})
	wantCode(t, "a channel of an unknown account", err, countersign.ENOTFOUND)

	list, err := s.Channels(ctx, f.account.ID)
	if err != nil || len(list) != 2 || list[0].Name != "mail" || list[1].Name != "n8n" || len(list[0].Secret) != 0 {
		t.Fatalf("Channels = %+v, %v; want mail then n8n, mail without a secret", list, err)
	}
	all, err := s.Channels(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("Channels(all) = %d channels, %v; want 3", len(all), err)
	}

	// An update replaces type, config and secret, and keeps the rest.
	upd := *hook
	upd.Type, upd.Config, upd.Secret, upd.Name, upd.CreatedAt = countersign.ChannelNtfy, json.RawMessage(`{"topic":"t"}`), []byte("new"), "renamed", Base.Add(time.Hour)
	if err := s.UpdateChannel(ctx, &upd); err != nil {
		t.Fatalf("UpdateChannel: %v", err)
	}
	want := *hook
	want.Type, want.Config, want.Secret = upd.Type, upd.Config, upd.Secret
	got, _ = s.Channel(ctx, hook.ID)
	same(t, "updated channel", got, &want)
	wrong := upd
	wrong.AccountID = other.ID
	wantCode(t, "UpdateChannel of another account", s.UpdateChannel(ctx, &wrong), countersign.ENOTFOUND)

	// Remove by name or id, only in the channel's account.
	wantCode(t, "RemoveChannel in another account", s.RemoveChannel(ctx, other.ID, "mail"), countersign.ENOTFOUND)
	if err := s.RemoveChannel(ctx, f.account.ID, "mail"); err != nil {
		t.Fatalf("RemoveChannel(name): %v", err)
	}
	if err := s.RemoveChannel(ctx, f.account.ID, hook.ID); err != nil {
		t.Fatalf("RemoveChannel(id): %v", err)
	}
	wantCode(t, "RemoveChannel twice", s.RemoveChannel(ctx, f.account.ID, "mail"), countersign.ENOTFOUND)
	if list, _ := s.Channels(ctx, f.account.ID); len(list) != 0 {
		t.Errorf("channels after removing both: %+v", list)
	}
}

func testOutboxWithRequest(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	hook := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	other := mustAccount(t, s, "other")
	foreign := &countersign.Channel{AccountID: other.ID, Name: "theirs", Type: countersign.ChannelNtfy, Config: json.RawMessage(`{}`), CreatedAt: Base}
	if err := s.CreateChannel(t.Context(), foreign); err != nil {
		t.Fatalf("CreateChannel: %v", err)
	}

	// The items of a new request are stored with it, about it and of its
	// account whatever they say; an item of another account's channel is
	// left out.
	r := newRequest(f.key, "Bash", `{}`, "x")
	mine := item(hook, "req_ignored", countersign.EventCreated)
	mine.AccountID = other.ID
	r.Outbox = []countersign.OutboxItem{mine, item(foreign, "", countersign.EventCreated)}
	r = create(t, s, r, Base)
	got := claim(t, s, Base, 10)
	if len(got) != 1 {
		t.Fatalf("claimed %d items, want the one of the request's own account", len(got))
	}
	it := got[0]
	if it.ID != mine.ID || it.RequestID != r.ID || it.AccountID != f.account.ID || it.ChannelID != hook.ID ||
		it.Event != countersign.EventCreated || string(it.Payload) != "sealed created" || it.State != countersign.OutboxPending ||
		it.Attempts != 1 || !it.CreatedAt.Equal(Base) || !it.NextAttemptAt.Equal(Base) || !it.LastAttemptAt.Equal(Base) ||
		!it.LeaseUntil.Equal(Base.Add(lease)) || it.Claim == "" {
		t.Fatalf("claimed item = %+v", it)
	}

	// An identical request returned instead of a new one stores nothing.
	twin := newRequest(f.key, "Bash", `{}`, "x")
	twin.Outbox = []countersign.OutboxItem{item(hook, "", countersign.EventCreated)}
	if _, created, err := s.CreateRequest(t.Context(), twin, 0, Base, createdEvent(twin)); err != nil || created {
		t.Fatalf("twin: created=%v err=%v", created, err)
	}
	// A request that fails stores none of its items either.
	taken := newRequest(f.key, "Bash", `{"other":1}`, "y")
	taken.Reference = r.Reference
	taken.Outbox = []countersign.OutboxItem{item(hook, "", countersign.EventCreated)}
	if _, _, err := s.CreateRequest(t.Context(), taken, 0, Base, createdEvent(taken)); err == nil {
		t.Fatalf("a request with a taken reference was created")
	}
	if extra := claim(t, s, Base.Add(time.Hour), 10); len(extra) != 1 || extra[0].ID != mine.ID {
		t.Fatalf("after a twin and a failed request, due items = %v, want only the first item again", ids(extra))
	}
}

func testOutboxClaim(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	hook := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	var items []countersign.OutboxItem
	for i := range 3 {
		it := item(hook, "req_x", countersign.EventDecided)
		it.CreatedAt = Base
		it.NextAttemptAt = Base.Add(time.Duration(2-i) * time.Second) // the last is due first
		items = append(items, it)
	}
	later := item(hook, "req_x", countersign.EventDecided)
	later.NextAttemptAt = Base.Add(time.Hour)
	if err := s.Enqueue(ctx, append(items, later), Base); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}

	// Due items go soonest first, at most limit of them, one claim for
	// the call; a held item is not claimed again before its lease ends.
	now := Base.Add(5 * time.Second)
	first := claim(t, s, now, 2)
	if want := []string{items[2].ID, items[1].ID}; !slices.Equal(ids(first), want) {
		t.Fatalf("first claim = %v, want %v", ids(first), want)
	}
	if first[0].Claim != first[1].Claim {
		t.Errorf("one call gave two claims: %q, %q", first[0].Claim, first[1].Claim)
	}
	second := claim(t, s, now, 10)
	if want := []string{items[0].ID}; !slices.Equal(ids(second), want) {
		t.Fatalf("second claim = %v, want %v (the rest is held or not due)", ids(second), want)
	}
	if second[0].Claim == first[0].Claim {
		t.Errorf("two calls share claim %q", second[0].Claim)
	}
	if again := claim(t, s, now.Add(lease-time.Nanosecond), 10); len(again) != 0 {
		t.Fatalf("claimed %v again before the lease ended", ids(again))
	}

	// A sender that died: its items come back when the lease ends, with a
	// new claim, and the old claim can no longer report.
	back := claim(t, s, now.Add(lease), 10)
	if want := []string{items[2].ID, items[1].ID, items[0].ID}; !slices.Equal(ids(back), want) {
		t.Fatalf("after the lease = %v, want %v", ids(back), want)
	}
	if back[0].Attempts != 2 || back[0].Claim == first[0].Claim || !back[0].LastAttemptAt.Equal(now.Add(lease)) {
		t.Fatalf("reclaimed item = %+v, want attempt 2 with a new claim", back[0])
	}
	wantCode(t, "MarkSent with a lost claim", s.MarkSent(ctx, items[2].ID, first[0].Claim, now), countersign.ECONFLICT)
	wantCode(t, "MarkFailed with a lost claim", s.MarkFailed(ctx, items[2].ID, first[0].Claim, now, now.Add(time.Minute), "x"), countersign.ECONFLICT)
	wantCode(t, "MarkSent of an unknown item", s.MarkSent(ctx, "ntf_missing", back[0].Claim, now), countersign.ENOTFOUND)
	wantCode(t, "MarkSent without a claim", s.MarkSent(ctx, items[2].ID, "", now), countersign.ECONFLICT)

	// Sent is final: it is never due again, and a second report conflicts.
	at := now.Add(lease + time.Second)
	if err := s.MarkSent(ctx, items[2].ID, back[0].Claim, at); err != nil {
		t.Fatalf("MarkSent: %v", err)
	}
	wantCode(t, "MarkSent twice", s.MarkSent(ctx, items[2].ID, back[0].Claim, at), countersign.ECONFLICT)

	// A failure with a next attempt: due again then, not before, with the
	// payload kept; without one: given up.
	next := at.Add(30 * time.Second)
	if err := s.MarkFailed(ctx, items[1].ID, back[1].Claim, at, next, "connection refused"); err != nil {
		t.Fatalf("MarkFailed(retry): %v", err)
	}
	if err := s.MarkFailed(ctx, items[0].ID, back[2].Claim, at, time.Time{}, "403 Forbidden"); err != nil {
		t.Fatalf("MarkFailed(give up): %v", err)
	}
	if got := claim(t, s, next.Add(-time.Nanosecond), 10); len(got) != 0 {
		t.Fatalf("claimed %v before its next attempt", ids(got))
	}
	got := claim(t, s, next, 10)
	if len(got) != 1 || got[0].ID != items[1].ID || got[0].Attempts != 3 || got[0].LastError != "connection refused" ||
		!got[0].FailedAt.Equal(at) || string(got[0].Payload) != "sealed decided" || !got[0].LeaseUntil.Equal(next.Add(lease)) {
		t.Fatalf("retried item = %+v", got)
	}
	if err := s.MarkSent(ctx, items[1].ID, got[0].Claim, next); err != nil {
		t.Fatalf("MarkSent after a retry: %v", err)
	}
	if got := claim(t, s, Base.Add(2*time.Hour), 10); len(got) != 1 || got[0].ID != later.ID {
		t.Fatalf("at the end only the late item is due; got %v", ids(got))
	}
}

func testOutboxEnqueue(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	hook := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	other := mustAccount(t, s, "other")

	// Defaults: an id, CreatedAt now, NextAttemptAt CreatedAt. A missing
	// channel or another account's channel leaves the item out.
	it := item(hook, "req_x", countersign.EventExpired)
	it.ID = ""
	wrongAccount := item(hook, "req_x", countersign.EventExpired)
	wrongAccount.AccountID = other.ID
	missing := item(hook, "req_x", countersign.EventExpired)
	missing.ChannelID = "chn_missing"
	if err := s.Enqueue(ctx, []countersign.OutboxItem{it, wrongAccount, missing}, Base); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	got := claim(t, s, Base, 10)
	if len(got) != 1 || got[0].ID == "" || got[0].AccountID != f.account.ID || !got[0].CreatedAt.Equal(Base) ||
		!got[0].NextAttemptAt.Equal(Base) || got[0].Event != countersign.EventExpired || got[0].Attempts != 1 {
		t.Fatalf("enqueued = %+v, want one item with defaults", got)
	}
	if err := s.Enqueue(ctx, nil, Base); err != nil {
		t.Errorf("Enqueue(nothing): %v", err)
	}
	// Removing the channel removes its items.
	held := item(hook, "req_y", countersign.EventCreated)
	if err := s.Enqueue(ctx, []countersign.OutboxItem{held}, Base); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	claimed := claim(t, s, Base, 10)
	if len(claimed) != 1 || claimed[0].ID != held.ID {
		t.Fatalf("claimed %v, want %s", ids(claimed), held.ID)
	}
	if err := s.RemoveChannel(ctx, f.account.ID, hook.ID); err != nil {
		t.Fatalf("RemoveChannel: %v", err)
	}
	if got := claim(t, s, Base.Add(time.Hour), 10); len(got) != 0 {
		t.Fatalf("items of a removed channel are still due: %v", ids(got))
	}
	wantCode(t, "MarkSent of a removed channel's item", s.MarkSent(ctx, held.ID, claimed[0].Claim, Base), countersign.ENOTFOUND)
}

func testOutboxStatus(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	hook := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	quiet := mustChannel(t, f, "quiet", countersign.ChannelNtfy)
	var items []countersign.OutboxItem
	for range 4 {
		items = append(items, item(hook, "req_x", countersign.EventCreated))
	}
	if err := s.Enqueue(ctx, items, Base); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	got := claim(t, s, Base, 3)
	t1, t2 := Base.Add(time.Minute), Base.Add(2*time.Minute)
	byID := map[string]*countersign.OutboxItem{}
	for _, it := range got {
		byID[it.ID] = it
	}
	mustMark := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustMark(s.MarkFailed(ctx, got[0].ID, got[0].Claim, t1, t1.Add(time.Minute), "first error"))
	mustMark(s.MarkFailed(ctx, got[1].ID, got[1].Claim, t2, time.Time{}, "last error"))
	mustMark(s.MarkSent(ctx, got[2].ID, got[2].Claim, t2))

	list, err := s.OutboxStatus(ctx, f.account.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("OutboxStatus = %+v, %v; want two channels", list, err)
	}
	st := list[0]
	if st.Channel.ID != hook.ID || st.Pending != 2 || st.Retrying != 1 || st.Sent != 1 || st.Failed != 1 ||
		!st.LastSentAt.Equal(t2) || !st.NextAttemptAt.Equal(Base) || st.LastError != "last error" || !st.LastErrorAt.Equal(t2) {
		t.Errorf("status of n8n = %+v", st)
	}
	if q := list[1]; q.Channel.ID != quiet.ID || q.Pending+q.Sent+q.Failed+q.Retrying != 0 || !q.LastSentAt.IsZero() || q.LastError != "" {
		t.Errorf("status of a quiet channel = %+v", q)
	}
	if all, err := s.OutboxStatus(ctx, ""); err != nil || len(all) != 2 {
		t.Errorf("OutboxStatus(all) = %d, %v", len(all), err)
	}

	// Purge removes finished items done before the time, never pending ones.
	if n, err := s.PurgeOutbox(ctx, t2); err != nil || n != 0 {
		t.Errorf("PurgeOutbox(before they finished) = %d, %v", n, err)
	}
	if n, err := s.PurgeOutbox(ctx, t2.Add(time.Nanosecond)); err != nil || n != 2 {
		t.Errorf("PurgeOutbox = %d, %v; want the sent and the failed item", n, err)
	}
	list, _ = s.OutboxStatus(ctx, f.account.ID)
	if st := list[0]; st.Pending != 2 || st.Sent != 0 || st.Failed != 0 {
		t.Errorf("status after the purge = %+v", st)
	}
}

// testOutboxClaimRace has many senders claim at once: every item goes to
// exactly one of them.
func testOutboxClaimRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	hook := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	const n = 60
	var items []countersign.OutboxItem
	for range n {
		items = append(items, item(hook, "req_x", countersign.EventCreated))
	}
	if err := s.Enqueue(ctx, items, Base); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for {
				got, err := s.ClaimDue(ctx, Base, 3, lease)
				if err != nil {
					t.Errorf("ClaimDue: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, it := range got {
					seen[it.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d items claimed, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("item %s claimed %d times", id, c)
		}
	}
}

// testOutboxWatch: a store that is an OutboxWatcher rings its watchers
// after a commit that added outbox items (a new request with them, an
// Enqueue), and not after one that added none (a request without items, a
// twin returned instead of a new request).
func testOutboxWatch(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	ow, ok := s.(countersign.OutboxWatcher)
	if !ok {
		t.Fatalf("%T is not a countersign.OutboxWatcher", s)
	}
	hook := mustChannel(t, f, "n8n", countersign.ChannelWebhook)
	added, stop := ow.WatchOutbox()
	defer stop()
	rang := func() bool {
		select {
		case <-added:
			return true
		default:
			return false
		}
	}
	// The ring is sent before the call returns: no wait is needed.
	if rang() {
		t.Fatalf("rang before anything was added")
	}
	plain := create(t, s, newRequest(f.key, "Bash", `{"n":1}`, "x"), Base)
	if rang() {
		t.Fatalf("rang after a request without outbox items (%s)", plain.ID)
	}
	r := newRequest(f.key, "Bash", `{"n":2}`, "y")
	r.Outbox = []countersign.OutboxItem{item(hook, "", countersign.EventCreated)}
	create(t, s, r, Base)
	if !rang() {
		t.Fatalf("no ring after a request with an outbox item")
	}
	twin := newRequest(f.key, "Bash", `{"n":2}`, "y")
	twin.Outbox = []countersign.OutboxItem{item(hook, "", countersign.EventCreated)}
	if _, created, err := s.CreateRequest(ctx, twin, 0, Base, createdEvent(twin)); err != nil || created {
		t.Fatalf("twin: created=%v err=%v", created, err)
	}
	if rang() {
		t.Fatalf("rang after a twin, which adds nothing")
	}
	if err := s.Enqueue(ctx, []countersign.OutboxItem{item(hook, r.ID, countersign.EventDecided)}, Base); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if !rang() {
		t.Fatalf("no ring after Enqueue")
	}
	// A watch that ended hears nothing more; another one still does.
	other, stopOther := ow.WatchOutbox()
	defer stopOther()
	stop()
	if err := s.Enqueue(ctx, []countersign.OutboxItem{item(hook, r.ID, countersign.EventExpired)}, Base); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if rang() {
		t.Fatalf("an ended watch was rung")
	}
	select {
	case <-other:
	default:
		t.Fatalf("the second watch was not rung")
	}
}
