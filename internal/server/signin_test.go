package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
)

// siClock puts the server on a clock the test moves.
func siClock(t *testing.T) (*testutil.Clock, func(*server.Config)) {
	clock := testutil.NewClock(time.Now().UTC().Truncate(time.Second))
	return clock, func(c *server.Config) { c.Clock = clock }
}

// siSlots gives the server its own argon2id slots and bounds the wait for
// one.
func siSlots(slots *identity.HashSlots, wait time.Duration) func(*server.Config) {
	return func(c *server.Config) { c.PasswordSlots, c.SignInWait = slots, wait }
}

func siForm(username, password string) url.Values {
	return url.Values{"username": {username}, "password": {password}}
}

// deviceCookie returns the device cookie an answer set, or fails.
func (e *ibEnv) deviceCookie(r response) ibMod {
	e.t.Helper()
	for _, c := range r.cookie {
		if c.Name == "countersign_device" && c.Value != "" {
			return e.cookie(c.Name, c.Value)
		}
	}
	e.t.Fatalf("no device cookie in %q", r.header.Values("Set-Cookie"))
	return nil
}

// wantLimited checks a 429 page: Retry-After in whole seconds as wanted,
// the reason, and no session.
func (e *ibEnv) wantLimited(r response, what string, retryAfter int, reason string) {
	e.t.Helper()
	r.want(e.t, what, http.StatusTooManyRequests)
	if got := r.header.Get("Retry-After"); got != strconv.Itoa(retryAfter) {
		e.t.Errorf("%s: Retry-After %q, want %d", what, got, retryAfter)
	}
	if !strings.Contains(r.body, reason) {
		e.t.Errorf("%s: the page does not say %q:\n%s", what, reason, r.body)
	}
	if e.sessionCookie(r) != nil {
		e.t.Errorf("%s: a refused attempt set a session cookie", what)
	}
}

// One address gets at most 5 attempts in any 60 s and 20 in any hour,
// exactly: no burst on top, no refill before an attempt leaves the window.
func TestSigninLimitExact(t *testing.T) {
	t.Parallel()
	clock, opt := siClock(t)
	e := ibSetup(t, opt)
	const from = "203.0.113.7"
	// Three usernames, so that no username reaches its own limit.
	users := []string{"alice", "bob", "carol"}
	n := 0
	attempt := func() response {
		n++
		return e.post("/signin", siForm(users[n%3], "not the password"), ibFrom(from))
	}
	for i := range 5 {
		attempt().want(t, fmt.Sprintf("attempt %d at %ds", i+1, i), http.StatusUnauthorized)
		clock.Advance(time.Second)
	}
	// 5 s after the first: full, until the first is 60 s old.
	e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(from)), "the 6th, right password", 55, "Too many sign-in attempts from your address")
	clock.Advance(7 * time.Second) // 12 s: a bucket refilled at 5 a minute would have one
	e.wantLimited(attempt(), "at 12s", 48, "from your address")
	clock.Advance(48*time.Second - time.Millisecond)
	e.wantLimited(attempt(), "just before 60s", 1, "from your address")
	clock.Advance(time.Millisecond) // 60 s: the first has left the window
	attempt().want(t, "at 60s", http.StatusUnauthorized)
	e.wantLimited(attempt(), "the second at 60s", 1, "from your address")
	e.post("/signin", siForm("alice", ibPassword), ibFrom("203.0.113.8")).wantRedirect(t, "another address", "/approvals")

	// 6 attempts so far, the last at 60 s; 12 s apart, 14 more fit in the
	// minute limit and reach 20 at 228 s; the 21st waits for the first
	// to be an hour old.
	for i := range 14 {
		clock.Advance(12 * time.Second)
		attempt().want(t, fmt.Sprintf("attempt %d", 7+i), http.StatusUnauthorized)
	}
	clock.Advance(12 * time.Second) // 240 s
	e.wantLimited(attempt(), "the 21st in an hour", 3360, "Try again in 56 minutes")
	clock.Advance(3360 * time.Second)
	attempt().want(t, "an hour after the first", http.StatusUnauthorized)
	e.wantLimited(attempt(), "the next one", 1, "from your address")
}

