package storetest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// edited returns r as an approver's edit to args and preview makes it,
// with a risk reason added and the path protected, keeping r's action as
// its original.
func edited(r *countersign.Request, args, preview string) *countersign.Request {
	e := *r
	e.Original = &countersign.Original{Arguments: r.Arguments, ArgsHash: r.ArgsHash, Preview: r.Preview,
		PreviewHash: r.PreviewHash, RiskReasons: r.RiskReasons}
	e.Arguments, e.ArgsHash, e.Preview, e.PreviewHash = json.RawMessage(args), sha(args), preview, sha(preview)
	e.RiskReasons = append(append([]string{}, r.RiskReasons...), "writes to a protected path")
	e.Protected, e.ArgumentsText = true, args
	e.Scope = &countersign.Scope{StatedScope: countersign.StatedScope{Paths: []string{"/etc/x"}}, Classes: []string{"delete"}}
	return &e
}

// testEditApprove: an approval with an edit replaces the request's action
// (arguments, hashes, preview, reasons, protected, scope) and keeps the
// original, in one change; the approval binds the edited action only.
func testEditApprove(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := create(t, s, newRequest(f.key, "Bash", `{"command":"rm -rf /src/a /src/b"}`, "rm -rf /src/a /src/b"), Base)
	e := edited(r, `{"command":"rm -rf /etc/x"}`, "rm -rf /etc/x")
	now := Base.Add(time.Minute)
	got, err := s.Transition(ctx, countersign.Transition{
		ID: r.ID, From: fromPending, To: countersign.StatusApproved, Now: now,
		AccountID: f.account.ID, DecidedBy: "alice", Edited: e,
	}, countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: `{"edited":true}`})
	if err != nil {
		t.Fatalf("approve with an edit: %v", err)
	}
	want := *e
	want.Status, want.DecidedAt, want.DecidedBy = countersign.StatusApproved, now, "alice"
	same(t, "approved edited request", got, &want)
	stored, err := s.Request(ctx, r.ID)
	if err != nil {
		t.Fatalf("Request: %v", err)
	}
	same(t, "stored edited request", stored, &want)
	if stored.BindingHash() == r.BindingHash() {
		t.Errorf("the edited request keeps the original binding")
	}
	list, err := s.Requests(ctx, countersign.RequestFilter{AccountID: f.account.ID})
	if err != nil || len(list) != 1 {
		t.Fatalf("Requests: %v, %v", list, err)
	}
	same(t, "listed edited request", list[0], &want)

	// An agent that does not run edits consumes no edited approval.
	_, err = s.Transition(ctx, countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusApproved},
		To: countersign.StatusConsumed, Now: now, KeyID: f.key.ID, Unedited: true},
		countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"})
	wantCode(t, "consume an edit without running edits", err, countersign.ECONFLICT)
	wantMessage(t, "consume an edit without running edits", err, "edited")
	stored, _ = s.Request(ctx, r.ID)
	same(t, "request after a refused consumption", stored, &want)

	// The approval is of the edited action: by the original's binding,
	// an agent that does not run edits takes nothing (the edited
	// approval is found, and refused); the edited binding is consumed.
	_, err = s.ConsumeApproved(ctx, f.key.ID, r.Kind, r.Action, r.ArgsHash, r.PreviewHash, r.Tier, false, now, countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"})
	wantCode(t, "consume the original's binding without running edits", err, countersign.ECONFLICT)
	wantMessage(t, "consume the original's binding without running edits", err, "edited")
	c, err := s.ConsumeApproved(ctx, f.key.ID, r.Kind, r.Action, e.ArgsHash, e.PreviewHash, r.Tier, false, now, countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"})
	if err != nil || c.ID != r.ID || c.Original == nil || c.Original.ArgsHash != r.ArgsHash {
		t.Fatalf("consume the edited binding: %+v, %v", c, err)
	}

	// An edit of a request whose action is no longer the one edited
	// changes nothing: here, one edited already (a second edit names
	// the first's original).
	r2 := create(t, s, newRequest(f.key, "Bash", `{"command":"ls"}`, "ls"), Base)
	stale := edited(r2, `{"command":"ls -l"}`, "ls -l")
	stale.Original.ArgsHash = sha("something else")
	_, err = s.Transition(ctx, countersign.Transition{ID: r2.ID, From: fromPending, To: countersign.StatusApproved, Now: now, Edited: stale},
		countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"})
	wantCode(t, "edit of another action", err, countersign.ECONFLICT)
	wantMessage(t, "edit of another action", err, "changed")
	if got, _ := s.Request(ctx, r2.ID); got == nil || got.Status != countersign.StatusPending || got.Original != nil || got.ArgsHash != r2.ArgsHash {
		t.Errorf("after a refused edit: %+v", got)
	}
	// Only an approval from pending carries an edit.
	_, err = s.Transition(ctx, countersign.Transition{ID: r2.ID, From: fromPending, To: countersign.StatusDenied, Now: now, Edited: edited(r2, `{}`, "x")},
		countersign.AuditEvent{Event: "denied", Actor: "approver:alice", Detail: "{}"})
	wantCode(t, "deny with an edit", err, countersign.EINVALID)

	// An approval no one edited is consumed as ever by such an agent.
	plain := create(t, s, newRequest(f.key, "Bash", `{"command":"pwd"}`, "pwd"), Base)
	approve(t, s, plain.ID, now)
	if _, err := s.Transition(ctx, countersign.Transition{ID: plain.ID, From: []countersign.Status{countersign.StatusApproved},
		To: countersign.StatusConsumed, Now: now, KeyID: f.key.ID, Unedited: true},
		countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"}); err != nil {
		t.Fatalf("consume an unedited approval: %v", err)
	}
}

// testEditRace: an approval with an edit races plain approvals and
// denials of the same request: exactly one decision is made, and the
// request holds the edit only when the edit won.
func testEditRace(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	for run := range 10 {
		r := create(t, s, newRequest(f.key, "Bash", `{"command":"rm -rf /src/a /src/b"}`, "race"), Base)
		e := edited(r, `{"command":"rm -rf /src/a"}`, "rm -rf /src/a")
		seq, _, _ := s.AuditHead(t.Context())
		wins := race(t, s, 20, func(i int) countersign.Transition {
			tr := countersign.Transition{ID: r.ID, From: fromPending, To: countersign.StatusApproved, Now: Base.Add(time.Second), DecidedBy: "alice"}
			switch i % 3 {
			case 0:
				tr.Edited = e
			case 1:
				tr.To = countersign.StatusDenied
			}
			return tr
		})
		if wins != 1 {
			t.Fatalf("run %d: %d decisions succeeded, want exactly 1", run, wins)
		}
		if seq2, _, _ := s.AuditHead(t.Context()); seq2 != seq+1 {
			t.Fatalf("run %d: audit head moved from %d to %d, want one entry", run, seq, seq2)
		}
		got, err := s.Request(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if (got.Original != nil) != (got.ArgsHash == e.ArgsHash) || (got.Original != nil && got.Status != countersign.StatusApproved) {
			t.Fatalf("run %d: status %s, args hash %s, original %+v: a decision half applied", run, got.Status, got.ArgsHash, got.Original)
		}
		if _, err := s.ExpireRequests(t.Context(), r.ID, r.ExpiresAt); err != nil {
			t.Fatalf("ExpireRequests: %v", err)
		}
	}
}

// testEditVotes: on a request that needs several votes, a vote with an
// edit replaces the action in the same transaction and leaves the request
// pending; votes for the action before the edit count for nothing, their
// approvers may vote again on the edited one, and a second edit, or a
// vote for the old binding, changes nothing.
func testEditVotes(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s := f.s
	r := create(t, s, newRequest(f.key, "deploy", `{"to":"staging"}`, "deploy to staging"), Base)
	now := Base.Add(time.Second)
	if _, _, err := castVote(t, s, voteIn(r, "alice", 2, now)); err != nil {
		t.Fatalf("alice's vote: %v", err)
	}
	e := edited(r, `{"to":"prod"}`, "deploy to prod")
	v := voteIn(e, "bob", 2, now)
	v.Edited = e
	got, votes, err := castVote(t, s, v)
	if err != nil || got.Status != countersign.StatusPending || got.ArgsHash != e.ArgsHash || got.Original == nil ||
		got.Original.ArgsHash != r.ArgsHash || len(votes) != 1 || votes[0].Username != "bob" {
		t.Fatalf("bob's vote with an edit: %+v %+v %v, want pending, edited, bob's vote alone counted", got, votes, err)
	}
	stored, _ := s.Request(t.Context(), r.ID)
	if stored.ArgsHash != e.ArgsHash || !stored.Protected || stored.Original == nil || stored.Status != countersign.StatusPending {
		t.Fatalf("stored after the edit: %+v", stored)
	}
	seq, _, _ := s.AuditHead(t.Context())
	_, _, err = castVote(t, s, voteIn(r, "carol", 2, now))
	wantCode(t, "a vote for the action before the edit", err, countersign.ECONFLICT)
	again := voteIn(edited(r, `{"to":"dev"}`, "deploy to dev"), "carol", 2, now)
	again.Edited = edited(r, `{"to":"dev"}`, "deploy to dev")
	_, _, err = castVote(t, s, again)
	wantCode(t, "a second edit", err, countersign.ECONFLICT)
	_, _, err = castVote(t, s, voteIn(e, "bob", 2, now))
	wantCode(t, "bob's second vote", err, countersign.ECONFLICT)
	if seq2, _, _ := s.AuditHead(t.Context()); seq2 != seq {
		t.Fatalf("refused votes wrote %d audit entries", seq2-seq)
	}
	if after, _ := s.Request(t.Context(), r.ID); after.ArgsHash != e.ArgsHash {
		t.Fatalf("a refused edit changed the request: %s", after.ArgsHash)
	}

	got, votes, err = castVote(t, s, voteIn(e, "alice", 2, now.Add(time.Second)))
	if err != nil || got.Status != countersign.StatusApproved || len(votes) != 2 || got.ArgsHash != e.ArgsHash ||
		!strings.Contains(got.DecidedBy, "alice") || !strings.Contains(got.DecidedBy, "bob") {
		t.Fatalf("alice's vote on the edit: %+v %+v %v, want approved by alice and bob", got, votes, err)
	}
}
