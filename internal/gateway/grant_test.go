package gateway

import (
	"testing"

	"github.com/countersign/countersign"
)

// TestGrantPolicy: a grant sees only the tiers its approver allowed, and
// commit and external need a human per call even where the configuration
// lets a key through without one.
func TestGrantPolicy(t *testing.T) {
	t.Parallel()
	lax := Policy{Tiers: AllTiers, Confirm: 0}
	g := &Gateway{cfg: &Config{Policy: lax, Keys: map[string]Policy{}}}
	grant := PrincipalOf(countersign.Agent{KeyID: "k", AccountID: "a", KeyName: "grt_x", GrantID: "grt_x", GrantTiers: []string{"read", "commit"}})
	pol := g.policy(grant)
	for tier, sees := range map[Tier]bool{TierRead: true, TierWrite: false, TierCommit: true, TierExternal: false} {
		if pol.Sees(tier) != sees {
			t.Errorf("the grant sees %s: %v, want %v", tier, pol.Sees(tier), sees)
		}
	}
	if !pol.Confirms(TierCommit) || !pol.Confirms(TierExternal) || pol.Confirms(TierRead) {
		t.Errorf("the grant's confirmations = %s", pol.Confirm)
	}
	key := PrincipalOf(countersign.Agent{KeyID: "k2", AccountID: "a", KeyName: "laptop"})
	if p := g.policy(key); p != lax {
		t.Errorf("an agent key's policy = %+v, want the configuration's", p)
	}
	// A grant whose key is named like a configured key does not take that
	// key's policy.
	g.cfg.Policy = Policy{Tiers: Tiers(TierRead), Confirm: 0}
	g.cfg.Keys["ci"] = Policy{Tiers: AllTiers, Confirm: 0}
	named := PrincipalOf(countersign.Agent{KeyID: "k3", AccountID: "a", KeyName: "ci", GrantID: "grt_y", GrantTiers: []string{"read", "write"}})
	if g.policy(named).Sees(TierWrite) {
		t.Error("a grant named like the key ci took its policy: it sees write, which the general policy hides")
	}
	// A tier the configuration hides stays hidden for a grant.
	g.cfg.Policy = Policy{Tiers: Tiers(TierRead), Confirm: 0}
	if g.policy(grant).Sees(TierCommit) {
		t.Error("the grant sees commit, which the configuration hides")
	}
}