// Failed attempts for one username from all addresses together: at most 10
// in any 15 minutes and 50 a day. A right password does not count. The
// approver's known browser (its device cookie) signs in through the flood,
// while another approver's device cookie does not help.
func TestSigninLimitPerUsername(t *testing.T) {
	t.Parallel()
	clock, opt := siClock(t)
	e := ibSetup(t, opt)
	known := e.deviceCookie(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr())))
	bobs := e.deviceCookie(e.post("/signin", siForm("bob", ibPassword), ibFrom(e.nextAddr())))
	fail := func(what string) {
		t.Helper()
		e.post("/signin", siForm("alice", "not the password"), ibFrom(e.nextAddr())).want(t, what, http.StatusUnauthorized)
	}
	for i := range 10 {
		fail(fmt.Sprintf("failure %d", i+1))
	}
	const reason = "Too many failed sign-ins for this username"
	e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr())), "a new browser", 900, reason)
	e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr()), bobs), "with bob's device cookie", 900, reason)
	e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr()), e.cookie("countersign_device", "forged.cookie")), "with a forged device cookie", 900, reason)
	e.post("/signin", siForm("bob", ibPassword), ibFrom(e.nextAddr())).wantRedirect(t, "bob", "/approvals")

	// The known browser, even from an address that is itself limited.
	const busy = "203.0.113.50"
	for range 5 {
		e.post("/signin", siForm("bob", "not the password"), ibFrom(busy)).want(t, "bob from busy", http.StatusUnauthorized)
	}
	e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(busy)), "from the busy address", 60, "from your address")
	r := e.post("/signin", siForm("alice", ibPassword), ibFrom(busy), known)
	r.wantRedirect(t, "the known browser", "/approvals")
	if e.sessionCookie(r) == nil {
		t.Fatal("the known browser got no session")
	}

	// 15 minutes later, 10 more; 4 rounds make 50 failures within the day.
	for round := range 4 {
		clock.Advance(15 * time.Minute)
		for i := range 10 {
			fail(fmt.Sprintf("round %d failure %d", round+2, i+1))
		}
	}
	clock.Advance(15 * time.Minute) // 75 min after the first failures
	e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr())), "the 51st in a day", 24*3600-75*60, reason)
	e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr()), known).wantRedirect(t, "the known browser after 50", "/approvals")
}

// A known browser that fails too often is unknown again: a stolen device
// cookie gives a guesser 5 guesses a minute, and none past the username's
// limit.
func TestSigninKnownDeviceLimit(t *testing.T) {
	t.Parallel()
	_, opt := siClock(t)
	e := ibSetup(t, opt)
	known := e.deviceCookie(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr())))
	for i := range 10 {
		e.post("/signin", siForm("alice", "not the password"), ibFrom(e.nextAddr())).want(t, fmt.Sprintf("failure %d", i+1), http.StatusUnauthorized)
	}
	for i := range 5 {
		e.post("/signin", siForm("alice", "not the password"), ibFrom(e.nextAddr()), known).want(t, fmt.Sprintf("known failure %d", i+1), http.StatusUnauthorized)
	}
	e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr()), known), "the 6th of the known browser", 900, "for this username")
}

// A sign-in that cannot start its password check within the wait is
// answered 429 at once, says so, and does not count as a failure.
func TestSigninBusy(t *testing.T) {
	t.Parallel()
	slots := identity.NewHashSlots(2)
	e := ibSetup(t, siSlots(slots, time.Millisecond))
	for range 2 {
		if err := slots.Acquire(t.Context(), false, 0); err != nil {
			t.Fatal(err)
		}
	}
	// 11 attempts: were they failures, the 11th right one below would be
	// refused by the username's limit.
	for i := range 11 {
		e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr())), fmt.Sprintf("busy %d", i+1), 2, "The server is busy checking other sign-ins")
	}
	slots.Release()
	slots.Release()
	e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr())).wantRedirect(t, "once the slots are free", "/approvals")
}

