package server_test

import (
	"context"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/server"
)

// TestLostReplyRetried: a change committed whose reply is lost (the
// connection dropped after the commit, as a server killed between the two
// would) is retried by the Go client with the same Idempotency-Key, and the
// retry gets the first answer: the creation made once, the decision taken,
// the consumption the agent's own, not 409 "already consumed".
func TestLostReplyRetried(t *testing.T) {
	s := newServer(t)
	u, _ := url.Parse(s.URL)
	var armed, dropped atomic.Int32
	defer server.DropAfterCommit(func(r *http.Request) bool {
		if r.Host != u.Host || !armed.CompareAndSwap(1, 0) {
			return false
		}
		dropped.Add(1)
		return true
	})()
	ctx := context.Background()
	agent, approver := client.New(s.URL, s.KeyA), client.New(s.URL, s.alice)

	armed.Store(1)
	r, created, err := agent.Create(ctx, client.CreateInput{Kind: "tool", Action: "Bash", Arguments: []byte(`{"command":"make deploy"}`), Preview: "make deploy"})
	if err != nil || !created || dropped.Load() != 1 {
		t.Fatalf("create with its reply lost: %+v, created %v, %v; %d dropped", r, created, err, dropped.Load())
	}
	if list, err := approver.List(ctx, "pending", 50); err != nil || len(list) != 1 || list[0].ID != r.ID {
		t.Fatalf("pending after a retried create: %d requests, %v; want the one", len(list), err)
	}

	armed.Store(1)
	if got, err := approver.Decide(ctx, r.Reference, client.Decision{Decision: "approve"}); err != nil || got.Status != "approved" || dropped.Load() != 2 {
		t.Fatalf("decision with its reply lost: %+v, %v", got, err)
	}
	armed.Store(1)
	if got, err := agent.Consume(ctx, r.ID); err != nil || got.Status != "consumed" || dropped.Load() != 3 {
		t.Fatalf("consume with its reply lost: %+v, %v; want consumed, the agent's own", got, err)
	}
	// Without a key, as before, a second consume is refused.
	s.call("POST", "/api/v1/requests/"+r.ID+"/consume", s.KeyA, "").wantError(t, "consume again without a key", http.StatusConflict, "conflict")
}

// TestIdempotencyKey: the same key from the same principal gets the first
// status and body again and changes nothing; with another body, or for
// another change, it gets 409; another principal's same key is its own; a
// malformed key is refused.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	send := func(path, cred, key, body string) response {
		t.Helper()
		req := s.newRequest("POST", path, cred, body)
		req.Header.Set("Idempotency-Key", key)
		return s.do(req)
	}
	body := s.toolBody("")
	first := send("/api/v1/requests", s.KeyA, "k-1", body)
	created := first.request(t, http.StatusCreated)
	again := send("/api/v1/requests", s.KeyA, "k-1", body)
	if again.status != http.StatusCreated || again.body != first.body || again.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry: %d %s, want the first answer %s", again.status, again.body, first.body)
	}
	send("/api/v1/requests", s.KeyA, "k-1", s.toolBody("")).wantError(t, "the key with another body", http.StatusConflict, "conflict")
	// Key b of the same account, with the same key: its own request.
	other := send("/api/v1/requests", s.keyB, "k-1", body).request(t, http.StatusCreated)
	if other.ID == created.ID {
		t.Errorf("another key's retry got the first key's request")
	}

	decide := func(key, decision string) response {
		return send("/api/v1/requests/"+created.ID+"/decision", s.alice, key, `{"decision":"`+decision+`"}`)
	}
	d1 := decide("d-1", "approve")
	d1.request(t, http.StatusOK)
	if d2 := decide("d-1", "approve"); d2.status != http.StatusOK || string(d2.body) != string(d1.body) {
		t.Errorf("the decision's retry: %d %s", d2.status, d2.body)
	}
	decide("d-1", "deny").wantError(t, "the decision's key with another decision", http.StatusConflict, "conflict")
	decide("d-2", "deny").wantError(t, "a second decision", http.StatusConflict, "conflict")

	c1 := send("/api/v1/requests/"+created.ID+"/consume", s.KeyA, "c-1", "")
	c1.request(t, http.StatusOK)
	// The decision's retry still answers approved, as first, though the
	// request is consumed now.
	if d3 := decide("d-1", "approve"); string(d3.body) != string(d1.body) {
		t.Errorf("the decision's retry after the consumption: %s, want %s", d3.body, d1.body)
	}
	if c2 := send("/api/v1/requests/"+created.ID+"/consume", s.KeyA, "c-1", ""); c2.status != http.StatusOK || string(c2.body) != string(c1.body) {
		t.Errorf("the consumption's retry: %d %s", c2.status, c2.body)
	}
	send("/api/v1/requests/"+created.ID+"/consume", s.KeyA, "c-2", "").wantError(t, "another consumption", http.StatusConflict, "conflict")
	send("/api/v1/requests/"+created.ID+"/consume", s.KeyA, "k-1", "").wantError(t, "the create's key on a consume", http.StatusConflict, "conflict")
	send("/api/v1/requests", s.KeyA, "bad key", body).wantError(t, "a key with a space", http.StatusBadRequest, "invalid")
}
