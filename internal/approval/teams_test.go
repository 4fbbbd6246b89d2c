package approval_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// teamsFile writes a teams configuration and loads it.
func teamsFile(t *testing.T, text string) (*approval.TeamsFile, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "teams.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return approval.LoadTeams(path)
}

// TestTeamsFileRefusals: what the file alone gets wrong stops the start
// with the reason.
func TestTeamsFileRefusals(t *testing.T) {
	for _, tt := range []struct{ name, text, want string }{
		{"unknown key", "[[rule]]\naccount = \"acme\"\nquorom = 2\n", "unknown keys: rule.quorom"},
		{"unknown group", "[[rule]]\naccount = \"acme\"\napprovers = [\"group:sre\"]\n", `no group "sre"`},
		{"quorum over names", "[groups]\nsre = [\"alice\"]\n[[rule]]\naccount = \"acme\"\napprovers = [\"group:sre\", \"alice\"]\nquorum = 2\n", "quorum 2 is more than the 1 approvers"},
		{"kind", "[[rule]]\nkind = \"shell\"\n", `no kind "shell"`},
		{"tier", "[[rule]]\nkind = \"mcp\"\ntier = \"danger\"\n", `no tier "danger"`},
		{"tier of another kind", "[[rule]]\nkind = \"rm\"\ntier = \"commit\"\n", "goes with kind"},
		{"group of groups", "[groups]\na = [\"group:b\"]\n", "not a username"},
		{"catch-all first", "[[rule]]\naccount = \"acme\"\napprovers = [\"alice\"]\n[[rule]]\naccount = \"acme\"\ntool = \"deploy*\"\nquorum = 2\n",
			`rule 1 sets no kind, tier, tool, protected or key, so it matches every request of account "acme", and rule 2 after it would never apply: a catch-all rule goes last`},
		{"catch-all of every account first", "[[rule]]\nseparate = true\n[[rule]]\naccount = \"acme\"\nkind = \"rm\"\n",
			"matches every request of every account, and rule 2 after it"},
		{"broader first", "[[rule]]\naccount = \"acme\"\ntool = \"deploy*\"\n[[rule]]\naccount = \"acme\"\nkind = \"tool\"\ntool = \"deploy-prod\"\nquorum = 2\n",
			"rule 2 would never apply: rule 1 before it matches every request it matches"},
		{"same twice", "[[rule]]\naccount = \"acme\"\nprotected = true\n[[rule]]\naccount = \"acme\"\nprotected = true\nkind = \"rm\"\n",
			"rule 2 would never apply"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := teamsFile(t, tt.text)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("LoadTeams: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestTeamsRuleOrder: a catch-all rule (no matcher but its account) is
// taken when it comes last, after the narrower rules, or when the rules
// after it are of other accounts; narrower rules before broader ones are
// taken as they are.
func TestTeamsRuleOrder(t *testing.T) {
	for _, text := range []string{
		"[[rule]]\naccount = \"acme\"\ntool = \"deploy*\"\nquorum = 2\n[[rule]]\naccount = \"acme\"\napprovers = [\"alice\"]\n",
		"[[rule]]\naccount = \"acme\"\napprovers = [\"alice\"]\n[[rule]]\naccount = \"other\"\ntool = \"deploy*\"\n",
		"[[rule]]\naccount = \"acme\"\ntool = \"deploy-prod\"\nquorum = 2\n[[rule]]\naccount = \"acme\"\ntool = \"deploy*\"\n[[rule]]\nseparate = true\n",
		"[[rule]]\naccount = \"acme\"\ntool = \"*-prod\"\n[[rule]]\naccount = \"acme\"\ntool = \"deploy*\"\n",
		"[[rule]]\naccount = \"acme\"\nkind = \"mcp\"\ntier = \"commit\"\n[[rule]]\naccount = \"acme\"\nprotected = true\n",
	} {
		if _, err := teamsFile(t, text); err != nil {
			t.Errorf("LoadTeams:\n%s\n%v, want it taken", text, err)
		}
	}
}

// TestTeamsResolveRefusals: what the store says wrong stops the start too.
func TestTeamsResolveRefusals(t *testing.T) {
	e := newEnv(t, approval.Config{})
	e.world.Approver("vic", "acme")
	if err := e.world.Admin.SetRole(e.ctx, "acme", "vic", countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, text, want string }{
		{"account", "[[rule]]\naccount = \"nope\"\n", `account "nope"`},
		{"not a member", "[[rule]]\naccount = \"acme\"\napprovers = [\"bob\"]\n", `"bob" is not an approver of account "acme"`},
		{"viewer", "[[rule]]\naccount = \"acme\"\napprovers = [\"vic\"]\n", `"vic" is a viewer`},
		{"quorum over deciders", "[[rule]]\naccount = \"acme\"\nquorum = 2\n", "quorum 2 is more than the 1 approvers of account \"acme\" who decide"},
		{"no account", "[[rule]]\nquorum = 2\n", "name the account"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := teamsFile(t, tt.text)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Resolve(e.ctx, e.store); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Resolve: %v, want %q", err, tt.want)
			}
		})
	}
}

// teamEnv is acme with alice and carol in the group sre, dave outside it,
// and a rule: deploys need two of sre, apart from the key's maker.
func teamEnv(t *testing.T, extra string) (*env, countersign.ApproverPrincipal, countersign.ApproverPrincipal) {
	t.Helper()
	e := newEnv(t, approval.Config{})
	carol := e.newApprover("carol", "acme")
	dave := e.newApprover("dave", "acme")
	f, err := teamsFile(t, "[groups]\nsre = [\"alice\", \"carol\"]\n\n[[rule]]\naccount = \"acme\"\ntool = \"deploy*\"\napprovers = [\"group:sre\"]\nquorum = 2\nseparate = true\n"+extra)
	if err != nil {
		t.Fatal(err)
	}
	teams, err := f.Resolve(e.ctx, e.store)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = approval.New(e.store, e.clock, e.hub, approval.Config{Teams: teams}, nil, nil)
	return e, carol, dave
}

// TestQuorum: the first vote leaves the request pending and unusable, a
// second vote of the same approver (another token) adds nothing, an
// approver outside the group is refused, and the second approver's vote
// approves, with both in the log.
func TestQuorum(t *testing.T) {
	e, carol, dave := teamEnv(t, "")
	r := e.create(e.keyA, e.toolCall("deploy-prod", ""))
	approve := countersign.DecisionInput{Decision: countersign.DecisionApprove}

	got, err := e.svc.Decide(e.ctx, e.alice, r.ID, approve)
	if err != nil || got.Status != countersign.StatusPending {
		t.Fatalf("alice's vote: %v %v, want pending", got, err)
	}
	if _, err := e.svc.Consume(e.ctx, e.keyA, r.ID); countersign.ErrorCode(err) != countersign.ECONFLICT {
		t.Fatalf("consume after one vote: %v, want ECONFLICT", err)
	}
	again := e.approver(e.world.Token("alice", "acme"))
	_, err = e.svc.Decide(e.ctx, again, r.ID, approve)
	wantCode(t, "alice's second vote", err, countersign.ECONFLICT)
	_, err = e.svc.Decide(e.ctx, dave, r.ID, approve)
	wantCode(t, "dave's vote", err, countersign.EFORBIDDEN)
	if !strings.Contains(err.Error(), "routed to group:sre") {
		t.Fatalf("dave's refusal: %v", err)
	}
	_, err = e.svc.Decide(e.ctx, dave, r.ID, countersign.DecisionInput{Decision: countersign.DecisionDeny})
	wantCode(t, "dave's deny", err, countersign.EFORBIDDEN)
	team, err := e.svc.TeamOf(e.ctx, e.alice, r)
	if err != nil || team.Quorum != 2 || len(team.Votes) != 1 || team.Votes[0].Username != "alice" || team.Route != "group:sre" || !team.May {
		t.Fatalf("TeamOf: %+v %v", team, err)
	}

	got, err = e.svc.Decide(e.ctx, carol, r.ID, approve)
	if err != nil || got.Status != countersign.StatusApproved || got.DecidedBy != "alice, carol" {
		t.Fatalf("carol's vote: %+v %v, want approved by alice, carol", got, err)
	}
	if _, err := e.svc.Consume(e.ctx, e.keyA, r.ID); err != nil {
		t.Fatalf("consume: %v", err)
	}
	same := strings.Join(e.events(r.ID), " ")
	if !strings.Contains(same, "voted voted approved consumed") {
		t.Fatalf("events %s", same)
	}

	// A request no rule matches is decided by the first, as always.
	plain := e.create(e.keyA, e.toolCall("Bash", ""))
	if got := e.decide(plain.ID, countersign.DecisionApprove); got.Status != countersign.StatusApproved {
		t.Fatalf("unrouted request: %s", got.Status)
	}
}

// TestQuorumDenyWins: one deny of an approver of the group ends the
// request after a vote, and no vote counts after it.
func TestQuorumDenyWins(t *testing.T) {
	e, carol, _ := teamEnv(t, "")
	r := e.create(e.keyA, e.toolCall("deploy-prod", ""))
	if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.svc.Decide(e.ctx, carol, r.ID, countersign.DecisionInput{Decision: countersign.DecisionDeny, Text: "not today"}); err != nil || got.Status != countersign.StatusDenied {
		t.Fatalf("carol's deny: %v %v", got, err)
	}
	_, err := e.svc.Decide(e.ctx, carol, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove})
	wantCode(t, "a vote after the deny", err, countersign.ECONFLICT)
}

// TestQuorumSeparate: the admin who made the asking key through the
// account API may not approve its requests; they may still deny.
func TestQuorumSeparate(t *testing.T) {
	e, carol, _ := teamEnv(t, "")
	m, err := e.world.Admin.Manage(e.ctx, e.alice)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := m.CreateKey(e.ctx, "alices-bot")
	if err != nil {
		t.Fatal(err)
	}
	bot := e.principal(secret)
	r := e.create(bot, e.toolCall("deploy-prod", ""))
	_, err = e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove})
	wantCode(t, "the maker's vote", err, countersign.EFORBIDDEN)
	if got, err := e.svc.Decide(e.ctx, carol, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove}); err != nil || got.Status != countersign.StatusPending {
		t.Fatalf("carol's vote: %v %v, want pending", got, err)
	}
}