// A known browser's password check goes ahead of unknown ones that queued
// earlier.
func TestSigninKnownDeviceFirst(t *testing.T) {
	t.Parallel()
	slots := identity.NewHashSlots(1)
	e := ibSetup(t, siSlots(slots, time.Minute))
	known := e.deviceCookie(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr())))
	if err := slots.Acquire(t.Context(), false, 0); err != nil {
		t.Fatal(err)
	}
	send := func(form url.Values, mods ...ibMod) <-chan int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.URL+"/signin", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = e.Public.Host
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", e.origin())
		for _, m := range mods {
			m(req)
		}
		c := make(chan int, 1)
		go func() {
			resp, err := e.client.Do(req)
			if err != nil {
				c <- 0
				return
			}
			resp.Body.Close()
			c <- resp.StatusCode
		}()
		return c
	}
	waiting := func(known, unknown int) {
		t.Helper()
		var k, u int
		if !testutil.Wait(func() bool {
			k, u = slots.Waiting()
			return k == known && u == unknown
		}, testutil.EventuallyWithin) {
			t.Fatalf("%d known and %d unknown wait, want %d and %d", k, u, known, unknown)
		}
	}
	var unknown []<-chan int
	for i := range 3 {
		unknown = append(unknown, send(siForm("bob", "not the password"), ibFrom(e.nextAddr())))
		waiting(0, i+1)
	}
	alice := send(siForm("alice", ibPassword), ibFrom(e.nextAddr()), known)
	waiting(1, 3)
	// Queue for the slot again, as known, behind the known browser: it
	// comes back here once the check that gets it next is done, and the
	// unknown stay queued.
	back := make(chan error, 1)
	go func() { back <- slots.Acquire(t.Context(), true, 0) }()
	waiting(2, 3)
	slots.Release()
	if err := <-back; err != nil {
		t.Fatal(err)
	}
	// Here again: the check that had the slot was the known browser's,
	// and every unknown one still waits.
	if k, u := slots.Waiting(); k != 0 || u != 3 {
		t.Fatalf("with the slot back, %d known and %d unknown wait; want 0 and 3", k, u)
	}
	if got := <-alice; got != http.StatusSeeOther {
		t.Fatalf("the known browser's sign-in: %d, want 303", got)
	}
	slots.Release()
	for i, c := range unknown {
		if got := <-c; got != http.StatusUnauthorized {
			t.Errorf("unknown attempt %d: %d, want 401", i+1, got)
		}
	}
}

// Known browsers of one username go ahead of unknown ones at most 5 times
// a minute together, a right password too: an approver who signs in over
// and over with their own password, or with many device cookies, does not
// take the password checks from everyone else's browsers.
func TestSigninKnownPerUsername(t *testing.T) {
	t.Parallel()
	_, opt := siClock(t)
	e := ibSetup(t, opt)
	var cookies []ibMod
	for range 3 {
		cookies = append(cookies, e.deviceCookie(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr()))))
	}
	// An address that has used up its own limit: only a known browser
	// gets through from it.
	const busy = "203.0.113.60"
	for range 5 {
		e.post("/signin", siForm("bob", "not the password"), ibFrom(busy)).want(t, "bob from busy", http.StatusUnauthorized)
	}
	for i := range 5 {
		e.post("/signin", siForm("alice", ibPassword), ibFrom(busy), cookies[i%3]).wantRedirect(t, fmt.Sprintf("known sign-in %d", i+1), "/approvals")
	}
	e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(busy), cookies[2]), "the 6th known sign-in in a minute", 60, "from your address")
}

// A known browser's attempts that found every password check slot busy
// do not use up its username's known attempts: once the server is free,
// it signs in ahead of the limits again.
func TestSigninKnownBusyNotCounted(t *testing.T) {
	t.Parallel()
	slots := identity.NewHashSlots(2)
	e := ibSetup(t, siSlots(slots, time.Millisecond))
	known := e.deviceCookie(e.post("/signin", siForm("alice", ibPassword), ibFrom(e.nextAddr())))
	for range 2 {
		if err := slots.Acquire(t.Context(), false, 0); err != nil {
			t.Fatal(err)
		}
	}
	const busy = "203.0.113.70"
	for i := range 5 {
		e.wantLimited(e.post("/signin", siForm("alice", ibPassword), ibFrom(busy), known), fmt.Sprintf("busy %d", i+1), 2, "The server is busy")
	}
	slots.Release()
	slots.Release()
	for range 5 {
		e.post("/signin", siForm("bob", "not the password"), ibFrom(busy)).want(t, "bob from busy", http.StatusUnauthorized)
	}
	e.post("/signin", siForm("alice", ibPassword), ibFrom(busy), known).wantRedirect(t, "the known browser once the slots are free", "/approvals")
}
