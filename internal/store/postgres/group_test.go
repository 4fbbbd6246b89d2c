package postgres

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
)

// TestGroupOutcomesAreEach: changes written in one group commit keep
// their own outcomes: a change that fails (a NUL in its reason) is
// refused alone, one that finds its request already decided is refused
// alone, and the others are made, each with its entry in a chain that
// verifies.
func TestGroupOutcomesAreEach(t *testing.T) {
	db := openTest(t, Migrated.SchemaURL(t))
	_, key := seed(t, db, 0)
	ctx := t.Context()
	ev := countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"}
	var ids []string
	for i := range 6 {
		r, _, err := db.CreateRequest(ctx, pendingRequest(key, strings.Repeat("x", i+1)), 0, storetest.Base, ev)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	approve := func(id, reason string) countersign.Transition {
		return countersign.Transition{ID: id, From: []countersign.Status{countersign.StatusPending}, To: countersign.StatusApproved,
			Now: storetest.Base.Add(time.Second), DecidedBy: "alice", Reason: reason}
	}
	if _, err := db.Transition(ctx, approve(ids[5], "first"), countersign.AuditEvent{Event: "approved", Actor: "alice", Detail: "{}"}); err != nil {
		t.Fatal(err)
	}
	decided := countersign.AuditEvent{Event: "approved", Actor: "alice", Detail: "{}"}

	// One group as the writer gathers it, and the same changes raced
	// through Transition, where they may share groups or not.
	for round := range 2 {
		var g []*groupChange
		for i, id := range ids {
			reason := "fine"
			if i == 2 {
				reason = "a\x00b"
			}
			tr := approve(id, reason)
			if round == 1 {
				tr.From, tr.To = []countersign.Status{countersign.StatusApproved}, countersign.StatusConsumed
			}
			g = append(g, &groupChange{ctx: ctx, t: tr, ev: decided, done: make(chan struct{})})
		}
		if round == 0 {
			db.writeGroup(ctx, g)
		} else {
			raceReplicas(len(g), db, db, func(i int, s *DB) {
				g[i].got, g[i].err = s.Transition(ctx, g[i].t, g[i].ev)
			})
		}
		for i, c := range g {
			switch {
			case round == 0 && i == 2:
				if countersign.ErrorCode(c.err) != countersign.EINVALID {
					t.Errorf("round %d, change %d with a NUL: %v, want EINVALID", round, i, c.err)
				}
			case round == 0 && i == 5:
				// Decided before: no row changed, or, made alone after
				// the group failed, the refusal.
				if c.got != nil || (c.err != nil && countersign.ErrorCode(c.err) != countersign.ECONFLICT) {
					t.Errorf("round %d, change %d of a decided request: %v, %v; want nothing changed", round, i, c.got, c.err)
				}
			case round == 1 && i == 2:
				if countersign.ErrorCode(c.err) != countersign.ECONFLICT {
					t.Errorf("round %d, consume of the unapproved request %d: %v, want ECONFLICT", round, i, c.err)
				}
			default:
				if c.err != nil || c.got == nil {
					t.Errorf("round %d, change %d: %v, %v; want it made", round, i, c.got, c.err)
				}
			}
		}
	}
	r, err := db.Request(ctx, ids[2])
	if err != nil || r.Status != countersign.StatusPending {
		t.Errorf("the request whose change failed: %v, %v; want it pending", r, err)
	}
	if problems, n := storetest.Verify(t, db); len(problems) != 0 || n != 6+1+4+5 {
		t.Errorf("audit chain: %v, %d entries; want none and %d", problems, n, 6+1+4+5)
	}
}
