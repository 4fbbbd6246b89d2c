package gateway_test

import (
	"slices"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/identity"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRequestsCarryTheTier: a call of the commit tier and one of the
// external tier, through /mcp and through the stdio gateway asking the
// server over the API, file requests that carry the tier as a fact, show
// it to the human in words ("tier: commit", never a control character)
// and give it in words in the API.
func TestRequestsCarryTheTier(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, token, err := (&identity.Admin{Store: h.store}).CreateApproverToken(h.ctx, "alice", "acme", "tiers")
	if err != nil {
		t.Fatal(err)
	}
	api := client.New(h.base, token)
	g, _ := h.stdioGateway("agent2")
	sessions := map[string]*mcp.ClientSession{"/mcp": h.connect(clientOpts{}), "countersign mcp": stdioConnect(t, g, clientOpts{})}
	for via, cs := range sessions {
		for _, c := range []struct {
			tool string
			tier countersign.Tier
			args map[string]any
		}{
			{"delete_note", countersign.TierCommit, map[string]any{"id": "n1"}},
			{"send_mail", countersign.TierExternal, map[string]any{"to": "ada@example.com", "body": "hi"}},
		} {
			wantStatus(t, call(t, cs, c.tool, c.args), "approval_pending")
			r := h.pending(c.tool)
			if r.Tier != c.tier || !slices.Equal(r.RiskReasons, []string{"tier: " + string(c.tier)}) {
				t.Errorf("%s %s: tier %q, reasons %q; want %q and the reason in words", via, c.tool, r.Tier, r.RiskReasons, c.tier)
			}
			list, err := api.List(h.ctx, "pending", 10)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(list, func(x *client.Request) bool { return x.ID == r.ID })
			if i < 0 || list[i].Tier != string(c.tier) || !slices.Equal(list[i].RiskReasons, r.RiskReasons) {
				t.Errorf("%s %s: the API lists %+v, want tier %q", via, c.tool, list, c.tier)
			}
			h.decide(r.ID, countersign.DecisionDeny)
		}
	}
}
