package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// newerRequests is how many v1 and MCP requests testSeedLists makes after
// the seed ones: twenty times the longest list.
const newerRequests = 10_000

// testSeedLists: the lists of the seed-compatible routes filter kind, seed
// id prefix and status in the store, before the limit. An account with
// many newer v1 and MCP requests (rm ones among them, with no seed id)
// still lists its seed requests.
func testSeedLists(t *testing.T, open Opener) {
	s := open(t)
	acc := &countersign.Account{ID: countersign.NewID("acc_"), Name: "acme", CreatedAt: Base}
	other := &countersign.Account{ID: countersign.NewID("acc_"), Name: "other", CreatedAt: Base}
	key := &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: acc.ID, Name: "laptop", Hash: sha("laptop"), Hint: "csk_lap…", CreatedAt: Base}
	otherKey := &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: other.ID, Name: "x", Hash: sha("x"), Hint: "csk_x…", CreatedAt: Base}

	at := func(k *countersign.AgentKey, kind countersign.Kind, seedID string, st countersign.Status, i int) *countersign.Request {
		r := newRequest(k, "rm -rf /srv", fmt.Sprintf(`{"i":%d}`, i), fmt.Sprint("delete ", i))
		r.Kind, r.SeedID, r.Status = kind, seedID, st
		r.CreatedAt = Base.Add(time.Duration(i) * time.Millisecond)
		r.ExpiresAt = r.CreatedAt.Add(10 * time.Minute)
		return r
	}
	d1 := at(key, countersign.KindRm, "delete:del_1", countersign.StatusPending, 1)
	d2 := at(key, countersign.KindRm, "delete:del_2", countersign.StatusConsumed, 2)
	c1 := at(key, countersign.KindTool, "claude:evt_1", countersign.StatusResponded, 3)
	c1.Context.SessionID = "sess-c"
	c2 := at(key, countersign.KindTool, "claude:evt_2", countersign.StatusPending, 4)
	elsewhere := at(otherKey, countersign.KindRm, "delete:del_3", countersign.StatusPending, 5)
	reqs := []*countersign.Request{d1, d2, c1, c2, elsewhere}
	kinds := []countersign.Kind{countersign.KindTool, countersign.KindMCP, countersign.KindRm}
	statuses := []countersign.Status{countersign.StatusPending, countersign.StatusConsumed, countersign.StatusDenied}
	for i := range newerRequests {
		reqs = append(reqs, at(key, kinds[i%3], "", statuses[i%3], 10+i))
	}
	fill(t, s, []*countersign.Account{acc, other}, []*countersign.AgentKey{key, otherKey}, reqs)

	list := func(f countersign.RequestFilter) []string {
		t.Helper()
		f.AccountID = acc.ID
		got, err := s.Requests(t.Context(), f)
		if err != nil {
			t.Fatalf("Requests(%+v): %v", f, err)
		}
		ids := []string{}
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		return ids
	}
	for _, tt := range []struct {
		name string
		f    countersign.RequestFilter
		want []string
	}{
		{"deletes", countersign.RequestFilter{Kind: countersign.KindRm, SeedPrefix: "delete:", Limit: 500}, []string{d2.ID, d1.ID}},
		{"deletes, no kind", countersign.RequestFilter{SeedPrefix: "delete:", Limit: 500}, []string{d2.ID, d1.ID}},
		{"approved deletes", countersign.RequestFilter{Kind: countersign.KindRm, SeedPrefix: "delete:", Statuses: []countersign.Status{countersign.StatusApproved, countersign.StatusConsumed}}, []string{d2.ID}},
		{"claude events", countersign.RequestFilter{Kind: countersign.KindTool, SeedPrefix: "claude:", Limit: 500}, []string{c2.ID, c1.ID}},
		{"newest claude event", countersign.RequestFilter{Kind: countersign.KindTool, SeedPrefix: "claude:", Limit: 1}, []string{c2.ID}},
		{"claude events of a session", countersign.RequestFilter{Kind: countersign.KindTool, SeedPrefix: "claude:", SessionID: "sess-c"}, []string{c1.ID}},
		{"pending claude events", countersign.RequestFilter{Kind: countersign.KindTool, SeedPrefix: "claude:", Statuses: []countersign.Status{countersign.StatusPending}}, []string{c2.ID}},
		{"no status", countersign.RequestFilter{Kind: countersign.KindRm, SeedPrefix: "delete:", Statuses: []countersign.Status{}}, []string{}},
		{"another kind", countersign.RequestFilter{Kind: countersign.KindMCP, SeedPrefix: "delete:"}, []string{}},
		{"a prefix is not a pattern", countersign.RequestFilter{SeedPrefix: "delete%"}, []string{}},
		{"a prefix is not a pattern either", countersign.RequestFilter{SeedPrefix: "_elete:"}, []string{}},
	} {
		if got := list(tt.f); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}

	// The filters apply to any list: the newest MCP requests, consumed.
	got := list(countersign.RequestFilter{Kind: countersign.KindMCP, Statuses: []countersign.Status{countersign.StatusConsumed}, Limit: 3})
	want := []string{}
	for i := len(reqs) - 1; i >= 0 && len(want) < 3; i-- {
		if r := reqs[i]; r.Kind == countersign.KindMCP && r.Status == countersign.StatusConsumed && r.AccountID == acc.ID {
			want = append(want, r.ID)
		}
	}
	if len(want) != 3 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("newest consumed MCP requests: %v, want %v", got, want)
	}
}

// fill writes the accounts, keys and requests into the empty store s: in
// one transaction when s is an Importer, one by one otherwise.
func fill(t *testing.T, s countersign.Store, accounts []*countersign.Account, keys []*countersign.AgentKey, reqs []*countersign.Request) {
	t.Helper()
	if im, ok := s.(countersign.Importer); ok {
		err := im.Import(t.Context(), func(put func(countersign.Record) error) error {
			var recs []countersign.Record
			for _, a := range accounts {
				recs = append(recs, countersign.Record{Account: a})
			}
			for _, k := range keys {
				recs = append(recs, countersign.Record{AgentKey: k})
			}
			for _, r := range reqs {
				recs = append(recs, countersign.Record{Request: r})
			}
			for _, rec := range recs {
				if err := put(rec); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Import: %v", err)
		}
		return
	}
	for _, a := range accounts {
		if err := s.CreateAccount(t.Context(), a); err != nil {
			t.Fatalf("CreateAccount: %v", err)
		}
	}
	for _, k := range keys {
		if err := s.CreateAgentKey(t.Context(), k); err != nil {
			t.Fatalf("CreateAgentKey: %v", err)
		}
	}
	for _, r := range reqs {
		create(t, s, r, r.CreatedAt)
	}
}
