package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/store/sqlite"
)

// TestResolveKeys: a [keys] entry is an agent key of one account, named
// ACCOUNT/NAME or by id; one that names no live key, or a key another entry
// names, is refused at load with a message that says which and why, and a
// key of the same name in another account never gets the policy.
func TestResolveKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	admin := &identity.Admin{Store: store}
	for _, a := range []string{"acme", "other"} {
		if _, err := admin.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	acmeCI, _, err := admin.CreateAgentKey(ctx, "acme", "ci")
	if err != nil {
		t.Fatal(err)
	}
	otherCI, _, err := admin.CreateAgentKey(ctx, "other", "ci")
	if err != nil {
		t.Fatal(err)
	}
	old, _, err := admin.CreateAgentKey(ctx, "acme", "old")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.RevokeAgentKey(ctx, old.AccountID, old.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	load := func(keys string) (*Config, error) {
		file := filepath.Join(t.TempDir(), "mcp.toml")
		os.WriteFile(file, []byte("[policy]\nconfirm = [\"commit\"]\n"+keys), 0o600)
		c, err := LoadConfig(file)
		if err != nil {
			t.Fatal(err)
		}
		return c, c.ResolveKeys(ctx, store)
	}
	principal := func(k *countersign.AgentKey) Principal {
		return PrincipalOf(countersign.Agent{KeyID: k.ID, AccountID: k.AccountID, KeyName: k.Name})
	}

	c, err := load("[keys.\"acme/ci\"]\nconfirm = []\n[keys." + otherCI.ID + "]\ntiers = [\"read\"]\n")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.PolicyFor(principal(acmeCI)); p.Confirm != 0 || p.Tiers != AllTiers {
		t.Errorf("acme/ci: tiers %v, confirm %v", p.Tiers, p.Confirm)
	}
	if p := c.PolicyFor(principal(otherCI)); p.Confirm != Tiers(TierCommit) || p.Tiers != Tiers(TierRead) {
		t.Errorf("other/ci (by id): tiers %v, confirm %v", p.Tiers, p.Confirm)
	}
	c, err = load("[keys.\"acme/ci\"]\nconfirm = []\n")
	if err != nil {
		t.Fatal(err)
	}
	if p := c.PolicyFor(principal(otherCI)); p.Confirm != Tiers(TierCommit) {
		t.Errorf("the other account's ci got acme/ci's policy: confirm %v", p.Confirm)
	}

	for name, tc := range map[string]struct{ keys, want string }{
		"bare name":    {"[keys.ci]\n", `[keys."ci"]: no agent key has the id "ci"; name keys as "ACCOUNT/NAME" or by id, since a key's name is unique only within its account; keys of that name: [keys."acme/ci"], [keys."other/ci"]`},
		"no account":   {"[keys.\"nobody/ci\"]\n", `[keys."nobody/ci"]: no account "nobody" has an agent key "ci"`},
		"no key":       {"[keys.\"acme/cd\"]\n", `[keys."acme/cd"]: no account "acme" has an agent key "cd"`},
		"unknown id":   {"[keys.key_nosuchkey]\n", `[keys."key_nosuchkey"]: no agent key has the id "key_nosuchkey"`},
		"revoked":      {"[keys.\"acme/old\"]\n", `[keys."acme/old"]: the agent key it names is revoked`},
		"same key":     {"[keys.\"acme/ci\"]\n[keys." + acmeCI.ID + "]\n", `it names the same agent key as [keys."acme/ci"]`},
		"another's id": {"[keys.\"other/" + acmeCI.ID + "\"]\n", `no account "other" has an agent key "` + acmeCI.ID + `"`},
	} {
		_, err := load(tc.keys)
		if err == nil || countersign.ErrorCode(err) != countersign.EINVALID || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "mcp.toml: ") {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}

	// A gateway refuses a configuration whose [keys] were never checked.
	c, _ = load("[keys.\"acme/ci\"]\n")
	c.byKey = nil
	if _, err := New(c, nil, Options{}); err == nil || !strings.Contains(err.Error(), "not checked") {
		t.Errorf("unchecked [keys]: %v", err)
	}
}