// TestQuorumNeedsApprover: a decision that stands for no approver (a
// link, an MCP client's answer, the gateway's local page) is refused on a
// routed or quorum request, and the client's answer is not offered.
func TestQuorumNeedsApprover(t *testing.T) {
	e, _, _ := teamEnv(t, "\n[[rule]]\naccount = \"acme\"\nkind = \"mcp\"\nquorum = 2\n")
	r := e.create(e.keyA, e.toolCall("deploy-prod", ""))
	link := countersign.ApproverPrincipal{Username: approval.DecidedByLink, AccountID: e.acme.ID, Role: countersign.RoleApprover}
	_, err := e.svc.Decide(e.ctx, link, r.ID, countersign.DecisionInput{Decision: countersign.DecisionDeny})
	wantCode(t, "a link's deny", err, countersign.EFORBIDDEN)

	m := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindMCP, Action: "post", Tier: countersign.TierWrite})
	if e.svc.ElicitationDecides(e.ctx, e.keyA, m.ID) {
		t.Fatal("an MCP client's answer is offered on a quorum request")
	}
	_, err = e.svc.DecideByElicitation(e.ctx, e.keyA, m.ID, true)
	wantCode(t, "the client's answer", err, countersign.EFORBIDDEN)
	e.wantStatus(m.ID, countersign.StatusPending)
}

