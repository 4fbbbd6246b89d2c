package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/client/api"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/store/postgres"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// teamsReplica starts a replica on url that runs the teams configuration
// *teams, as countersign serve does: it records its fingerprint in the
// store at start (approval.RecordTeams), and checks the store's before
// each decision. A Restart reads *teams again.
func teamsReplica(t *testing.T, url, appName string, of *testserver.Server, teams **approval.Teams, logs *testutil.LogBuffer) (*testserver.Server, *postgres.DB) {
	t.Helper()
	store, err := postgres.Open(t.Context(), url+"&application_name="+appName, nil)
	if err != nil {
		t.Fatalf("open replica %s: %v", appName, err)
	}
	t.Cleanup(func() { store.Close() })
	on := testserver.OnStore(store)
	if of != nil {
		on = testserver.ReplicaOf(of, store)
	}
	s := testserver.New(t, on, testserver.At(time.Now()), testserver.WallClock(),
		testserver.Approval(func(s *testserver.Server, c *approval.Config) {
			c.Teams = *teams
			shared, err := approval.RecordTeams(context.Background(), s.Store, c.Teams, slog.New(slog.NewTextHandler(logs, nil)))
			if err != nil {
				t.Fatalf("record the teams configuration of %s: %v", appName, err)
			}
			c.SharedTeams = shared
		}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Service.FollowReplicas(ctx, store) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("FollowReplicas of %s: %v", appName, err)
		}
	})
	return s, store
}

