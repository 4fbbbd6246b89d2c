package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/storetest"
	"github.com/countersign/countersign/internal/testutil/wait"
)

// feedRecorder collects what Listen reports. Other tests share the
// database's notification channel, so changes are kept by request id.
type feedRecorder struct {
	mu      sync.Mutex
	changes map[string][]string // request id → account ids, one per notification
	resyncs int
	pids    chan uint32 // the listener's backend pid each time it listens, 0 when it lost it
	// firstPID is the backend pid of the listener's first connection.
	firstPID uint32
	signal   chan struct{}
}

func newRecorder() *feedRecorder {
	return &feedRecorder{changes: map[string][]string{}, pids: make(chan uint32, 16), signal: make(chan struct{}, 1000)}
}

func (r *feedRecorder) change(requestID, accountID string) {
	r.mu.Lock()
	r.changes[requestID] = append(r.changes[requestID], accountID)
	r.mu.Unlock()
	r.signal <- struct{}{}
}

func (r *feedRecorder) resync() {
	r.mu.Lock()
	r.resyncs++
	r.mu.Unlock()
	r.signal <- struct{}{}
}

// waitFor blocks until cond holds, checking after each report; the bound
// on each report (wait.Receive's) only guards against a hang.
func (r *feedRecorder) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for {
		r.mu.Lock()
		ok := cond()
		r.mu.Unlock()
		if ok {
			return
		}
		wait.Receive(t, r.signal, "a report on the way to "+what)
	}
}

// listen runs db.Listen until the test ends and returns the recorder once
// it listens. With a gap channel, the listener, each time it reported its
// connection lost, waits for a value on it (or for the end of the test)
// before it goes on to reconnect.
func listen(t *testing.T, db *DB, gap <-chan struct{}) *feedRecorder {
	t.Helper()
	rec := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	db.listening = func(pid uint32) {
		rec.pids <- pid
		if pid == 0 && gap != nil {
			select {
			case <-gap:
			case <-ctx.Done():
			}
		}
	}
	done := make(chan error, 1)
	go func() { done <- db.Listen(ctx, rec.change, rec.resync) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Listen: %v", err)
		}
	})
	if rec.firstPID = <-rec.pids; rec.firstPID == 0 {
		t.Fatal("the listener reported no connection")
	}
	rec.waitFor(t, "the first resync", func() bool { return rec.resyncs == 1 })
	return rec
}

