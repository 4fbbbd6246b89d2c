package sqlite_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// TestRestartWithOtherTeams: one server runs on a data directory, so its
// teams configuration is the one that decides, whatever it was before:
// a restart with another teams file works, records the new fingerprint,
// logs the change, and decides under the new rules (a vote, where the
// first start approved at once).
func TestRestartWithOtherTeams(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "countersign.db")
	store, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.LogBuffer
	var teams *approval.Teams
	s := testserver.New(t, testserver.OnStore(store), testserver.Approval(func(s *testserver.Server, c *approval.Config) {
		c.Teams = teams
		shared, err := approval.RecordTeams(context.Background(), s.Store, c.Teams, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatalf("record the teams configuration: %v", err)
		}
		if shared != nil {
			t.Fatalf("a store of one server is asked before each decision")
		}
		c.SharedTeams = shared
	}))
	t.Cleanup(func() { store.Close() })
	if fp, err := store.TeamsFingerprint(t.Context()); err != nil || fp != approval.NoTeams {
		t.Fatalf("recorded at the first start: %q, %v", fp, err)
	}
	agent, approver := client.New(s.URL, s.AgentKey), client.New(s.URL, s.ApproverToken)
	create := func(n string) *client.Request {
		r, _, err := agent.Create(t.Context(), client.CreateInput{Kind: "generic", Action: "deploy", Arguments: []byte(`{"n":` + n + `}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got, err := approver.Decide(t.Context(), create("1").ID, client.Decision{Decision: "approve"}); err != nil || got.Status != "approved" {
		t.Fatalf("without teams: %v, %v", got, err)
	}

	if _, err := s.Admin.CreateApprover(s.Ctx, "acme", "carol", testutil.Password, countersign.RoleApprover); err != nil {
		t.Fatal(err)
	}
	teams = &approval.Teams{Rules: []approval.TeamRule{{Kind: countersign.KindGeneric, Approvers: []string{"alice", "carol"}, Route: "alice, carol", Quorum: 2}}}
	s.Restart(t, store)
	if fp, err := store.TeamsFingerprint(t.Context()); err != nil || fp != teams.Fingerprint() || fp == approval.NoTeams {
		t.Fatalf("recorded at the restart: %q, %v; want %q", fp, err, teams.Fingerprint())
	}
	if !strings.Contains(logs.String(), "the teams configuration changed since the last start") || !strings.Contains(logs.String(), approval.ShortFingerprint(teams.Fingerprint())) {
		t.Errorf("the restart's log:\n%s", logs.String())
	}
	if got, err := approver.Decide(t.Context(), create("2").ID, client.Decision{Decision: "approve"}); err != nil || got.Status != "pending" {
		t.Fatalf("alice's vote after the restart: %v, %v", got, err)
	}
}
