package cli

import (
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// TestApproveEdited: on a request that needs two approvals, which carol
// edited (her vote), `countersign approve REF` shows the edited action
// beside the agent's and refuses to approve it unseen, changing nothing;
// `approve --edited REF` approves the edit it showed. A request nobody
// edited is approved as before.
func TestApproveEdited(t *testing.T) {
	t.Parallel()
	s := testserver.New(t, testserver.Approval(func(s *testserver.Server, c *approval.Config) {
		s.World.Approver("carol", "acme")
		c.Teams = &approval.Teams{Rules: []approval.TeamRule{{AccountID: s.World.Acme.ID, Kind: countersign.KindTool,
			Approvers: []string{"alice", "carol"}, Route: "group:sre", Quorum: 2}}}
	}))
	agent := client.New(s.URL, s.AgentKey)
	ask := func(command string) *client.Request {
		t.Helper()
		r, _, err := agent.Create(t.Context(), client.CreateInput{Kind: "tool", Action: "Bash", Arguments: []byte(`{"command":"` + command + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	stored := func(id string) *countersign.Request {
		t.Helper()
		r, err := s.Store.Request(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	approve := func(args ...string) (int, string) {
		env, stdout, stderr := testEnv(map[string]string{"COUNTERSIGN_URL": s.URL, "COUNTERSIGN_TOKEN": s.ApproverToken})
		code := Run(t.Context(), env, append([]string{"approve"}, args...))
		return code, stdout.String() + stderr.String()
	}

	r := ask("make test")
	carol := client.New(s.URL, s.World.Token("carol", "acme"))
	if got, err := carol.Decide(t.Context(), r.ID, client.Decision{Decision: "approve", Edit: &client.Edit{Arguments: []byte(`{"command":"make release"}`)}}); err != nil || got.Status != "pending" {
		t.Fatalf("carol's edit: %+v, %v", got, err)
	}
	code, out := approve(r.Reference)
	if code == 0 || !strings.Contains(out, "make release") || !strings.Contains(out, "make test") || !strings.Contains(out, "approve --edited") {
		t.Fatalf("approve of an edited request without --edited: %d %q; want it refused, showing both actions", code, out)
	}
	if st := stored(r.ID).Status; st != countersign.StatusPending {
		t.Fatalf("after the refused approval: %s, want pending", st)
	}
	if code, out := approve("--edited", r.Reference); code != 0 || !strings.Contains(out, "approved") {
		t.Fatalf("approve --edited: %d %q", code, out)
	}
	if got := stored(r.ID); got.Status != countersign.StatusApproved || string(got.Arguments) != `{"command":"make release"}` {
		t.Fatalf("after approve --edited: %s %s", got.Status, got.Arguments)
	}

	plain := ask("make lint")
	if code, out := approve(plain.Reference); code != 0 || !strings.Contains(out, "pending") {
		t.Fatalf("a first vote on a request nobody edited: %d %q", code, out)
	}
}