func TestListenAnnouncesChanges(t *testing.T) {
	url := Migrated.SchemaURL(t)
	listener, writer := openTest(t, url), openTest(t, url)
	rec := listen(t, listener, nil)
	acc, key := seed(t, writer, 0)
	ctx := t.Context()
	mk := func(args string, ttl time.Duration) *countersign.Request {
		r := &countersign.Request{
			AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: args, PreviewHash: "p",
			Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(ttl),
		}
		got, _, err := writer.CreateRequest(ctx, r, 0, storetest.Base, countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	decided, expiring := mk("a", time.Hour), mk("b", time.Minute)
	// A refused transition and a deduplicated create change nothing and
	// announce nothing.
	mk("a", time.Hour)
	if _, err := writer.Transition(ctx, countersign.Transition{ID: decided.ID, From: []countersign.Status{countersign.StatusApproved},
		To: countersign.StatusConsumed, Now: storetest.Base}, countersign.AuditEvent{Event: "consumed", Actor: "k", Detail: "{}"}); countersign.ErrorCode(err) != countersign.ECONFLICT {
		t.Fatalf("consume of a pending request: %v", err)
	}
	if _, err := writer.Transition(ctx, countersign.Transition{ID: decided.ID, From: []countersign.Status{countersign.StatusPending},
		To: countersign.StatusDenied, Now: storetest.Base}, countersign.AuditEvent{Event: "denied", Actor: "a", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := writer.ExpireRequests(ctx, "", storetest.Base.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "three changes", func() bool {
		return len(rec.changes[decided.ID]) == 2 && len(rec.changes[expiring.ID]) == 2
	})
	// The listener goes on recording other tests' changes: read under its
	// lock.
	rec.mu.Lock()
	for _, id := range []string{decided.ID, expiring.ID} {
		for _, a := range rec.changes[id] {
			if a != acc.ID {
				t.Errorf("change of %s announced with account %q, want %q", id, a, acc.ID)
			}
		}
	}
	rec.mu.Unlock()
	// Nothing more arrives for them: a refused or deduplicated call
	// announced nothing. Notifications arrive in commit order, so any
	// such announcement would have come before that of a later change.
	later := mk("c", time.Hour)
	rec.waitFor(t, "the later change", func() bool { return len(rec.changes[later.ID]) == 1 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if n, m := len(rec.changes[decided.ID]), len(rec.changes[expiring.ID]); n != 2 || m != 2 {
		t.Errorf("announcements: %d of the decided request, %d of the expired one; want 2 each (creation and change)", n, m)
	}
}

// TestListenReconnects drops the listener's connection from the server
// side, as a database restart does, and makes a change while it is gone:
// the listener comes back and resyncs, which is how waiters learn of the
// change nobody announced to them.
func TestListenReconnects(t *testing.T) {
	url := Migrated.SchemaURL(t)
	listener, writer := openTest(t, url), openTest(t, url)
	// Once it reported the connection lost, the listener waits until the
	// change below is made: the change surely falls in the gap.
	gap := make(chan struct{})
	rec := listen(t, listener, gap)
	acc, key := seed(t, writer, 0)
	ctx := t.Context()

	pid := rec.firstPID
	for range 2 {
		old := pid
		rec.mu.Lock()
		before := rec.resyncs
		rec.mu.Unlock()
		pgtest.Exec(t, `SELECT pg_terminate_backend($1)`, int(old))
		if got := <-rec.pids; got != 0 {
			t.Fatalf("listener reported pid %d, want 0 (lost)", got)
		}
		r := &countersign.Request{
			AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: countersign.NewID(""), PreviewHash: "p",
			Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Hour),
		}
		if _, _, err := writer.CreateRequest(ctx, r, 0, storetest.Base, countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"}); err != nil {
			t.Fatal(err)
		}
		gap <- struct{}{}
		pid = <-rec.pids
		if pid == 0 || pid == old {
			t.Fatalf("listener came back on pid %d (was %d)", pid, old)
		}
		rec.waitFor(t, "a resync after reconnecting", func() bool { return rec.resyncs > before })
		rec.mu.Lock()
		missed := len(rec.changes[r.ID])
		rec.mu.Unlock()
		if missed != 0 {
			t.Errorf("the change made while the listener was gone was announced to it (%d times)", missed)
		}
	}
}

// TestListenWakesOutbox: outbox items added on one replica wake the
// notification worker's watch on another through the listener, both those
// of a new request and those enqueued on their own; and a resync rings the
// watch, since what the gap left unannounced may include outbox items.
func TestListenWakesOutbox(t *testing.T) {
	url := Migrated.SchemaURL(t)
	listener, writer := openTest(t, url), openTest(t, url)
	added, stop := listener.WatchOutbox()
	defer stop()
	listen(t, listener, nil)
	wait.Receive(t, added, "the first resync's ring of the outbox watch")
	acc, key := seed(t, writer, 0)
	ctx := t.Context()
	ch := &countersign.Channel{AccountID: acc.ID, Name: "hook", Type: countersign.ChannelWebhook, Config: []byte(`{}`), CreatedAt: storetest.Base}
	if err := writer.CreateChannel(ctx, ch); err != nil {
		t.Fatal(err)
	}
	r := &countersign.Request{
		AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
		Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: "a", PreviewHash: "p",
		Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Hour),
		Outbox: []countersign.OutboxItem{{ChannelID: ch.ID, Event: countersign.EventCreated}},
	}
	if _, _, err := writer.CreateRequest(ctx, r, 0, storetest.Base, countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	wait := func(what string) {
		t.Helper()
		wait.Receive(t, added, "a ring of the other replica's watch after "+what)
	}
	wait("a request with an outbox item")
	if err := writer.Enqueue(ctx, []countersign.OutboxItem{{AccountID: acc.ID, ChannelID: ch.ID, RequestID: r.ID, Event: countersign.EventDecided}}, storetest.Base); err != nil {
		t.Fatal(err)
	}
	wait("Enqueue")
}

// TestChannelsHeardAcrossReplicas: a replica that listens keeps the
// channels of accounts, and forgets them when another replica changes
// them (heard through the feed, in commit order) or when it changes them
// itself (at once).
func TestChannelsHeardAcrossReplicas(t *testing.T) {
	url := Migrated.SchemaURL(t)
	listener, writer := openTest(t, url), openTest(t, url)
	rec := listen(t, listener, nil)
	acc, key := seed(t, writer, 0)
	ctx := t.Context()
	count := func(db *DB) int {
		t.Helper()
		list, err := db.Channels(ctx, acc.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(list)
	}
	if n := count(listener); n != 0 {
		t.Fatalf("%d channels before any was added", n)
	}
	add := func(db *DB, name string) {
		t.Helper()
		ch := &countersign.Channel{AccountID: acc.ID, Name: name, Type: countersign.ChannelWebhook, Config: []byte(`{}`), CreatedAt: storetest.Base}
		if err := db.CreateChannel(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	add(writer, "theirs")
	// A change committed after the channel's is announced after it: once
	// the listener heard the request, it has heard the channel too.
	r := &countersign.Request{
		AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
		Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: "a", PreviewHash: "p",
		Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Hour),
	}
	if _, _, err := writer.CreateRequest(ctx, r, 0, storetest.Base, countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the request made after the channel", func() bool { return len(rec.changes[r.ID]) == 1 })
	if n := count(listener); n != 1 {
		t.Fatalf("the listening replica sees %d channels after another added one, want 1", n)
	}
	add(listener, "mine")
	if n := count(listener); n != 2 {
		t.Fatalf("the listening replica sees %d channels after it added one, want 2", n)
	}
	if err := writer.RemoveChannel(ctx, acc.ID, "mine"); err != nil {
		t.Fatal(err)
	}
	r2 := *r
	r2.ID, r2.Reference, r2.ArgsHash = "", countersign.NewReference(), "b"
	if _, _, err := writer.CreateRequest(ctx, &r2, 0, storetest.Base, countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, "the request made after the removal", func() bool { return len(rec.changes[r2.ID]) == 1 })
	if n := count(listener); n != 1 {
		t.Fatalf("the listening replica sees %d channels after another removed one, want 1", n)
	}
}

// TestListenPassesOverOwnChanges: the feed does not report what the
// listening store value committed itself (its callers rang their waiters
// with the committed request), and does report another value's changes.
func TestListenPassesOverOwnChanges(t *testing.T) {
	url := Migrated.SchemaURL(t)
	listener, writer := openTest(t, url), openTest(t, url)
	rec := listen(t, listener, nil)
	acc, key := seed(t, writer, 0)
	ctx := t.Context()
	mk := func(db *DB, args string) *countersign.Request {
		t.Helper()
		r := &countersign.Request{
			AccountID: acc.ID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: args, PreviewHash: "p",
			Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Hour),
		}
		got, _, err := db.CreateRequest(ctx, r, 0, storetest.Base, countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	own := mk(listener, "own")
	if _, err := listener.Transition(ctx, countersign.Transition{ID: own.ID, From: []countersign.Status{countersign.StatusPending},
		To: countersign.StatusDenied, Now: storetest.Base}, countersign.AuditEvent{Event: "denied", Actor: "a", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	// Announced in commit order: once the later change of the other value
	// is heard, the listener's own would have been.
	other := mk(writer, "other")
	rec.waitFor(t, "the other value's change", func() bool { return len(rec.changes[other.ID]) == 1 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if n := len(rec.changes[own.ID]); n != 0 {
		t.Errorf("the listener's own changes were reported %d times, want none", n)
	}
}
