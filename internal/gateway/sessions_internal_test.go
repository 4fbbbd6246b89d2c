package gateway

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/testutil/wait"
)

// fakeSession records that it was closed.
type fakeSession struct{ closed chan struct{} }

func newFake() *fakeSession { return &fakeSession{closed: make(chan struct{})} }

func (f *fakeSession) Close() error { close(f.closed); return nil }

// wantClosed waits (bounded) for the close that closeAll starts.
func (f *fakeSession) wantClosed(t *testing.T, what string) {
	t.Helper()
	wait.Receive(t, f.closed, "the close of "+what)
}

func (f *fakeSession) isClosed() bool {
	select {
	case <-f.closed:
		return true
	default:
		return false
	}
}

// open admits and registers a session as an initialize does.
func (r *sessionRegistry) open(t *testing.T, id, key string) *fakeSession {
	t.Helper()
	release, no := r.admit(key)
	if no != nil {
		t.Fatalf("%s of %s refused: %+v", id, key, no)
	}
	f := newFake()
	r.opened(id, f, key)
	release()
	return f
}

// wantCounts fails unless the registry's counts are these and nothing is
// pending.
func (r *sessionRegistry) wantCounts(t *testing.T, key string, ofKey, all int) {
	t.Helper()
	k, a := r.count(key)
	r.mu.Lock()
	pending, byID := r.pending, len(r.byID)
	r.mu.Unlock()
	if k != ofKey || a != all || pending != 0 || byID != all {
		t.Fatalf("%s: %d sessions of %d (%d by id, %d pending), want %d of %d", key, k, a, byID, pending, ofKey, all)
	}
}

// TestSessionRegistry: openings are counted while in flight, then as the
// session they registered, or as nothing when initialize failed;
// concurrent openings never pass a limit; the counts come back to zero.
func TestSessionRegistry(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	clock := func() time.Time { return time.Unix(1_900_000_000, now.Load()) }
	r := newSessionRegistry(SessionLimits{PerKey: 2, Max: 3}, clock)

	rel1, no1 := r.admit("k")
	rel2, no2 := r.admit("k")
	if no1 != nil || no2 != nil {
		t.Fatalf("refused: %v %v", no1, no2)
	}
	if _, no := r.admit("k"); no == nil || no.status != http.StatusTooManyRequests {
		t.Fatalf("a third opening while two are in flight: %+v, want 429", no)
	}
	s1 := newFake()
	r.opened("s1", s1, "k")
	r.mu.Lock()
	pending, live := r.pending, r.live
	r.mu.Unlock()
	if pending != 1 || live != 1 {
		t.Fatalf("after one of two openings registered: %d pending, %d live; want 1 and 1", pending, live)
	}
	rel2() // its initialize failed
	rel1()
	r.wantCounts(t, "k", 1, 1)

	r.open(t, "s2", "j")
	r.open(t, "s3", "x")
	if _, no := r.admit("y"); no == nil || no.status != http.StatusServiceUnavailable || no.retry != 3*time.Minute {
		t.Fatalf("a full server: %+v, want 503 in 3 minutes", no)
	}
	// k trades its idle session in; j's is busy and stays.
	end := r.begin("s2", "j")
	if _, no := r.admit("j"); no == nil || no.status != http.StatusServiceUnavailable {
		t.Fatalf("j's only session is busy: %+v, want 503", no)
	}
	end()
	s4 := r.open(t, "s4", "k")
	s1.wantClosed(t, "k's idle session")
	r.wantCounts(t, "k", 1, 3)

	// Another key's request never counts as one of the session's.
	r.used("s4")
	defer r.begin("s4", "j")()
	release, no := r.admit("k")
	if no != nil {
		t.Fatalf("s4 counted busy by j's request: %+v", no)
	}
	release() // its initialize failed
	s4.wantClosed(t, "k's session, busy only by another key's request")

	r.closed("s2")
	r.closed("s3")
	r.closed("nothing")
	r.mu.Lock()
	keys := len(r.keys)
	r.mu.Unlock()
	if _, all := r.count(""); all != 0 || keys != 0 {
		t.Fatalf("%d sessions and %d keys left", all, keys)
	}
}

// TestSessionRegistryUnused: a session that made no call is closed when
// unusedFor has passed, by the next opening or by the timer; one that made
// a call is not.
func TestSessionRegistryUnused(t *testing.T) {
	t.Parallel()
	var now atomic.Int64
	clock := func() time.Time { return time.Unix(1_900_000_000, now.Load()) }
	r := newSessionRegistry(SessionLimits{PerKey: 10, Max: 10}, clock)
	idle := r.open(t, "idle", "k")
	busy := r.open(t, "busy", "k")
	r.used("busy")
	now.Add(int64(unusedSession - time.Second))
	r.open(t, "late", "j")
	r.wantCounts(t, "k", 2, 3)
	now.Add(int64(time.Second))
	r.open(t, "other", "j")
	idle.wantClosed(t, "the unused session")
	r.wantCounts(t, "k", 1, 3)
	now.Add(int64(unusedSession))
	r.sweep() // what the timer runs
	r.wantCounts(t, "k", 1, 1)
	if busy.isClosed() {
		t.Error("the session that made a call was closed")
	}
	r.mu.Lock()
	armed := r.timer != nil
	r.mu.Unlock()
	if armed {
		t.Error("the timer is armed with no unused session")
	}
}

func TestLoadConfigSessions(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "mcp.toml")
	write := func(body string) { os.WriteFile(file, []byte(body), 0o600) }
	write("rate = 30\n")
	if c, err := LoadConfig(file); err != nil || c.Sessions != (SessionLimits{PerKey: DefaultSessionsPerKey, Max: DefaultSessions}) {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	write("[sessions]\nper_key = 8\nmax = 100\n")
	if c, err := LoadConfig(file); err != nil || c.Sessions != (SessionLimits{PerKey: 8, Max: 100}) {
		t.Fatalf("set: %+v %v", c, err)
	}
	for _, body := range []string{"[sessions]\nper_key = 0\n", "[sessions]\nmax = -1\n", "[sessions]\nmax = 2000000\n", "[sessions]\nidle = 3\n"} {
		write(body)
		if _, err := LoadConfig(file); err == nil || !strings.Contains(err.Error(), "sessions") {
			t.Errorf("%q: %v", body, err)
		}
	}
}
