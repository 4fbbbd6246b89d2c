package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

func testRequestRoundTrip(t *testing.T, open Opener) {
	f := newFixture(t, open)
	ctx := t.Context()

	// Every field set, with nanoseconds, as an auto-approved request is
	// stored.
	full := newRequest(f.key, "Bash", `{"command":"rm -rf /tmp/x","n":1.5}`, "rm -rf /tmp/x")
	full.Kind, full.Tier, full.Protected = countersign.KindMCP, countersign.TierExternal, true
	full.RiskReasons = []string{"recursive", "outside the project"}
	full.Status = countersign.StatusApproved
	full.CreatedAt = Base.Add(1)
	full.ExpiresAt = Base.Add(5*time.Minute + 2)
	full.DecidedAt = Base.Add(3)
	full.DecidedBy = countersign.DecidedByAutoApprove
	full.Reason = "fine: \"quoted\" ünïcode"
	full.AutoApproveUntil = Base.Add(30*time.Minute + 4)
	full.ConsumedAt = Base.Add(5)
	full.Seed = json.RawMessage(`{"token_hash":"ab","payload":{"x":[1,2]}}`)
	full.ArgumentsText = "{\n  \"command\": \"rm -rf /tmp/x\",\n  \"n\": 1.5\n}"
	full.Scope = &countersign.Scope{StatedScope: countersign.StatedScope{Commands: []string{"git push", "rm"}, Paths: []string{"/src/ünï"}, Files: 7, Bytes: 1 << 40,
		FilesCapped: true}, Classes: []string{"recursive"}}
	// The window that let it through, open as it is stored.
	opener := create(t, f.s, newRequest(f.key, "Bash", `{"opener":1}`, "opener"), Base)
	if _, err := f.s.Transition(ctx, countersign.Transition{ID: opener.ID, From: fromPending, To: countersign.StatusApproved, Now: Base, DecidedBy: "approver:alice",
		Window: &countersign.AutoApproveWindow{SessionID: full.Context.SessionID, Kind: countersign.KindMCP, Action: "Bash", Until: full.AutoApproveUntil}},
		countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"}); err != nil {
		t.Fatalf("open the window: %v", err)
	}
	// A pending request leaves the optional fields empty.
	bare := newRequest(f.key2, "Read", `{}`, "read a file")
	bare.RiskReasons = nil
	bare.Context = countersign.RequestContext{}

	for _, want := range []*countersign.Request{full, bare} {
		in := *want
		got, created, err := f.s.CreateRequest(ctx, &in, 10, Base, createdEvent(want))
		if err != nil || !created {
			t.Fatalf("CreateRequest(%s): created %v, err %v", want.Action, created, err)
		}
		same(t, "CreateRequest("+want.Action+")", got, want)
		got, err = f.s.Request(ctx, want.ID)
		if err != nil {
			t.Fatalf("Request(%s): %v", want.ID, err)
		}
		same(t, "Request("+want.Action+")", got, want)
	}
	_, err := f.s.Request(ctx, "req_missing")
	wantCode(t, "Request(missing)", err, countersign.ENOTFOUND)
}

func testDedupe(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	const args, preview = `{"command":"ls"}`, "ls"
	first := create(t, s, newRequest(f.key, "Bash", args, preview), Base)
	seq, _, _ := s.AuditHead(ctx)

	// The same binding again, with a new id and reference, is the same
	// request and writes nothing.
	got, created, err := s.CreateRequest(ctx, newRequest(f.key, "Bash", args, preview), 10, Base.Add(time.Minute), createdEvent(first))
	if err != nil || created || got == nil || got.ID != first.ID {
		t.Fatalf("CreateRequest of the same binding: got %v, created %v, err %v; want %s, false", got, created, err, first.ID)
	}
	if seq2, _, _ := s.AuditHead(ctx); seq2 != seq {
		t.Errorf("a deduplicated request wrote the audit log: head %d, want %d", seq2, seq)
	}

	kind := newRequest(f.key, "Bash", args, preview)
	kind.Kind = countersign.KindMCP
	differ := map[string]*countersign.Request{
		"preview": newRequest(f.key, "Bash", args, "ls -la"),
		"args":    newRequest(f.key, "Bash", `{"command":"ls -la"}`, preview),
		"action":  newRequest(f.key, "Shell", args, preview),
		"key":     newRequest(f.key2, "Bash", args, preview),
		"kind":    kind,
	}
	for what, r := range differ {
		got := create(t, s, r, Base)
		if got.ID == first.ID {
			t.Errorf("a request with another %s was deduplicated", what)
		}
	}

	// Only a pending request deduplicates: an approval covers the request
	// the human saw, in its session, and is never handed to a second ask
	// (an auto-approved one least of all); a denied one neither.
	approve(t, s, first.ID, Base.Add(time.Minute))
	got, created, err = s.CreateRequest(ctx, newRequest(f.key, "Bash", args, preview), 10, Base.Add(2*time.Minute), createdEvent(first))
	if err != nil || !created || got.ID == first.ID || got.Status != countersign.StatusPending {
		t.Errorf("CreateRequest after approval: got %v, created %v, err %v; want a new pending request", got, created, err)
	}
	deny(t, s, differ["preview"].ID, Base.Add(time.Minute))
	if got := create(t, s, newRequest(f.key, "Bash", args, "ls -la"), Base.Add(2*time.Minute)); got.ID == differ["preview"].ID {
		t.Errorf("a denied request was deduplicated")
	}

	// At its expiry a request no longer deduplicates, even before it is
	// marked expired.
	short := newRequest(f.key, "Write", args, preview)
	short.ExpiresAt = Base.Add(time.Minute)
	create(t, s, short, Base)
	if got := create(t, s, newRequest(f.key, "Write", args, preview), Base.Add(time.Minute)); got.ID == short.ID {
		t.Errorf("an expired request was deduplicated")
	}
}

