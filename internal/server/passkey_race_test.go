package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
)

// session opens a browser session of the approver without a password
// check, which costs an argon2id hash each: these tests are about what
// ends a grant, not about signing in.
func (e *ibEnv) session(username string) ibSession {
	e.t.Helper()
	ap, err := e.Store.ApproverByUsername(e.Ctx, username)
	if err != nil {
		e.t.Fatal(err)
	}
	id, _, err := (&identity.Sessions{Store: e.Store, Clock: countersign.SystemClock{}}).Open(e.Ctx, ap, "127.0.0.1", "test")
	if err != nil {
		e.t.Fatal(err)
	}
	return ibSession{id: id, csrf: ibCSRF(e.t, e.get("/approvals", e.as(id)).want(e.t, "inbox", http.StatusOK).body)}
}

// TestLastPasskeyRace: twelve removals at once of the two passkeys of an
// approver without a password leave exactly one; each answer is 200, 404
// (removed already) or 409 (the last). Several rounds, since a race shows
// only sometimes.
func TestLastPasskeyRace(t *testing.T) {
	t.Parallel()
	e := pkSetup(t)
	if _, err := e.Store.SetPassword(e.Ctx, e.Alice.ID, "", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	s := e.session("alice")
	id, csrf := s.id, s.csrf
	for round := range 12 {
		var ids []string
		for i := range 2 {
			pk := &countersign.Passkey{ID: countersign.NewID("pk_"), ApproverID: e.Alice.ID, CredentialID: []byte(countersign.NewID("cred_")),
				PublicKey: []byte{1}, Name: fmt.Sprintf("key %d.%d", round, i), CreatedAt: time.Now()}
			if err := e.Store.CreatePasskey(e.Ctx, pk); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, pk.ID)
		}
		statuses := e.raceRemovals(id, csrf, ids, 12)
		list, err := e.Store.Passkeys(e.Ctx, e.Alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 1 {
			t.Fatalf("round %d: 12 removals at once left %d passkeys of 2, want 1 (statuses %v)", round, len(list), statuses)
		}
		for _, st := range statuses {
			if st != http.StatusSeeOther && st != http.StatusNotFound && st != http.StatusConflict {
				t.Errorf("round %d: a racing removal answered %d (statuses %v)", round, st, statuses)
			}
		}
		r := e.post("/passkeys/"+list[0].ID+"/remove", url.Values{"csrf": {csrf}}, e.as(id))
		if r.status != http.StatusConflict || !strings.Contains(r.body, "would lock you out") {
			t.Errorf("round %d: removing the last passkey: %d\n%s", round, r.status, r.body)
		}
		// The operator may remove it: the next round starts from none.
		if err := e.Store.RemovePasskey(e.Ctx, e.Alice.ID, list[0].ID, false); err != nil {
			t.Fatal(err)
		}
	}
}

// raceRemovals sends n removals of the passkeys ids at once, in turn, and
// returns their statuses. Each goes on a connection opened beforehand, so
// that they reach the server together rather than one handshake apart.
func (e *ibEnv) raceRemovals(session, csrf string, ids []string, n int) []int {
	e.client.Transport = &http.Transport{MaxIdleConnsPerHost: n}
	at := func(ready, start *sync.WaitGroup, do func(i int)) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			ready.Add(1)
			go func() {
				defer wg.Done()
				ready.Done()
				start.Wait()
				do(i)
			}()
		}
		ready.Wait()
		start.Done()
		wg.Wait()
	}
	var ready, start sync.WaitGroup
	start.Add(1)
	at(&ready, &start, func(int) { e.get("/healthz") })
	statuses := make([]int, n)
	start.Add(1)
	at(&ready, &start, func(i int) {
		statuses[i] = e.post("/passkeys/"+ids[i%len(ids)]+"/remove", url.Values{"csrf": {csrf}}, e.as(session)).status
	})
	return statuses
}
