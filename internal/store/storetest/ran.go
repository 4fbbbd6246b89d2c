package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// testRan: a consumed request is found by its key, session and the
// agent's call id, and by nothing else; what ran under it is recorded
// once, with its audit entry, and read back with the request; a second
// record, or one of a request not consumed, changes nothing.
func testRan(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()
	r := newRequest(f.key, "Bash", `{"command":"make deploy"}`, "deploy")
	r.Context.CallID = "toolu_01"
	r = create(t, s, r, Base)
	other := newRequest(f.key, "Bash", `{"command":"make test"}`, "test")
	create(t, s, other, Base) // no call id: never found by one

	_, err := s.RequestByCall(ctx, f.key.ID, "sess-1", "toolu_01")
	wantCode(t, "a pending request by its call", err, countersign.ENOTFOUND)
	ran := countersign.Ran{At: Base.Add(3 * time.Second), Action: "Bash", ArgsHash: sha("other")}
	ev := countersign.AuditEvent{Event: countersign.AuditRanOtherThanApproved, Actor: "key:" + f.key.ID, Detail: `{"ran_args_hash":"x"}`}
	_, err = s.RecordRan(ctx, r.ID, ran, ev)
	wantCode(t, "record what ran under a pending request", err, countersign.ECONFLICT)
	approve(t, s, r.ID, Base.Add(time.Second))
	consumed, err := s.Transition(ctx, countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusApproved},
		To: countersign.StatusConsumed, Now: Base.Add(2 * time.Second), KeyID: f.key.ID},
		countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"})
	if err != nil {
		t.Fatalf("consume: %v", err)
	}

	got, err := s.RequestByCall(ctx, f.key.ID, "sess-1", "toolu_01")
	if err != nil {
		t.Fatalf("RequestByCall: %v", err)
	}
	same(t, "the request found by its call", got, consumed)
	for name, q := range map[string][3]string{
		"another key":     {f.key2.ID, "sess-1", "toolu_01"},
		"another session": {f.key.ID, "sess-2", "toolu_01"},
		"no session":      {f.key.ID, "", "toolu_01"},
		"another call":    {f.key.ID, "sess-1", "toolu_02"},
		"no call":         {f.key.ID, "sess-1", ""},
		"a NUL":           {f.key.ID, "sess-1", "toolu_01\x00"},
	} {
		_, err := s.RequestByCall(ctx, q[0], q[1], q[2])
		wantCode(t, "RequestByCall of "+name, err, countersign.ENOTFOUND)
	}

	seq, _, _ := s.AuditHead(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for range 8 {
		wg.Go(func() {
			_, err := s.RecordRan(ctx, r.ID, ran, ev)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				wins++
			} else if countersign.ErrorCode(err) != countersign.ECONFLICT {
				t.Errorf("RecordRan: %v, want ECONFLICT", err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Errorf("%d records of what ran succeeded, want exactly 1", wins)
	}
	got, err = s.Request(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *consumed
	want.Ran = ran
	same(t, "the request with what ran", got, &want)
	if !got.RanOther() {
		t.Errorf("RanOther() = false for a report of other arguments")
	}
	entries, err := s.AuditLog(ctx, seq, 10)
	if err != nil || len(entries) != 1 || entries[0].Event != ev.Event || entries[0].RequestID != r.ID ||
		entries[0].Detail != ev.Detail || !entries[0].At.Equal(ran.At) || entries[0].AccountID != f.account.ID {
		t.Errorf("audit after the records: %+v, %v; want one %s entry of the request", entries, err, ev.Event)
	}
	_, err = s.RecordRan(ctx, "req_nosuch", ran, ev)
	wantCode(t, "record what ran under no request", err, countersign.ENOTFOUND)
}
