package server_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
)

func TestLongPollWakesOnDecision(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	res := async(http.DefaultClient, s.newRequest("GET", "/api/v1/requests/"+r.ID+"?wait=5s", s.KeyA, ""))
	s.waitForWaiters(1)
	go s.Service.Decide(context.Background(), s.principal(), r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove})

	// Within the wait of 5 s only the decision can make it approved.
	got := await(t, res).request(t, http.StatusOK)
	if got.Status != "approved" || got.DecidedBy != "alice" {
		t.Errorf("long poll answered %s by %q, want approved by alice", got.Status, got.DecidedBy)
	}
}

func TestLongPollEnds(t *testing.T) {
	t.Parallel()
	// MaxWait stands in for the 60 s bound: a longer wait is shortened
	// to it, not refused.
	s := newServer(t, func(c *server.Config) { c.MaxWait = 100 * time.Millisecond })
	r := s.create(s.KeyA)
	for _, wait := range []string{"10m", "3600", "9300000000", "100ms"} {
		res := async(http.DefaultClient, s.newRequest("GET", "/api/v1/requests/"+r.ID+"?wait="+wait, s.KeyA, ""))
		if got := await(t, res).request(t, http.StatusOK); got.Status != "pending" {
			t.Errorf("wait=%s: %s", wait, got.Status)
		}
	}
}

func TestWaitParameter(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	for _, wait := range []string{"abc", "-1s", "-1", "1.5", "5x", "1e3"} {
		s.call("GET", "/api/v1/requests/"+r.ID+"?wait="+wait, s.KeyA, "").wantError(t, "wait="+wait, http.StatusBadRequest, countersign.EINVALID)
	}
	for _, wait := range []string{"", "0", "0s", "1ms"} {
		s.call("GET", "/api/v1/requests/"+r.ID+"?wait="+wait, s.KeyA, "").request(t, http.StatusOK)
	}
}

// TestGracefulShutdown: when Serve's context ends, a long poll in progress
// answers at once with the request's current state, and Serve returns
// without error.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- s.Server.Server.Serve(ctx, ln) }()

	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/api/v1/requests/"+r.ID+"?wait=50s", nil)
	req.Header.Set("Authorization", "Bearer "+s.KeyA)
	res := async(&http.Client{Timeout: 60 * time.Second}, req)
	s.waitForWaiters(1)
	cancel()

	// Receive's bound guards against a hang; the wait itself was 50 s.
	got := await(t, res).request(t, http.StatusOK)
	if got.Status != "pending" || got.ID != r.ID {
		t.Errorf("long poll at shutdown: %s", got.Status)
	}
	if err := testutil.Receive(t, served, "Serve's return after its context ended"); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if resp, err := http.Get("http://" + ln.Addr().String() + "/healthz"); err == nil {
		resp.Body.Close()
		t.Error("the server still answers after shutdown")
	}
}