// TestQuorumNoWindow: an auto-approve window one approver opened before
// a team rule gave such requests a quorum does not approve them: they wait
// for their votes.
func TestQuorumNoWindow(t *testing.T) {
	e, _, _ := teamEnv(t, "")
	plain := approval.New(e.store, e.clock, e.hub, approval.Config{}, nil, nil)
	first, _, err := plain.Create(e.ctx, e.keyA, e.toolCall("deploy-prod", "s1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Decide(e.ctx, e.alice, first.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: 30}); err != nil {
		t.Fatal(err)
	}
	// Without the rule the window approves the next call of the session.
	if r, _, err := plain.Create(e.ctx, e.keyA, e.toolCall("deploy-prod", "s1")); err != nil || r.Status != countersign.StatusApproved {
		t.Fatalf("without the rule: %v %v, want approved by the window", r, err)
	}
	r := e.create(e.keyA, e.toolCall("deploy-prod", "s1"))
	if r.Status != countersign.StatusPending {
		t.Fatalf("under the rule the window approved the request: %s", r.Status)
	}
}

// routedEnv is acme with carol and dave, and one rule: the deletes of the
// rm wrapper are decided by carol alone.
func routedEnv(t *testing.T) (*env, countersign.ApproverPrincipal) {
	t.Helper()
	e := newEnv(t, approval.Config{MaxPending: 50})
	carol := e.newApprover("carol", "acme")
	e.newApprover("dave", "acme")
	f, err := teamsFile(t, "[[rule]]\naccount = \"acme\"\nkind = \"rm\"\napprovers = [\"carol\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	teams, err := f.Resolve(e.ctx, e.store)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = approval.New(e.store, e.clock, e.hub, approval.Config{MaxPending: 50, Teams: teams}, nil, nil)
	return e, carol
}

// TestRoutedHookCoverage: the approval of the Claude Code hook that an
// approver the rule does not route deletes to gave does not stand in for
// the delete of the rm wrapper, which a rule routes to carol: the delete
// is asked of carol. Carol's own approval of the hook's call covers it.
func TestRoutedHookCoverage(t *testing.T) {
	e, carol := routedEnv(t)
	h := e.hookApproval(3, 100) // alice approves the Bash call
	r := e.create(e.keyA, wrapperRm("s1", h.ID, 3, 100, "/src/build"))
	if r.Status != countersign.StatusPending {
		t.Fatalf("the delete routed to carol was %s by %q on alice's approval of the hook's call", r.Status, r.DecidedBy)
	}

	in := bash("s1", "rm -r build", []string{"rm"}, []string{"/src/build"}, recursive)
	h2 := e.create(e.keyA, in)
	if _, err := e.svc.Decide(e.ctx, carol, h2.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Consume(e.ctx, e.keyA, h2.ID); err != nil {
		t.Fatal(err)
	}
	if r := e.create(e.keyA, wrapperRm("s1", h2.ID, 3, 100, "/src/build")); r.Status != countersign.StatusApproved || r.DecidedBy != countersign.DecidedByCoverage {
		t.Fatalf("carol's approval of the hook's call: the delete is %s by %q, want covered", r.Status, r.DecidedBy)
	}
}

// TestRoutedWindow: an auto-approve window an approver opened before a
// rule routed such requests to carol does not approve them; one carol
// opens does.
func TestRoutedWindow(t *testing.T) {
	e, carol := routedEnv(t)
	plain := approval.New(e.store, e.clock, e.hub, approval.Config{MaxPending: 50}, nil, nil)
	rm := func(n int) countersign.CreateInput {
		args, _ := json.Marshal(map[string]any{"targets": []string{"/src/build"}, "n": n})
		return countersign.CreateInput{Kind: countersign.KindRm, Action: "rm -r build", Arguments: args,
			Context: countersign.RequestContext{SessionID: "s1", Cwd: "/src"},
			Scope:   &countersign.Scope{StatedScope: countersign.StatedScope{Commands: []string{"rm"}, Paths: []string{"/src/build"}, Files: 3, Bytes: 100}}}
	}
	first, _, err := plain.Create(e.ctx, e.keyA, rm(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Decide(e.ctx, e.alice, first.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: 30}); err != nil {
		t.Fatal(err)
	}
	if r, _, err := plain.Create(e.ctx, e.keyA, rm(2)); err != nil || r.Status != countersign.StatusApproved {
		t.Fatalf("without the rule: %v %v, want approved by the window", r, err)
	}
	r := e.create(e.keyA, rm(3))
	if r.Status != countersign.StatusPending {
		t.Fatalf("alice's window approved a delete routed to carol: %s", r.Status)
	}
	if _, err := e.svc.Decide(e.ctx, carol, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: 30}); err != nil {
		t.Fatal(err)
	}
	if r := e.create(e.keyA, rm(4)); r.Status != countersign.StatusApproved {
		t.Fatalf("carol's window: %s, want approved", r.Status)
	}
}

// TestQuorumCountsCurrentApprovers: a vote counts only while its approver
// may still decide the request: alice's vote does not count once she is
// a viewer, nor once she is out of the account and back as a new
// approver of the same name, whose own vote would otherwise make one
// person two.
func TestQuorumCountsCurrentApprovers(t *testing.T) {
	approve := countersign.DecisionInput{Decision: countersign.DecisionApprove}
	t.Run("viewer", func(t *testing.T) {
		e, carol, _ := teamEnv(t, "")
		r := e.create(e.keyA, e.toolCall("deploy-prod", ""))
		if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, approve); err != nil {
			t.Fatal(err)
		}
		if err := e.world.Admin.SetRole(e.ctx, "acme", "alice", countersign.RoleViewer); err != nil {
			t.Fatal(err)
		}
		// Carol alone may decide now: her vote is refused as out of reach
		// of the quorum, and alice's does not make up the second.
		_, err := e.svc.Decide(e.ctx, carol, r.ID, approve)
		wantCode(t, "carol's vote after alice became a viewer", err, countersign.ECONFLICT)
		e.wantStatus(r.ID, countersign.StatusPending)
	})
	t.Run("removed and made again", func(t *testing.T) {
		e, _, _ := teamEnv(t, "")
		r := e.create(e.keyA, e.toolCall("deploy-prod", ""))
		if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, approve); err != nil {
			t.Fatal(err)
		}
		if _, err := e.world.Admin.RemoveApprover(e.ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		again := e.newApprover("alice", "acme")
		if got, err := e.svc.Decide(e.ctx, again, r.ID, approve); err != nil || got.Status != countersign.StatusPending {
			t.Fatalf("the new alice's vote: %v %v, want pending", got, err)
		}
	})
}

// TestTeamOfCountsCurrentApprovers: the inbox shows only the votes that
// count.
func TestTeamOfCountsCurrentApprovers(t *testing.T) {
	e, carol, _ := teamEnv(t, "")
	r := e.create(e.keyA, e.toolCall("deploy-prod", ""))
	if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove}); err != nil {
		t.Fatal(err)
	}
	if err := e.world.Admin.SetRole(e.ctx, "acme", "alice", countersign.RoleViewer); err != nil {
		t.Fatal(err)
	}
	if team, err := e.svc.TeamOf(e.ctx, carol, r); err != nil || len(team.Votes) != 0 {
		t.Fatalf("TeamOf after alice became a viewer: %+v %v, want no vote that counts", team, err)
	}
}

