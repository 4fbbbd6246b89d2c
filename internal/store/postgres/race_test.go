package postgres

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
)

// The conformance suite races goroutines on one store; these race two
// stores (two replicas' pools) on one database, where SQLite's single
// writer has no counterpart and the locks of this package must hold.

// pendingRequest returns a new pending request of key with the binding n.
func pendingRequest(key *countersign.AgentKey, n string) *countersign.Request {
	return &countersign.Request{
		AccountID: key.AccountID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
		Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: n, PreviewHash: "p",
		Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Minute),
	}
}

// raceReplicas runs n goroutines at once, alternately on a and b.
func raceReplicas(n int, a, b *DB, fn func(i int, s *DB)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			<-start
			fn(i, s)
		})
	}
	close(start)
	wg.Wait()
}

func TestCreateRaceAcrossReplicas(t *testing.T) {
	url := Migrated.SchemaURL(t)
	a, b := openTest(t, url), openTest(t, url)
	_, key := seed(t, a, 0)
	ev := countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"}

	// The same ask from both replicas at once is one request.
	var mu sync.Mutex
	ids := map[string]int{}
	created := 0
	raceReplicas(20, a, b, func(i int, s *DB) {
		got, c, err := s.CreateRequest(t.Context(), pendingRequest(key, "same"), 0, storetest.Base, ev)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("create %d: %v", i, err)
			return
		}
		ids[got.ID]++
		if c {
			created++
		}
	})
	if created != 1 || len(ids) != 1 {
		t.Errorf("identical creates on two replicas: %d created, %d distinct requests; want 1 and 1", created, len(ids))
	}

	// At the pending limit, exactly the free places are taken.
	const limit = 6 // one is taken already
	ok, limited := 0, 0
	raceReplicas(20, a, b, func(i int, s *DB) {
		_, _, err := s.CreateRequest(t.Context(), pendingRequest(key, fmt.Sprint(i)), limit, storetest.Base, ev)
		mu.Lock()
		defer mu.Unlock()
		switch countersign.ErrorCode(err) {
		case "":
			ok++
		case countersign.ELIMIT:
			limited++
		default:
			t.Errorf("create %d: %v", i, err)
		}
	})
	if ok != limit-1 || limited != 20-(limit-1) {
		t.Errorf("creates at the limit on two replicas: %d made, %d limited; want %d and %d", ok, limited, limit-1, 20-(limit-1))
	}
	if problems, n := storetest.Verify(t, a); len(problems) != 0 || n != limit {
		t.Errorf("audit log: %d entries, problems %v; want %d", n, problems, limit)
	}
}

func TestExpireRaceAcrossReplicas(t *testing.T) {
	url := Migrated.SchemaURL(t)
	a, b := openTest(t, url), openTest(t, url)
	_, key := seed(t, a, 0)
	ev := countersign.AuditEvent{Event: "created", Actor: "k", Detail: "{}"}
	const n = 60
	for i := range n {
		if _, _, err := a.CreateRequest(t.Context(), pendingRequest(key, fmt.Sprint(i)), 0, storetest.Base, ev); err != nil {
			t.Fatal(err)
		}
	}
	// Sweeps of both replicas, and lazy expiries of single requests, at
	// once: each request is expired once, with one audit entry.
	all, _ := a.Requests(t.Context(), countersign.RequestFilter{AccountID: key.AccountID, Limit: n})
	var mu sync.Mutex
	expired := map[string]int{}
	raceReplicas(16, a, b, func(i int, s *DB) {
		id := ""
		if i >= 8 {
			id = all[i].ID
		}
		got, err := s.ExpireRequests(t.Context(), id, storetest.Base.Add(time.Minute))
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			t.Errorf("expire %d: %v", i, err)
		}
		for _, e := range got {
			expired[e.ID]++
		}
	})
	for _, r := range all {
		if expired[r.ID] != 1 {
			t.Errorf("%s expired %d times, want once", r.ID, expired[r.ID])
		}
	}
	if problems, count := storetest.Verify(t, a); len(problems) != 0 || count != 2*n {
		t.Errorf("audit log: %d entries, problems %v; want %d", count, problems, 2*n)
	}
}
