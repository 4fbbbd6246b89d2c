package sqlite

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// recentFixture is a store with one key, and the requests it makes.
type recentFixture struct {
	t   *testing.T
	db  *DB
	key *countersign.AgentKey
	now time.Time
}

func newRecentFixture(t *testing.T, path string) *recentFixture {
	t.Helper()
	db := openTest(t, path)
	seed(t, db, 0)
	key, err := db.AgentKeyByHash(t.Context(), "h")
	if err != nil {
		t.Fatal(err)
	}
	return &recentFixture{t: t, db: db, key: key, now: time.Now().UTC()}
}

// create makes a pending request of the key in session, expiring in ttl.
func (f *recentFixture) create(session string, ttl time.Duration) *countersign.Request {
	f.t.Helper()
	r := &countersign.Request{
		AccountID: f.key.AccountID, KeyID: f.key.ID, KeyName: f.key.Name, Reference: countersign.NewReference(),
		Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: countersign.NewID("a"), PreviewHash: "p",
		Status: countersign.StatusPending, ExpiresAt: f.now.Add(ttl), Context: countersign.RequestContext{SessionID: session},
	}
	got, created, err := f.db.CreateRequest(f.t.Context(), r, 0, f.now, countersign.AuditEvent{Event: "created", Actor: "key", Detail: "{}"})
	if err != nil || !created {
		f.t.Fatalf("create: %v, %v", created, err)
	}
	return got
}

// move moves request id from its state to to, on db.
func (f *recentFixture) move(db *DB, id string, from, to countersign.Status) *countersign.Request {
	f.t.Helper()
	r, err := db.Transition(f.t.Context(), countersign.Transition{ID: id, From: []countersign.Status{from}, To: to, Now: f.now, DecidedBy: "admin"},
		countersign.AuditEvent{Event: string(to), Actor: "approver:admin", Detail: "{}"})
	if err != nil {
		f.t.Fatalf("%s → %s: %v", from, to, err)
	}
	return r
}

// status reads request id through db.Request and checks that it is what
// the file holds.
func (f *recentFixture) status(db *DB, id string) countersign.Status {
	f.t.Helper()
	got, err := db.Request(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	file, err := getRequest(f.t.Context(), db.read, id)
	if err != nil {
		f.t.Fatal(err)
	}
	if !reflect.DeepEqual(got, file) {
		f.t.Errorf("Request(%s) answered\n  %#v\nthe file holds\n  %#v", id, got, file)
	}
	return got.Status
}

// A request this process has just created or moved is read back from
// memory, exactly as the file holds it.
func TestRecentRequestServed(t *testing.T) {
	f := newRecentFixture(t, filepath.Join(t.TempDir(), "countersign.db"))
	r := f.create("s", time.Hour)
	if f.db.recentRequest(r.ID) == nil {
		t.Error("a request just created is read from the file")
	}
	f.status(f.db, r.ID)
	f.move(f.db, r.ID, countersign.StatusPending, countersign.StatusApproved)
	if row := f.db.recentRequest(r.ID); row == nil || row.r.Status != countersign.StatusApproved {
		t.Error("a request just approved is not served from memory as approved")
	}
	if s := f.status(f.db, r.ID); s != countersign.StatusApproved {
		t.Errorf("status %s, want approved", s)
	}
}

// A change another process commits to the file (here: a store of its own
// on the same file) is read at once: what this process kept of the
// request is no longer served.
func TestRecentRequestAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "countersign.db")
	f := newRecentFixture(t, path)
	other := openTest(t, path)
	r := f.create("s", time.Hour)
	f.move(other, r.ID, countersign.StatusPending, countersign.StatusApproved)
	if s := f.status(f.db, r.ID); s != countersign.StatusApproved {
		t.Errorf("after another process approved it, the request reads %s", s)
	}
	// And the other way round, with a change of this process between.
	r2 := f.create("s", time.Hour)
	f.move(f.db, r2.ID, countersign.StatusPending, countersign.StatusApproved)
	f.move(other, r2.ID, countersign.StatusApproved, countersign.StatusConsumed)
	f.create("s", time.Hour)
	if s := f.status(f.db, r2.ID); s != countersign.StatusConsumed {
		t.Errorf("after another process consumed it, the request reads %s", s)
	}

	// A transition of a request this process wrote, last changed by
	// another, returns the row as the file holds it.
	r3 := f.create("s", time.Hour)
	f.move(other, r3.ID, countersign.StatusPending, countersign.StatusApproved)
	consumed := f.move(f.db, r3.ID, countersign.StatusApproved, countersign.StatusConsumed)
	file, err := getRequest(t.Context(), f.db.read, r3.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(consumed, file) || consumed.DecidedBy != "admin" {
		t.Errorf("the consume returned\n  %#v\nthe file holds\n  %#v", consumed, file)
	}
}

// A change of this process that changes requests without keeping them (a
// stop that ends the session's approvals, an expiry) is read at once.
func TestRecentRequestOtherChanges(t *testing.T) {
	f := newRecentFixture(t, filepath.Join(t.TempDir(), "countersign.db"))
	approved := f.create("s", time.Hour)
	f.move(f.db, approved.ID, countersign.StatusPending, countersign.StatusApproved)
	stop := f.create("s", time.Hour)
	f.move(f.db, stop.ID, countersign.StatusPending, countersign.StatusStopped)
	if s := f.status(f.db, approved.ID); s != countersign.StatusStopped {
		t.Errorf("an approval of a stopped session reads %s", s)
	}

	short := f.create("t", time.Millisecond)
	if _, err := f.db.ExpireRequests(t.Context(), "", f.now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if s := f.status(f.db, short.ID); s != countersign.StatusExpired {
		t.Errorf("an expired request reads %s", s)
	}
}

// What is kept in memory stays within its bound, however large the
// requests written.
func TestRecentRequestBounded(t *testing.T) {
	f := newRecentFixture(t, filepath.Join(t.TempDir(), "countersign.db"))
	big := `{"a":"` + strings.Repeat("x", 256<<10) + `"}`
	for range 2 * recentBytes / len(big) {
		r := &countersign.Request{
			AccountID: f.key.AccountID, KeyID: f.key.ID, KeyName: f.key.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindGeneric, Action: "deploy", Arguments: json.RawMessage(big), ArgsHash: countersign.NewID("a"),
			PreviewHash: "p", Status: countersign.StatusPending, ExpiresAt: f.now.Add(time.Hour),
		}
		if _, _, err := f.db.CreateRequest(t.Context(), r, 0, f.now, countersign.AuditEvent{Event: "created", Actor: "key", Detail: "{}"}); err != nil {
			t.Fatal(err)
		}
		c := &f.db.recent
		c.mu.Lock()
		n, size := 0, 0
		for _, e := range c.m {
			n, size = n+1, size+len(e.row.args)
		}
		c.mu.Unlock()
		if n == 0 || size > recentBytes {
			t.Fatalf("%d requests kept, %d bytes of arguments", n, size)
		}
	}
}