// TestQuorumStopEndsVotes: a stop of the agent's session ends the votes
// given before it, as it ends the approvals: after alice's vote the
// session is stopped on another request, and carol's vote alone does not
// approve; two votes after the stop do.
func TestQuorumStopEndsVotes(t *testing.T) {
	e, carol, _ := teamEnv(t, "")
	approve := countersign.DecisionInput{Decision: countersign.DecisionApprove}
	r := e.create(e.keyA, e.toolCall("deploy-prod", "s1"))
	if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, approve); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	other := e.create(e.keyA, e.toolCall("Bash", "s1"))
	if _, err := e.svc.Decide(e.ctx, e.alice, other.ID, countersign.DecisionInput{Decision: countersign.DecisionStop}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Second)
	if got, err := e.svc.Decide(e.ctx, carol, r.ID, approve); err != nil || got.Status != countersign.StatusPending {
		t.Fatalf("carol's vote after the stop: %v %v, want pending", got, err)
	}
	if team, err := e.svc.TeamOf(e.ctx, carol, r); err != nil || len(team.Votes) != 1 || team.Votes[0].Username != "carol" {
		t.Fatalf("TeamOf after the stop: %+v %v, want carol's vote alone", team, err)
	}
}

// TestQuorumOutOfReach: when fewer approvers may decide than the quorum
// needs (one the rule names was taken out of the account), an approval is
// refused with the reason and records nothing; a deny still ends the
// request.
func TestQuorumOutOfReach(t *testing.T) {
	e, carol, _ := teamEnv(t, "")
	r := e.create(e.keyA, e.toolCall("deploy-prod", ""))
	if _, err := e.world.Admin.RemoveMembership(e.ctx, "alice", "acme"); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.Decide(e.ctx, carol, r.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove})
	wantCode(t, "a vote out of reach of the quorum", err, countersign.ECONFLICT)
	if !strings.Contains(err.Error(), "only 1 approver of the account may give") {
		t.Fatalf("refusal: %v", err)
	}
	if votes, err := e.store.Votes(e.ctx, r.ID); err != nil || len(votes) != 0 {
		t.Fatalf("votes: %+v %v, want none", votes, err)
	}
	if got, err := e.svc.Decide(e.ctx, carol, r.ID, countersign.DecisionInput{Decision: countersign.DecisionDeny}); err != nil || got.Status != countersign.StatusDenied {
		t.Fatalf("carol's deny: %v %v", got, err)
	}
}

