package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// TestSeedListsBehindNewerRequests: the seed routes list their requests
// however many newer v1 and MCP requests the account has, more than the
// longest list among them, rm ones of the v1 API included.
func TestSeedListsBehindNewerRequests(t *testing.T) {
	t.Parallel()
	e := sdNew(t)
	e.createDelete("del_old", "rm -rf /srv/old")
	e.createEvent("evt_old", "s-1", "Bash")

	key, err := e.Store.AgentKeyByHash(e.Ctx, countersign.HashSecret(e.plain))
	if err != nil {
		t.Fatal(err)
	}
	kinds := []countersign.Kind{countersign.KindRm, countersign.KindTool, countersign.KindMCP}
	for i := range 501 {
		at := e.Clock.Now().Add(time.Duration(i+1) * time.Millisecond)
		args := fmt.Sprintf(`{"i":%d}`, i)
		r := &countersign.Request{
			AccountID: key.AccountID, KeyID: key.ID, KeyName: key.Name, Reference: countersign.NewReference(),
			Kind: kinds[i%3], Action: "rm -rf /srv/new", Arguments: []byte(args), ArgsHash: args, Preview: args, PreviewHash: args,
			Status: countersign.StatusPending, CreatedAt: at, ExpiresAt: at.Add(10 * time.Minute),
		}
		if _, _, err := e.Store.CreateRequest(e.Ctx, r, 0, at, countersign.AuditEvent{Event: "created", Actor: "key:" + key.ID}); err != nil {
			t.Fatalf("CreateRequest %d: %v", i, err)
		}
	}

	for _, q := range []string{"", "?status=pending", "?limit=1"} {
		out := sdDecode(t, "list"+q, e.get("/api/delete-requests"+q, e.approver), http.StatusOK)
		if got := sdIDs(sdItems(t, "list"+q, out, "requests")); !slices.Equal(got, []string{"del_old"}) {
			t.Errorf("delete requests%s: %v, want [del_old]", q, got)
		}
		out = sdDecode(t, "events"+q, e.get("/api/claude-events"+q, e.approver), http.StatusOK)
		if got := sdIDs(sdItems(t, "events"+q, out, "events")); !slices.Equal(got, []string{"evt_old"}) {
			t.Errorf("claude events%s: %v, want [evt_old]", q, got)
		}
	}
	out := sdDecode(t, "approved", e.get("/api/delete-requests?status=approved", e.approver), http.StatusOK)
	if got := sdIDs(sdItems(t, "approved", out, "requests")); len(got) != 0 {
		t.Errorf("approved delete requests: %v, want none", got)
	}
	out = sdDecode(t, "unknown status", e.get("/api/claude-events?status=maybe", e.approver), http.StatusOK)
	if got := sdIDs(sdItems(t, "unknown status", out, "events")); len(got) != 0 {
		t.Errorf("claude events of an unknown status: %v, want none", got)
	}
}