// testTwin: a pending request stands in for a new one only when it
// matches everything the human sees and every fact the rules read: risk
// reasons, context, TTL, tier and protection too. Whoever can read a key
// could otherwise make the exact binding a hook or the gateway is about
// to ask for, with reassuring reasons, another host, a long life, a lower
// tier or no protected path (and so no passkey to approve it), and have
// the client wait on that one.
func testTwin(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	const args, preview = `{"command":"rm -rf /srv"}`, "rm -rf /srv"
	ask := func(at time.Time, ttl time.Duration) *countersign.Request {
		r := newRequest(f.key, "Bash", args, preview)
		r.CreatedAt, r.ExpiresAt = at, at.Add(ttl)
		return r
	}
	mcp := func(tier countersign.Tier) func(r *countersign.Request) {
		return func(r *countersign.Request) { r.Kind, r.Tier = countersign.KindMCP, tier }
	}
	protected := func(r *countersign.Request) { r.Protected = true }
	// Each case changes the planted request, and some the real ask too.
	planted := map[string][2]func(r *countersign.Request){
		"risk reasons":  {func(r *countersign.Request) { r.RiskReasons = []string{"routine cleanup"} }},
		"no reasons":    {func(r *countersign.Request) { r.RiskReasons = nil }},
		"host":          {func(r *countersign.Request) { r.Context.Host = "build-server" }},
		"session":       {func(r *countersign.Request) { r.Context.SessionID = "sess-other" }},
		"user":          {func(r *countersign.Request) { r.Context.User = "root" }},
		"cwd":           {func(r *countersign.Request) { r.Context.Cwd = "/tmp" }},
		"longer ttl":    {func(r *countersign.Request) { r.ExpiresAt = r.CreatedAt.Add(time.Hour) }},
		"ttl 2s more":   {func(r *countersign.Request) { r.ExpiresAt = r.ExpiresAt.Add(2 * time.Second) }},
		"shorter ttl":   {func(r *countersign.Request) { r.ExpiresAt = r.CreatedAt.Add(time.Minute) }},
		"lower tier":    {mcp(countersign.TierRead), mcp(countersign.TierCommit)},
		"no tier":       {mcp(""), mcp(countersign.TierExternal)},
		"higher tier":   {mcp(countersign.TierExternal), mcp(countersign.TierCommit)},
		"not protected": {func(*countersign.Request) {}, protected},
		"protected":     {protected},
	}
	for what, change := range planted {
		t.Run(what, func(t *testing.T) {
			f := newFixture(t, open)
			s := f.s
			p := newRequest(f.key, "Bash", args, preview)
			p.CreatedAt, p.ExpiresAt = Base, Base.Add(10*time.Minute)
			change[0](p)
			create(t, s, p, Base)
			// The real ask, a few seconds later, for ten minutes.
			r := newRequest(f.key, "Bash", args, preview)
			r.CreatedAt, r.ExpiresAt = Base.Add(5*time.Second), Base.Add(5*time.Second+10*time.Minute)
			if change[1] != nil {
				change[1](r)
			}
			got, created, err := s.CreateRequest(t.Context(), r, 10, r.CreatedAt, createdEvent(r))
			if err != nil || !created || got.ID != r.ID {
				t.Fatalf("after a pending request with another %s: got %v, created %v, err %v; want the new request %s", what, got, created, err, r.ID)
			}
			same(t, "the new request", got.RiskReasons, r.RiskReasons)
			same(t, "the new request", got.Context, r.Context)
			if got.Tier != r.Tier || got.Protected != r.Protected {
				t.Errorf("the new request has tier %q, protected %v; want %q, %v", got.Tier, got.Protected, r.Tier, r.Protected)
			}
			if !got.ExpiresAt.Equal(r.ExpiresAt) {
				t.Errorf("the new request expires at %v, want %v", got.ExpiresAt, r.ExpiresAt)
			}
		})
	}

	// An honest retry asks for the same TTL, later: it is the same request.
	// A TTL within the slack (a client rounding its wait to seconds) still
	// is.
	first := create(t, s, ask(Base, 10*time.Minute), Base)
	for _, retry := range []*countersign.Request{
		ask(Base.Add(3*time.Minute), 10*time.Minute),
		ask(Base.Add(4*time.Minute), 10*time.Minute+countersign.TwinTTLSlack),
		ask(Base.Add(4*time.Minute), 10*time.Minute-countersign.TwinTTLSlack),
	} {
		got, created, err := s.CreateRequest(ctx, retry, 10, retry.CreatedAt, createdEvent(retry))
		if err != nil || created || got.ID != first.ID {
			t.Errorf("retry with TTL %v: got %v, created %v, err %v; want %s, false", retry.ExpiresAt.Sub(retry.CreatedAt), got, created, err, first.ID)
		}
	}
	// A request whose CreatedAt is not set yet takes its TTL from now.
	unset := ask(Base, 10*time.Minute)
	unset.CreatedAt = time.Time{}
	unset.ExpiresAt = Base.Add(5*time.Minute + 10*time.Minute)
	if got, created, err := s.CreateRequest(ctx, unset, 10, Base.Add(5*time.Minute), createdEvent(unset)); err != nil || created || got.ID != first.ID {
		t.Errorf("retry without a creation time: got %v, created %v, err %v; want %s, false", got, created, err, first.ID)
	}
}

