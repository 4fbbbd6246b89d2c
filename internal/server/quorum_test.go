package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil"
)

// TestQuorumThroughAPI: a request a team rule gives a quorum of two, made
// through the API, keeps its agent's long poll waiting after the first
// approver's vote (which answers 200 with the request still pending, and
// cannot be consumed), refuses a second vote of the same approver through
// another token and a vote of an approver it is not routed to, and
// answers the waiting agent approved at the second approver's vote.
func TestQuorumThroughAPI(t *testing.T) {
	t.Parallel()
	s := newServerWith(t, func(c *approval.Config) {
		c.Teams = &approval.Teams{Rules: []approval.TeamRule{{Kind: countersign.KindTool, Tool: "Bash",
			Approvers: []string{"alice", "carol"}, Route: "group:sre", Quorum: 2}}}
	})
	carol := s.approverToken("carol")
	dave := s.approverToken("dave")
	alice2 := s.token("alice")

	r := s.create(s.KeyA)
	res := async(http.DefaultClient, s.newRequest("GET", "/api/v1/requests/"+r.ID+"?wait=30s", s.KeyA, ""))
	s.waitForWaiters(1)

	if got := s.decide(r.ID, "approve"); got.Status != "pending" {
		t.Fatalf("alice's vote: %s, want pending", got.Status)
	}
	s.call("POST", "/api/v1/requests/"+r.ID+"/consume", s.KeyA, "").wantError(t, "consume after one vote", http.StatusConflict, countersign.ECONFLICT)
	msg := s.call("POST", "/api/v1/requests/"+r.ID+"/decision", alice2, `{"decision":"approve"}`).wantError(t, "alice's second token", http.StatusConflict, countersign.ECONFLICT)
	if !strings.Contains(msg, "already approved") {
		t.Errorf("alice's second vote: %q", msg)
	}
	msg = s.call("POST", "/api/v1/requests/"+r.ID+"/decision", dave, `{"decision":"approve"}`).wantError(t, "dave's vote", http.StatusForbidden, countersign.EFORBIDDEN)
	if !strings.Contains(msg, "routed to group:sre") {
		t.Errorf("dave's refusal: %q", msg)
	}
	select {
	case got := <-res:
		t.Fatalf("the agent's wait ended before the second vote: %d %s", got.status, got.body)
	default:
	}

	got := s.call("POST", "/api/v1/requests/"+r.ID+"/decision", carol, `{"decision":"approve"}`).request(t, http.StatusOK)
	if got.Status != "approved" || got.DecidedBy != "alice, carol" {
		t.Fatalf("carol's vote: %s by %q", got.Status, got.DecidedBy)
	}
	waited := await(t, res).request(t, http.StatusOK)
	if waited.Status != "approved" {
		t.Fatalf("the agent's wait answered %s", waited.Status)
	}
	s.call("POST", "/api/v1/requests/"+r.ID+"/consume", s.KeyA, "").request(t, http.StatusOK)
}

// approverToken makes an approver of acme and returns a token of theirs.
func (s *testServer) approverToken(username string) string {
	s.t.Helper()
	if _, err := s.Admin.CreateApprover(s.Ctx, "acme", username, testutil.Password, countersign.RoleApprover); err != nil {
		s.t.Fatal(err)
	}
	return s.token(username)
}

// token makes another API token of an approver of acme.
func (s *testServer) token(username string) string {
	s.t.Helper()
	_, secret, err := s.Admin.CreateApproverToken(s.Ctx, username, "acme", "t"+countersign.NewID(""))
	if err != nil {
		s.t.Fatal(err)
	}
	return secret
}

// TestQuorumInbox: the inbox's card and the request's page say whom a
// routed request is routed to and how many approvals it has; an approver
// outside the route sees the page with no decision to make, and a
// decision posted from their session anyway is refused and changes
// nothing.
func TestQuorumInbox(t *testing.T) {
	t.Parallel()
	e := ibSetupWith(t, approval.Config{Teams: &approval.Teams{Rules: []approval.TeamRule{{Kind: countersign.KindTool,
		Approvers: []string{"alice", "carol"}, Route: "group:sre", Quorum: 2}}}})
	e.World.Approver("dave", "acme")
	r, _, err := e.agentA.Create(e.Ctx, client.CreateInput{Kind: "tool", Action: "Bash", Arguments: []byte(`{"command":"make release"}`)})
	if err != nil {
		t.Fatal(err)
	}
	alice, dave := e.signIn("alice"), e.signIn("dave")
	e.post("/approvals/"+r.ID+"/decision", url.Values{"csrf": {alice.csrf}, "decision": {"approve"}}, e.as(alice.id)).
		wantRedirect(t, "alice's vote", "/approvals/"+r.ID)

	inbox := e.get("/approvals", e.as(dave.id)).want(t, "dave's inbox", http.StatusOK).body
	if !strings.Contains(inbox, "Routed to group:sre. 1 of 2 approvals: alice.") || !strings.Contains(inbox, "View ") {
		t.Errorf("dave's inbox card:\n%s", inbox)
	}
	page := e.get("/approvals/"+r.ID, e.as(dave.id)).want(t, "dave's page", http.StatusOK).body
	if !strings.Contains(page, "routed to group:sre: you see it but do not decide it") || strings.Contains(page, `name="decision"`) {
		t.Errorf("dave's page:\n%s", page)
	}
	e.post("/approvals/"+r.ID+"/decision", url.Values{"csrf": {dave.csrf}, "decision": {"deny"}}, e.as(dave.id)).
		want(t, "dave's deny", http.StatusForbidden)
	if got, err := e.Store.Request(e.Ctx, r.ID); err != nil || got.Status != countersign.StatusPending {
		t.Fatalf("after dave's deny: %v %v", got, err)
	}
	page = e.get("/approvals/"+r.ID, e.as(alice.id)).want(t, "alice's page", http.StatusOK).body
	if !strings.Contains(page, "1 of 2 approvals: alice") || !strings.Contains(page, "one of the 2 this request needs") {
		t.Errorf("alice's page:\n%s", page)
	}
}

// TestQuorumVoteReplyLost: a vote that does not reach the quorum, whose
// reply is lost after the commit, is retried by the Go client with the
// same Idempotency-Key and answered as first (pending), not 409 "you
// have already approved this request".
func TestQuorumVoteReplyLost(t *testing.T) {
	s := newServerWith(t, func(c *approval.Config) {
		c.Teams = &approval.Teams{Rules: []approval.TeamRule{{Kind: countersign.KindTool, Tool: "Bash",
			Approvers: []string{"alice", "carol"}, Route: "group:sre", Quorum: 2}}}
	})
	u, _ := url.Parse(s.URL)
	var armed, dropped atomic.Int32
	defer server.DropAfterCommit(func(r *http.Request) bool {
		if r.Host != u.Host || !armed.CompareAndSwap(1, 0) {
			return false
		}
		dropped.Add(1)
		return true
	})()
	s.approverToken("carol") // the quorum's second approver
	r := s.create(s.KeyA)
	armed.Store(1)
	got, err := client.New(s.URL, s.alice).Decide(context.Background(), r.ID, client.Decision{Decision: "approve"})
	if err != nil || got.Status != "pending" || dropped.Load() != 1 {
		t.Fatalf("alice's vote with its reply lost: %+v, %v; %d dropped", got, err, dropped.Load())
	}
}