// TestSeparateWords: the refusals of a rule that keeps the key's maker
// apart with a quorum of one say so, not "1 approvers".
func TestSeparateWords(t *testing.T) {
	e, _, _ := teamEnv(t, "\n[[rule]]\naccount = \"acme\"\nkind = \"mcp\"\nseparate = true\n")
	m := e.create(e.keyA, countersign.CreateInput{Kind: countersign.KindMCP, Action: "post", Tier: countersign.TierWrite, Context: countersign.RequestContext{SessionID: "s1"}})
	_, err := e.svc.DecideByElicitation(e.ctx, e.keyA, m.ID, true)
	wantCode(t, "the client's answer", err, countersign.EFORBIDDEN)
	if strings.Contains(err.Error(), "1 approvers") || !strings.Contains(err.Error(), "did not make the agent key") {
		t.Fatalf("refusal: %v", err)
	}
	_, err = e.svc.Decide(e.ctx, e.alice, m.ID, countersign.DecisionInput{Decision: countersign.DecisionApprove, AutoApproveMinutes: 5})
	wantCode(t, "a window", err, countersign.EINVALID)
	if strings.Contains(err.Error(), "1 approvers") {
		t.Fatalf("refusal: %v", err)
	}
}

// racingStore runs before, once, just as the service hands a vote to the
// store: what a removal or a stop committed by another approver at that
// moment looks like.
type racingStore struct {
	countersign.Store
	before func()
}