func approve(t *testing.T, s countersign.Store, id string, now time.Time) *countersign.Request {
	t.Helper()
	got, err := s.Transition(t.Context(), countersign.Transition{
		ID: id, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusApproved,
		Now: now, DecidedBy: "approver:alice",
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
	if err != nil {
		t.Fatalf("approve %s: %v", id, err)
	}
	return got
}

func deny(t *testing.T, s countersign.Store, id string, now time.Time) *countersign.Request {
	t.Helper()
	got, err := s.Transition(t.Context(), countersign.Transition{
		ID: id, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusDenied,
		Now: now, DecidedBy: "approver:alice", Reason: "no",
	}, countersign.AuditEvent{Event: "denied", Actor: "approver:alice", Detail: `{"reason":"no"}`})
	if err != nil {
		t.Fatalf("deny %s: %v", id, err)
	}
	return got
}

func testPendingLimit(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	other := mustAccount(t, s, "other")
	otherKey := mustKey(t, s, other, "laptop")
	const limit = 3

	var first *countersign.Request
	for i, ttl := range []time.Duration{5 * time.Minute, 3 * time.Minute, 7 * time.Minute} {
		r := newRequest(f.key, "Bash", fmt.Sprintf(`{"i":%d}`, i), fmt.Sprint(i))
		r.ExpiresAt = Base.Add(ttl)
		got, _, err := s.CreateRequest(ctx, r, limit, Base, createdEvent(r))
		if err != nil {
			t.Fatalf("CreateRequest %d below the limit: %v", i, err)
		}
		if first == nil {
			first = got
		}
	}

	over := newRequest(f.key2, "Bash", `{"i":9}`, "9")
	_, _, err := s.CreateRequest(ctx, over, limit, Base.Add(time.Minute), createdEvent(over))
	var e *countersign.Error
	if !errors.As(err, &e) || e.Code != countersign.ELIMIT {
		t.Fatalf("CreateRequest at the limit: %v, want ELIMIT", err)
	}
	if e.RetryAfter != 2*time.Minute {
		t.Errorf("RetryAfter = %v, want 2m0s (the soonest expiry)", e.RetryAfter)
	}
	wantMessage(t, "ELIMIT", err, "already has 3 requests waiting")

	// Asking again for what already waits (with the same TTL) is not
	// limited.
	again := newRequest(f.key, "Bash", `{"i":0}`, "0")
	again.ExpiresAt = Base.Add(5 * time.Minute)
	got, created, err := s.CreateRequest(ctx, again, limit, Base.Add(time.Minute), createdEvent(again))
	if err != nil || created || got.ID != first.ID {
		t.Errorf("CreateRequest of a waiting binding at the limit: created %v, err %v; want the existing one", created, err)
	}
	// A request that is not pending (auto-approved) is not limited.
	auto := newRequest(f.key, "Bash", `{"i":8}`, "8")
	auto.Status = countersign.StatusApproved
	if _, _, err := s.CreateRequest(ctx, auto, limit, Base.Add(time.Minute), createdEvent(auto)); err != nil {
		t.Errorf("CreateRequest of an approved request at the limit: %v", err)
	}
	// No limit: maxPending 0.
	if _, _, err := s.CreateRequest(ctx, newRequest(f.key, "Bash", `{"i":7}`, "7"), 0, Base.Add(time.Minute), createdEvent(over)); err != nil {
		t.Errorf("CreateRequest with maxPending 0: %v", err)
	}
	// Another account has its own limit.
	if _, _, err := s.CreateRequest(ctx, newRequest(otherKey, "Bash", `{"i":9}`, "9"), 1, Base.Add(time.Minute), createdEvent(over)); err != nil {
		t.Errorf("CreateRequest of another account: %v", err)
	}
	// A pending request past its expiry does not count, marked or not.
	if _, _, err := s.CreateRequest(ctx, over, 4, Base.Add(3*time.Minute), createdEvent(over)); err != nil {
		t.Errorf("CreateRequest once one waiting request expired: %v", err)
	}
}

func testReferenceConflict(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	other := mustAccount(t, s, "other")
	otherKey := mustKey(t, s, other, "laptop")

	first := create(t, s, newRequest(f.key, "Bash", `{"a":1}`, "a"), Base)
	clash := newRequest(f.key2, "Bash", `{"b":2}`, "b")
	clash.Reference = first.Reference
	_, _, err := s.CreateRequest(ctx, clash, 10, Base, createdEvent(clash))
	wantCode(t, "CreateRequest with a live reference", err, countersign.ECONFLICT)
	if _, err := s.Request(ctx, clash.ID); countersign.ErrorCode(err) != countersign.ENOTFOUND {
		t.Errorf("the refused request was stored: %v", err)
	}

	elsewhere := newRequest(otherKey, "Bash", `{"b":2}`, "b")
	elsewhere.Reference = first.Reference
	create(t, s, elsewhere, Base)

	// A finished request gives its reference back.
	deny(t, s, first.ID, Base.Add(time.Second))
	create(t, s, clash, Base.Add(2*time.Second))
}

func testRequests(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	other := mustAccount(t, s, "other")
	create(t, s, newRequest(mustKey(t, s, other, "x"), "Bash", `{}`, "other"), Base)

	var made []*countersign.Request // oldest first
	for i := range 55 {
		r := newRequest(f.key, "Bash", fmt.Sprintf(`{"i":%d}`, i), fmt.Sprint(i))
		r.CreatedAt = Base.Add(time.Duration(i) * time.Second)
		if i%2 == 1 {
			r.Context.SessionID = "sess-2"
		}
		made = append(made, create(t, s, r, r.CreatedAt))
	}
	deny(t, s, made[3].ID, Base.Add(time.Minute))

	list := func(f countersign.RequestFilter) []*countersign.Request {
		t.Helper()
		got, err := s.Requests(ctx, f)
		if err != nil {
			t.Fatalf("Requests(%+v): %v", f, err)
		}
		return got
	}
	got := list(countersign.RequestFilter{AccountID: f.account.ID})
	if len(got) != 50 {
		t.Fatalf("Requests with no limit: %d, want the default 50", len(got))
	}
	for i, r := range got {
		if want := made[54-i].ID; r.ID != want {
			t.Fatalf("Requests[%d] = %s, want %s (newest first)", i, r.ID, want)
		}
	}
	if got := list(countersign.RequestFilter{AccountID: f.account.ID, Limit: 2}); len(got) != 2 || got[0].ID != made[54].ID {
		t.Errorf("Requests with limit 2: %d rows", len(got))
	}
	if got := list(countersign.RequestFilter{AccountID: f.account.ID, Status: countersign.StatusDenied}); len(got) != 1 || got[0].ID != made[3].ID {
		t.Errorf("Requests(denied): %d rows, want %s alone", len(got), made[3].ID)
	}
	if got := list(countersign.RequestFilter{AccountID: f.account.ID, Reference: made[7].Reference}); len(got) != 1 || got[0].ID != made[7].ID {
		t.Errorf("Requests(reference): %d rows, want %s alone", len(got), made[7].ID)
	}
	got = list(countersign.RequestFilter{AccountID: f.account.ID, SessionID: "sess-2", Limit: 100})
	if len(got) != 27 {
		t.Errorf("Requests(session): %d rows, want 27", len(got))
	}
	for _, r := range got {
		if r.Context.SessionID != "sess-2" {
			t.Errorf("Requests(session) lists %s of session %q", r.ID, r.Context.SessionID)
		}
	}
	if got := list(countersign.RequestFilter{AccountID: other.ID}); len(got) != 1 || got[0].AccountID != other.ID {
		t.Errorf("Requests of the other account: %d rows", len(got))
	}
	_, err := s.Requests(ctx, countersign.RequestFilter{})
	wantCode(t, "Requests without an account", err, countersign.EINVALID)
}
