package storetest

import (
	"slices"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

// oldRequest is a request as a version before the typed facts stored it:
// its risk reasons as they were written, and what migrating it must give.
type oldRequest struct {
	name      string
	kind      countersign.Kind
	reasons   []string
	tier      countersign.Tier // after the migration
	protected bool             // after the migration
	shown     []string         // the reasons after the migration
}

// oldRequests are the requests that the version before the typed facts
// stored: the MCP gateway wrote a call's tier as a control character
// ("tier: \x02"), and the rm wrapper and the hook said a delete was
// protected only in a reason.
var oldRequests = []oldRequest{
	{"a commit call", countersign.KindMCP, []string{"tier: \x02"}, countersign.TierCommit, false, []string{"tier: commit"}},
	{"an external call", countersign.KindMCP, []string{"tier: \x03"}, countersign.TierExternal, false, []string{"tier: external"}},
	// A write call keeps an unknown tier: every rule on tiers treats it
	// as the riskiest, rather than trust a reason to lower it.
	{"a write call", countersign.KindMCP, []string{"tier: \x01"}, "", false, []string{"tier: write"}},
	{"a call of no tier", countersign.KindMCP, nil, "", false, nil},
	{"a call that said commit", countersign.KindMCP, []string{"tier: commit"}, countersign.TierCommit, false, []string{"tier: commit"}},
	{"a protected delete", countersign.KindRm, []string{"recursive deletion (-r/-R)", "protected path: /etc (inside /)"}, "", true,
		[]string{"recursive deletion (-r/-R)", "protected path: /etc (inside /)"}},
	{"a plain delete", countersign.KindRm, []string{"recursive deletion (-r/-R)"}, "", false, []string{"recursive deletion (-r/-R)"}},
	{"the hook's protected delete", countersign.KindTool, []string{"protected path: ~/.ssh"}, "", true, []string{"protected path: ~/.ssh"}},
	{"a tool call naming a tier", countersign.KindTool, []string{"tier: \x02"}, "", false, []string{"tier: \x02"}},
}

// OldRequests stores, in a store whose schema will be taken back to before
// the typed facts, the requests of such a version, and returns the check
// to run once the migration that adds the facts has run again:
//
//	check := storetest.OldRequests(t, s)
//	// drop the columns tier and protected, run the migration's SQL
//	check(t, reopened)
func OldRequests(t *testing.T, s countersign.Store) (check func(t *testing.T, s countersign.Store)) {
	t.Helper()
	account := mustAccount(t, s, "acme")
	key := mustKey(t, s, account, "laptop")
	ids := make([]string, len(oldRequests))
	for i, o := range oldRequests {
		r := newRequest(key, "call", `{"n":`+string(rune('0'+i))+`}`, "call")
		r.Kind, r.RiskReasons = o.kind, o.reasons
		ids[i] = create(t, s, r, Base).ID
	}
	return func(t *testing.T, s countersign.Store) {
		t.Helper()
		for i, o := range oldRequests {
			r, err := s.Request(t.Context(), ids[i])
			if err != nil {
				t.Fatalf("%s: %v", o.name, err)
			}
			if r.Tier != o.tier || r.Protected != o.protected || !slices.Equal(r.RiskReasons, o.shown) {
				t.Errorf("%s after the migration: tier %q, protected %v, reasons %q; want %q, %v, %q",
					o.name, r.Tier, r.Protected, r.RiskReasons, o.tier, o.protected, o.shown)
			}
			// Fail closed: what needed a passkey by its reasons needs one
			// by its facts, and so does every MCP call of unknown tier.
			needs := o.kind == countersign.KindMCP || o.protected
			if got := approval.DefaultStepUp.Matches(r); got != needs {
				t.Errorf("%s after the migration: the default step-up policy names it: %v, want %v", o.name, got, needs)
			}
		}
	}
}
