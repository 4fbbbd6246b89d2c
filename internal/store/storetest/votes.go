package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// voteIn is the vote of approver name on r, needing quorum votes.
func voteIn(r *countersign.Request, name string, quorum int, now time.Time) countersign.VoteInput {
	return countersign.VoteInput{
		Vote:      countersign.Vote{RequestID: r.ID, ApproverID: "apr_" + name, Username: name, BindingHash: r.BindingHash()},
		AccountID: r.AccountID, Quorum: quorum, Now: now, ExpiresAt: now.Add(time.Minute),
	}
}

func voteEvents(name string) (countersign.AuditEvent, countersign.AuditEvent) {
	return countersign.AuditEvent{Event: "voted", Actor: "approver:" + name, Detail: "{}"},
		countersign.AuditEvent{Event: "approved", Actor: "approver:" + name, Detail: "{}"}
}

func castVote(t *testing.T, s countersign.Store, v countersign.VoteInput) (*countersign.Request, []countersign.Vote, error) {
	voted, approved := voteEvents(v.Username)
	return s.Vote(t.Context(), v, voted, approved)
}

// testVotes: a vote counts once per approver and only for the request's
// binding and account; the vote that reaches the quorum approves, with its
// voters as DecidedBy; the log has a voted entry per vote and one
// approved.
func testVotes(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	r := create(t, s, newRequest(f.key, "deploy", `{}`, "two"), Base)
	now := Base.Add(time.Second)
	seq, _, _ := s.AuditHead(t.Context())

	got, votes, err := castVote(t, s, voteIn(r, "alice", 2, now))
	if err != nil || got.Status != countersign.StatusPending || len(votes) != 1 || votes[0].Username != "alice" || votes[0].BindingHash != r.BindingHash() {
		t.Fatalf("first vote: %+v %+v %v, want pending with alice's vote", got, votes, err)
	}
	_, _, err = castVote(t, s, voteIn(r, "alice", 2, now))
	wantCode(t, "alice's second vote", err, countersign.ECONFLICT)
	wantMessage(t, "alice's second vote", err, "already approved")
	wrong := voteIn(r, "bob", 2, now)
	wrong.BindingHash = sha("another")
	_, _, err = castVote(t, s, wrong)
	wantCode(t, "vote for another binding", err, countersign.ECONFLICT)
	other := voteIn(r, "bob", 2, now)
	other.AccountID = "acc_other"
	_, _, err = castVote(t, s, other)
	wantCode(t, "vote of another account", err, countersign.ENOTFOUND)
	if list, err := s.Votes(t.Context(), r.ID); err != nil || len(list) != 1 {
		t.Fatalf("Votes after refusals: %+v %v, want alice's alone", list, err)
	}

	got, votes, err = castVote(t, s, voteIn(r, "bob", 2, now))
	if err != nil || got.Status != countersign.StatusApproved || len(votes) != 2 || got.DecidedBy != "alice, bob" {
		t.Fatalf("second vote: %+v %+v %v, want approved by alice, bob", got, votes, err)
	}
	_, _, err = castVote(t, s, voteIn(r, "carol", 2, now))
	wantCode(t, "vote on an approved request", err, countersign.ECONFLICT)

	entries, err := s.AuditLog(t.Context(), seq, 10)
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, e := range entries {
		events = append(events, e.Event+" "+e.Actor)
	}
	same(t, "audit entries", events, []string{"voted approver:alice", "voted approver:bob", "approved approver:bob"})

	// A pruned request goes with its votes.
	if p, ok := s.(countersign.HistoryPruner); ok {
		if _, err := s.Transition(t.Context(), countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusApproved}, To: countersign.StatusConsumed, Now: now},
			countersign.AuditEvent{Event: "consumed", Actor: "test", Detail: "{}"}); err != nil {
			t.Fatal(err)
		}
		if n, err := p.PruneRequests(t.Context(), Base.Add(time.Hour), 10); err != nil || n != 1 {
			t.Fatalf("PruneRequests: %d, %v; want 1", n, err)
		}
		if list, err := s.Votes(t.Context(), r.ID); err != nil || len(list) != 0 {
			t.Fatalf("votes of a pruned request: %+v, %v", list, err)
		}
	}
}