func (s *racingStore) Vote(ctx context.Context, v countersign.VoteInput, voted, approved countersign.AuditEvent) (*countersign.Request, []countersign.Vote, error) {
	if f := s.before; f != nil {
		s.before = nil
		f()
	}
	return s.Store.Vote(ctx, v, voted, approved)
}

// TestQuorumRacesRemovalAndStop: who counts and the session's last stop
// are read in the vote's own transaction. alice's vote stops counting when
// she is made a viewer, or the agent's session is stopped, between the
// service's checks and carol's vote reaching the store: carol's vote then
// leaves the request pending.
func TestQuorumRacesRemovalAndStop(t *testing.T) {
	approve := countersign.DecisionInput{Decision: countersign.DecisionApprove}
	for name, race := range map[string]func(e *env, session string){
		"made a viewer": func(e *env, _ string) {
			if err := e.world.Admin.SetRole(e.ctx, "acme", "alice", countersign.RoleViewer); err != nil {
				t.Fatal(err)
			}
		},
		"session stopped": func(e *env, session string) {
			other := e.create(e.keyA, e.toolCall("Bash", session))
			if _, err := e.svc.Decide(e.ctx, e.alice, other.ID, countersign.DecisionInput{Decision: countersign.DecisionStop}); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Second)
		},
	} {
		t.Run(name, func(t *testing.T) {
			// dave is in sre too, so that the quorum stays in reach of
			// the service's own check when alice is made a viewer.
			e := newEnv(t, approval.Config{})
			carol := e.newApprover("carol", "acme")
			e.newApprover("dave", "acme")
			f, err := teamsFile(t, "[groups]\nsre = [\"alice\", \"carol\", \"dave\"]\n\n[[rule]]\naccount = \"acme\"\ntool = \"deploy*\"\napprovers = [\"group:sre\"]\nquorum = 2\n")
			if err != nil {
				t.Fatal(err)
			}
			teams, err := f.Resolve(e.ctx, e.store)
			if err != nil {
				t.Fatal(err)
			}
			racing := &racingStore{Store: e.store}
			e.svc = approval.New(racing, e.clock, e.hub, approval.Config{Teams: teams}, nil, nil)
			r := e.create(e.keyA, e.toolCall("deploy-prod", "s1"))
			if _, err := e.svc.Decide(e.ctx, e.alice, r.ID, approve); err != nil {
				t.Fatal(err)
			}
			e.clock.Advance(time.Second)
			racing.before = func() { race(e, "s1") }
			got, err := e.svc.Decide(e.ctx, carol, r.ID, approve)
			if err != nil || got.Status != countersign.StatusPending {
				t.Fatalf("carol's vote, raced: %+v %v; want pending, alice's vote no longer counting", got, err)
			}
			e.wantStatus(r.ID, countersign.StatusPending)
		})
	}
}