// TestReplicasOfOtherTeamsDecideNothing: replica A runs no teams file,
// replica B, started after it, a rule that needs the approvals of alice
// and carol. A decision through A, which would approve the request on its
// own, is refused with a clear error and changes nothing (no vote, still
// pending), while B counts the votes. Once A is restarted with B's file,
// decisions through A work again: alice's vote there and carol's on B
// approve the request.
func TestReplicasOfOtherTeamsDecideNothing(t *testing.T) {
	url := postgres.Migrated.SchemaURL(t)
	var none *approval.Teams
	quorum := &approval.Teams{Rules: []approval.TeamRule{{Kind: countersign.KindGeneric,
		Approvers: []string{"alice", "carol"}, Route: "group:sre", Quorum: 2}}}
	teamsA := none
	var logsA, logsB testutil.LogBuffer
	a, storeA := teamsReplica(t, url, "teams-a", nil, &teamsA, &logsA)
	if _, err := a.Admin.CreateApprover(a.Ctx, "acme", "carol", testutil.Password, countersign.RoleApprover); err != nil {
		t.Fatal(err)
	}
	carol := a.Token("carol", "acme")
	b, _ := teamsReplica(t, url, "teams-b", a, &quorum, &logsB)
	if !strings.Contains(logsB.String(), "the teams configuration changed: replicas still running the earlier one decide nothing") {
		t.Errorf("B's log does not say that the configuration changed:\n%s", logsB.String())
	}

	r := createOn(t, client.New(a.URL, a.AgentKey), 1)
	aliceOnA := client.New(a.URL, a.ApproverToken)
	// B's start committed before anything asked A: A reads B's
	// fingerprint at its first decision.
	for _, d := range []string{"approve", "deny"} {
		_, err := aliceOnA.Decide(t.Context(), r.ID, client.Decision{Decision: d})
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || ae.Code != countersign.EUNAVAILABLE ||
			!strings.Contains(ae.Message, "this replica's teams file differs from the one the other replicas run") ||
			!strings.Contains(ae.Message, "configuration is none") || !strings.Contains(ae.Message, approval.ShortFingerprint(quorum.Fingerprint())) {
			t.Fatalf("A's answer to %s: %v", d, err)
		}
	}
	got, err := client.New(b.URL, a.AgentKey).Get(t.Context(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "pending" || got.DecidedBy != "" {
		t.Fatalf("after A's refusals: %s by %q, want pending", got.Status, got.DecidedBy)
	}

	// B counts: alice's vote leaves the request pending, so A's refused
	// approval counted for nothing.
	if got, err := client.New(b.URL, a.ApproverToken).Decide(t.Context(), r.ID, client.Decision{Decision: "approve"}); err != nil || got.Status != "pending" {
		t.Fatalf("alice's vote on B: %v, %v", got, err)
	}

	// A restarts with B's file: both decide, under one configuration.
	teamsA = quorum
	a.Restart(t, storeA)
	r2 := createOn(t, client.New(a.URL, a.AgentKey), 2)
	got, err = aliceOnA.Decide(t.Context(), r2.ID, client.Decision{Decision: "approve"})
	if err != nil || got.Status != "pending" {
		t.Fatalf("alice's vote on A after its restart: %v, %v", got, err)
	}
	got, err = client.New(b.URL, carol).Decide(t.Context(), r2.ID, client.Decision{Decision: "approve"})
	if err != nil || got.Status != "approved" || got.DecidedBy != "alice, carol" {
		t.Fatalf("carol's vote on B: %v, %v", got, err)
	}

	// A keeps the recorded fingerprint while its feed listens; replica C,
	// started with no teams file, changes it, and A hears of it: its
	// decisions are refused again.
	var logsC testutil.LogBuffer
	teamsReplica(t, url, "teams-c", a, &none, &logsC)
	agentA := client.New(a.URL, a.AgentKey)
	n := 3
	testutil.Eventually(t, func() bool {
		r := createOn(t, agentA, n)
		n++
		_, err := aliceOnA.Decide(t.Context(), r.ID, client.Decision{Decision: "deny"})
		var ae *api.Error
		if err == nil {
			return false // decided before A heard of C's start
		}
		if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(ae.Message, "the store's (the last replica started) is none") {
			t.Fatalf("A's answer after C's start: %v", err)
		}
		return true
	}, "A refuses decisions once C started with another teams file")
}

// TestServeReplicaWithoutTeamsFile: two real `countersign serve` processes
// on one database; B, started after A, runs a teams file that routes the
// account's generic requests to admin. A, started without it, refuses
// decisions with 503 and the reason, and the request stays pending; B
// decides it. B logs that the configuration changed.
func TestServeReplicaWithoutTeamsFile(t *testing.T) {
	url := postgres.Migrated.SchemaURL(t)
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if out, err := exec.Command(binary(t), "secret-key", "create", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("secret-key create: %v %q", err, out)
	}
	teams := filepath.Join(t.TempDir(), "teams.toml")
	if err := os.WriteFile(teams, []byte("[[rule]]\naccount = \"default\"\nkind = \"generic\"\napprovers = [\"admin\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startServe(t, "replica A", url, keyFile)
	b := startServe(t, "replica B", url, keyFile, "--teams-config", teams)
	if !strings.Contains(b.stderr.String(), "the teams configuration changed") {
		t.Errorf("B's log:\n%s", b.stderr)
	}
	cmd := exec.Command(binary(t), "token", "create", "--database-url", url, "--secret-key-file", keyFile, "--approver", "admin", "--json")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.Output()
	var tok struct{ Token string }
	if err != nil || json.Unmarshal(out, &tok) != nil {
		t.Fatalf("token create: %v %q", err, out)
	}

	r := createOn(t, client.New(a.URL, a.agentKey), 1)
	_, err = client.New(a.URL, tok.Token).Decide(t.Context(), r.ID, client.Decision{Decision: "approve"})
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable || !strings.Contains(ae.Message, "this replica's teams file differs from the one the other replicas run") {
		t.Fatalf("decision on A: %v", err)
	}
	if got, err := client.New(b.URL, a.agentKey).Get(t.Context(), r.ID); err != nil || got.Status != "pending" {
		t.Fatalf("after A's refusal: %+v, %v", got, err)
	}
	if got, err := client.New(b.URL, tok.Token).Decide(t.Context(), r.ID, client.Decision{Decision: "approve"}); err != nil || got.Status != "approved" {
		t.Fatalf("decision on B: %+v, %v", got, err)
	}
}