// testVoteCounted: with Members, only the votes of the account's members
// whose role decides (and whom Routed names) count toward the quorum, as
// the store reads them when the vote is cast; the others stay recorded.
// A member made a viewer, or taken out, after their vote no longer counts.
func testVoteCounted(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	other := mustAccount(t, s, "other")
	alice := approverIn(t, s, "alice", f.account)
	bob := approverIn(t, s, "bob", f.account)
	carol := approverIn(t, s, "carol", f.account)
	dave := approverIn(t, s, "dave", other)
	vic := approverIn(t, s, "vic", f.account)
	if err := s.SetRole(t.Context(), vic.ID, f.account.ID, countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	now := Base.Add(time.Second)
	in := func(r *countersign.Request, a *countersign.Approver, routed ...string) countersign.VoteInput {
		v := voteIn(r, a.Username, 2, now)
		v.ApproverID, v.Members, v.Routed = a.ID, true, routed
		return v
	}

	// A viewer and an approver of another account count for nothing.
	r := create(t, s, newRequest(f.key, "deploy", `{}`, "counted"), Base)
	for _, a := range []*countersign.Approver{vic, dave} {
		if got, votes, err := castVote(t, s, in(r, a)); err != nil || got.Status != countersign.StatusPending || len(votes) != 0 {
			t.Fatalf("%s's vote: %+v %+v %v, want recorded, pending, counting nothing", a.Username, got, votes, err)
		}
	}
	if got, votes, err := castVote(t, s, in(r, alice)); err != nil || got.Status != countersign.StatusPending || len(votes) != 1 {
		t.Fatalf("alice's vote: %+v %+v %v, want pending with alice's vote alone", got, votes, err)
	}
	// alice is made a viewer after her vote: it no longer counts.
	if err := s.SetRole(t.Context(), alice.ID, f.account.ID, countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	got, votes, err := castVote(t, s, in(r, bob))
	if err != nil || got.Status != countersign.StatusPending || len(votes) != 1 || votes[0].Username != "bob" {
		t.Fatalf("bob's vote after alice became a viewer: %+v %+v %v, want pending with bob's vote alone", got, votes, err)
	}
	if list, err := s.Votes(t.Context(), r.ID); err != nil || len(list) != 4 {
		t.Fatalf("Votes: %+v %v, want all four recorded", list, err)
	}
	got, _, err = castVote(t, s, in(r, carol))
	if err != nil || got.Status != countersign.StatusApproved || got.DecidedBy != "bob, carol" {
		t.Fatalf("carol's vote: %+v %v, want approved by bob, carol", got, err)
	}

	// Routed: only the approvers it names count; one taken out of the
	// account after the vote counts no more.
	r = create(t, s, newRequest(f.key, "deploy", `{"routed":1}`, "routed"), Base)
	if _, votes, err := castVote(t, s, in(r, carol, "bob")); err != nil || len(votes) != 0 {
		t.Fatalf("carol's vote, routed to bob: %+v %v, want counting nothing", votes, err)
	}
	if _, votes, err := castVote(t, s, in(r, bob, "bob", "carol")); err != nil || len(votes) != 2 {
		t.Fatalf("bob's vote, routed to bob and carol: %+v %v, want both counting", votes, err)
	}
	r = create(t, s, newRequest(f.key, "deploy", `{"removed":1}`, "removed"), Base)
	if _, _, err := castVote(t, s, in(r, bob)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveMembership(t.Context(), bob.ID, f.account.ID, now); err != nil {
		t.Fatal(err)
	}
	if got, votes, err := castVote(t, s, in(r, carol)); err != nil || got.Status != countersign.StatusPending || len(votes) != 1 {
		t.Fatalf("carol's vote after bob was taken out: %+v %+v %v, want pending with carol's vote alone", got, votes, err)
	}
}

// testVoteSinceStop: with Members, a vote cast before the human stopped
// the request's agent session counts for nothing, as the store reads the
// last stop when the vote is cast; a vote of another session's request
// is not touched by the stop.
func testVoteSinceStop(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	alice := approverIn(t, s, "alice", f.account)
	bob := approverIn(t, s, "bob", f.account)
	carol := approverIn(t, s, "carol", f.account)
	in := func(r *countersign.Request, a *countersign.Approver, at time.Time) countersign.VoteInput {
		v := voteIn(r, a.Username, 2, at)
		v.ApproverID, v.Members = a.ID, true
		v.ExpiresAt = at.Add(time.Minute)
		return v
	}
	r := create(t, s, newRequest(f.key, "deploy", `{}`, "stop"), Base)
	elsewhere := newRequest(f.key, "deploy", `{"other":1}`, "other session")
	elsewhere.Context.SessionID = "sess-2"
	o := create(t, s, elsewhere, Base)
	for _, q := range []*countersign.Request{r, o} {
		if _, _, err := castVote(t, s, in(q, alice, asked)); err != nil {
			t.Fatal(err)
		}
	}
	stopSession(t, s, f.key)
	got, votes, err := castVote(t, s, in(r, bob, afterStop))
	if err != nil || got.Status != countersign.StatusPending || len(votes) != 1 || votes[0].Username != "bob" {
		t.Fatalf("bob's vote after the stop: %+v %+v %v, want pending with bob's vote alone", got, votes, err)
	}
	if got, _, err = castVote(t, s, in(r, carol, afterStop)); err != nil || got.Status != countersign.StatusApproved || got.DecidedBy != "bob, carol" {
		t.Fatalf("carol's vote: %+v %v, want approved by bob, carol", got, err)
	}
	if got, _, err = castVote(t, s, in(o, bob, afterStop)); err != nil || got.Status != countersign.StatusApproved || got.DecidedBy != "alice, bob" {
		t.Fatalf("bob's vote in another session: %+v %v, want approved by alice, bob", got, err)
	}
}

// testVoteIdempotency: a vote made with an Idempotency-Key records the key
// with the request as the vote left it, whether or not the vote reached
// the quorum, so that a retry whose answer was lost gets that answer, not
// "already approved"; the same key again records nothing.
func testVoteIdempotency(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	is, ok := s.(countersign.IdempotencyStore)
	if !ok {
		t.Skip("the store records no idempotency keys")
	}
	r := create(t, s, newRequest(f.key, "deploy", `{}`, "idem"), Base)
	now := Base.Add(time.Second)
	key := func(name, k string) context.Context {
		return countersign.WithIdempotency(t.Context(), &countersign.Idempotency{Principal: "approver:apr_" + name, Key: k,
			Op: countersign.IdemDecision, Fingerprint: sha(k)})
	}
	voted, approved := voteEvents("alice")
	if _, _, err := s.Vote(key("alice", "k1"), voteIn(r, "alice", 2, now), voted, approved); err != nil {
		t.Fatal(err)
	}
	res, err := is.Idempotent(t.Context(), "approver:apr_alice", "k1", now.Add(-time.Hour))
	if err != nil || res.Request.Status != countersign.StatusPending || res.Request.ID != r.ID {
		t.Fatalf("the first vote's key: %+v %v, want it recorded with the request pending", res, err)
	}
	voted, approved = voteEvents("bob")
	got, _, err := s.Vote(key("bob", "k2"), voteIn(r, "bob", 2, now), voted, approved)
	if err != nil || got.Status != countersign.StatusApproved {
		t.Fatalf("bob's vote: %+v %v", got, err)
	}
	res, err = is.Idempotent(t.Context(), "approver:apr_bob", "k2", now.Add(-time.Hour))
	if err != nil || res.Request.Status != countersign.StatusApproved {
		t.Fatalf("the last vote's key: %+v %v, want it recorded with the request approved", res, err)
	}
}

// testVoteSeparate: with Separate, the approver who made the key may not
// vote on its requests; another may, and so may the maker without it.
func testVoteSeparate(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	secret := countersign.NewSecret(countersign.AgentKeyPrefix)
	k := &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: f.account.ID, Name: "made", Hash: countersign.HashSecret(secret),
		Hint: countersign.SecretHint(secret), CreatedAt: Base, CreatedBy: "apr_alice"}
	if err := s.CreateAgentKey(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	r := create(t, s, newRequest(k, "deploy", `{}`, "separate"), Base)
	v := voteIn(r, "alice", 2, Base.Add(time.Second))
	v.Separate = true
	_, _, err := castVote(t, s, v)
	wantCode(t, "the maker's vote", err, countersign.EFORBIDDEN)
	v = voteIn(r, "bob", 2, Base.Add(time.Second))
	v.Separate = true
	if _, _, err := castVote(t, s, v); err != nil {
		t.Fatalf("another's vote: %v", err)
	}
	if _, _, err := castVote(t, s, voteIn(r, "alice", 2, Base.Add(time.Second))); err != nil {
		t.Fatalf("the maker's vote without separate: %v", err)
	}

	// The approver who allowed a grant owns its key.
	carol := approverIn(t, s, "carol", f.account)
	g, _, _ := newGrant(t, s, f.account, carol, "sep")
	gk := &countersign.AgentKey{ID: g.KeyID, AccountID: f.account.ID, Name: "grant-sep"}
	gr := create(t, s, newRequest(gk, "deploy", `{}`, "grant"), Base)
	v = voteIn(gr, "carol", 2, Base.Add(time.Second))
	v.ApproverID, v.Separate = carol.ID, true
	_, _, err = castVote(t, s, v)
	wantCode(t, "the grant's approver's vote", err, countersign.EFORBIDDEN)
	v = voteIn(gr, "alice", 2, Base.Add(time.Second))
	v.Separate = true
	if _, _, err := castVote(t, s, v); err != nil {
		t.Fatalf("another's vote on the grant's request: %v", err)
	}
}

// testVoteRace: approvers vote at once, each twice (two sessions): exactly
// one vote approves, no approver counts twice, and the log holds one voted
// entry per vote counted and one approved.
func testVoteRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	const voters, quorum = 6, 3
	for run := range 10 {
		r := create(t, s, newRequest(f.key, "deploy", `{}`, fmt.Sprintf("race %d", run)), Base)
		seq, _, _ := s.AuditHead(t.Context())
		var mu sync.Mutex
		approved := 0
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range 2 * voters {
			wg.Go(func() {
				<-start
				got, _, err := castVote(t, s, voteIn(r, fmt.Sprintf("ap%d", i%voters), quorum, Base.Add(time.Second)))
				mu.Lock()
				defer mu.Unlock()
				if err == nil && got.Status == countersign.StatusApproved {
					approved++
				} else if err != nil && countersign.ErrorCode(err) != countersign.ECONFLICT {
					t.Errorf("vote %d: %v, want ECONFLICT", i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if approved != 1 {
			t.Fatalf("run %d: %d votes approved, want exactly 1", run, approved)
		}
		votes, err := s.Votes(t.Context(), r.ID)
		if err != nil || len(votes) != quorum {
			t.Fatalf("run %d: votes %+v %v, want %d", run, votes, err, quorum)
		}
		seen := map[string]bool{}
		for _, v := range votes {
			if seen[v.ApproverID] {
				t.Fatalf("run %d: %s counted twice", run, v.ApproverID)
			}
			seen[v.ApproverID] = true
		}
		counts := auditCounts(t, s, seq)
		if counts["voted"] != quorum || counts["approved"] != 1 {
			t.Fatalf("run %d: audit %v, want %d voted and 1 approved", run, counts, quorum)
		}
	}
}

// testVoteDenyRace: a deny among votes ends the request: either the votes
// reached the quorum first and the deny is refused, or the deny wins and
// no vote after it counts or approves.
func testVoteDenyRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	// In order: a vote, the deny, a vote that would reach the quorum.
	r := create(t, s, newRequest(f.key, "deploy", `{}`, "deny middle"), Base)
	now := Base.Add(time.Second)
	if _, _, err := castVote(t, s, voteIn(r, "alice", 2, now)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(t.Context(), countersign.Transition{ID: r.ID, From: fromPending, To: countersign.StatusDenied, Now: now, DecidedBy: "carol"},
		countersign.AuditEvent{Event: "denied", Actor: "approver:carol", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := castVote(t, s, voteIn(r, "bob", 2, now))
	wantCode(t, "a vote after the deny", err, countersign.ECONFLICT)
	wantMessage(t, "a vote after the deny", err, "denied")

	// At once: votes and a deny.
	const voters, quorum = 6, 3
	for run := range 10 {
		r := create(t, s, newRequest(f.key, "deploy", `{}`, fmt.Sprintf("deny race %d", run)), Base)
		var mu sync.Mutex
		approved, denied := 0, 0
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range voters {
			wg.Go(func() {
				<-start
				got, _, err := castVote(t, s, voteIn(r, fmt.Sprintf("ap%d", i), quorum, now))
				mu.Lock()
				defer mu.Unlock()
				if err == nil && got.Status == countersign.StatusApproved {
					approved++
				} else if err != nil && countersign.ErrorCode(err) != countersign.ECONFLICT {
					t.Errorf("vote %d: %v, want ECONFLICT", i, err)
				}
			})
		}
		wg.Go(func() {
			<-start
			_, err := s.Transition(t.Context(), countersign.Transition{ID: r.ID, From: fromPending, To: countersign.StatusDenied, Now: now, DecidedBy: "carol"},
				countersign.AuditEvent{Event: "denied", Actor: "approver:carol", Detail: "{}"})
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				denied++
			} else if countersign.ErrorCode(err) != countersign.ECONFLICT {
				t.Errorf("deny: %v, want ECONFLICT", err)
			}
		})
		close(start)
		wg.Wait()
		got, err := s.Request(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		votes, _ := s.Votes(t.Context(), r.ID)
		switch {
		case approved+denied != 1:
			t.Fatalf("run %d: %d approvals and %d denials, want exactly one of them", run, approved, denied)
		case denied == 1 && (got.Status != countersign.StatusDenied || len(votes) >= quorum):
			t.Fatalf("run %d: denied, yet status %s with %d votes", run, got.Status, len(votes))
		case approved == 1 && (got.Status != countersign.StatusApproved || len(votes) != quorum):
			t.Fatalf("run %d: approved, yet status %s with %d votes", run, got.Status, len(votes))
		}
	}
}

// auditCounts counts the events of the log after seq.
func auditCounts(t *testing.T, s countersign.Store, seq int64) map[string]int {
	t.Helper()
	entries, err := s.AuditLog(t.Context(), seq, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, e := range entries {
		out[e.Event]++
	}
	return out
}

// testVoteMembersRace: a last vote races a change of role of the approver
// whose earlier vote it needs, and a stop of the session: each run ends
// either approved by both votes (the vote came first) or pending (the
// change came first), never in an error.
func testVoteMembersRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	now := Base.Add(time.Second)
	for run := range 10 {
		alice := approverIn(t, s, fmt.Sprintf("alice%d", run), f.account)
		bob := approverIn(t, s, fmt.Sprintf("bob%d", run), f.account)
		r := create(t, s, newRequest(f.key, "deploy", fmt.Sprintf(`{"run":%d}`, run), fmt.Sprintf("members race %d", run)), Base)
		in := func(a *countersign.Approver) countersign.VoteInput {
			v := voteIn(r, a.Username, 2, now)
			v.ApproverID, v.Members = a.ID, true
			return v
		}
		if _, _, err := castVote(t, s, in(alice)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var got *countersign.Request
		var voteErr, roleErr error
		wg.Go(func() {
			<-start
			got, _, voteErr = castVote(t, s, in(bob))
		})
		wg.Go(func() {
			<-start
			roleErr = s.SetRole(t.Context(), alice.ID, f.account.ID, countersign.RoleViewer)
		})
		close(start)
		wg.Wait()
		if voteErr != nil || roleErr != nil {
			t.Fatalf("run %d: vote %v, role %v", run, voteErr, roleErr)
		}
		if got.Status == countersign.StatusApproved && got.DecidedBy != alice.Username+", "+bob.Username {
			t.Fatalf("run %d: approved by %q", run, got.DecidedBy)
		} else if got.Status != countersign.StatusApproved && got.Status != countersign.StatusPending {
			t.Fatalf("run %d: status %s", run, got.Status)
		}
	}
}