// TestTeamsFingerprint: the fingerprint names what the rules decide, not
// how the file was laid out: the order of a rule's approvers does not
// change it, a quorum does, and no rules are approval.NoTeams.
func TestTeamsFingerprint(t *testing.T) {
	t.Parallel()
	rule := func(approvers []string, quorum int) *approval.Teams {
		return &approval.Teams{Rules: []approval.TeamRule{{AccountID: "acc_1", Kind: countersign.KindTool, Approvers: approvers, Route: "group:sre", Quorum: quorum}}}
	}
	a := rule([]string{"alice", "carol"}, 2).Fingerprint()
	if b := rule([]string{"carol", "alice"}, 2).Fingerprint(); b != a {
		t.Errorf("the approvers' order changed the fingerprint: %s, %s", a, b)
	}
	if c := rule([]string{"alice", "carol"}, 1).Fingerprint(); c == a {
		t.Errorf("a quorum of 1 has the fingerprint of a quorum of 2")
	}
	if len(a) != 64 {
		t.Errorf("fingerprint %q, want 64 hex digits", a)
	}
	var none *approval.Teams
	if none.Fingerprint() != approval.NoTeams || (&approval.Teams{}).Fingerprint() != approval.NoTeams {
		t.Errorf("no rules: %q, %q", none.Fingerprint(), (&approval.Teams{}).Fingerprint())
	}
}
