package gateway

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/countersign/countersign"
)

// KeyDirectory is what resolving the [keys] of a configuration needs of a
// store; countersign.Store has it.
type KeyDirectory interface {
	// Accounts lists all accounts.
	Accounts(ctx context.Context) ([]*countersign.Account, error)
	// AgentKeys lists an account's keys.
	AgentKeys(ctx context.Context, accountID string) ([]*countersign.AgentKey, error)
}

// keyRef is an agent key as its policy is found again: a key name is unique
// only within its account.
type keyRef struct{ account, name string }

// ResolveKeys finds the agent key each [keys] entry names, "ACCOUNT/NAME"
// or a key id, in the store. An entry that names no live key, more than
// one, or a key another entry already names is refused, with a message that
// says so: a policy that would fall on another key, or on none, must not
// start.
func (c *Config) ResolveKeys(ctx context.Context, dir KeyDirectory) error {
	if len(c.Keys) == 0 {
		c.byKey = map[keyRef]Policy{}
		return nil
	}
	accounts, err := dir.Accounts(ctx)
	if err != nil {
		return fmt.Errorf("list accounts for the MCP gateway's [keys]: %w", err)
	}
	var all []foundKey
	for _, a := range accounts {
		keys, err := dir.AgentKeys(ctx, a.ID)
		if err != nil {
			return fmt.Errorf("list the agent keys of %q for the MCP gateway's [keys]: %w", a.Name, err)
		}
		for _, k := range keys {
			all = append(all, foundKey{account: a.Name, key: k})
		}
	}
	names := make([]string, 0, len(c.Keys))
	for name := range c.Keys {
		names = append(names, name)
	}
	sort.Strings(names)
	byKey := map[keyRef]Policy{}
	entryOf := map[keyRef]string{}
	for _, entry := range names {
		account, keyName, byName := strings.Cut(entry, "/")
		var matches, revoked []foundKey
		for _, f := range all {
			if (byName && f.account == account && f.key.Name == keyName) || (!byName && f.key.ID == entry) {
				if f.key.Revoked() {
					revoked = append(revoked, f)
				} else {
					matches = append(matches, f)
				}
			}
		}
		switch {
		case len(matches) > 1:
			return c.keyError(entry, "it matches %d agent keys; name one by its id", len(matches))
		case len(matches) == 0 && len(revoked) > 0:
			return c.keyError(entry, "the agent key it names is revoked; remove the entry")
		case len(matches) == 0 && byName:
			return c.keyError(entry, "no account %q has an agent key %q", account, keyName)
		case len(matches) == 0:
			return c.keyError(entry, "no agent key has the id %q; name keys as \"ACCOUNT/NAME\" or by id, since a key's name is unique only within its account%s",
				entry, sameName(all, entry))
		}
		k := matches[0].key
		ref := keyRef{account: k.AccountID, name: k.Name}
		if other, ok := entryOf[ref]; ok {
			return c.keyError(entry, "it names the same agent key as [keys.%q]", other)
		}
		entryOf[ref], byKey[ref] = entry, c.Keys[entry]
	}
	c.byKey = byKey
	return nil
}

// foundKey is an agent key with its account's name.
type foundKey struct {
	account string
	key     *countersign.AgentKey
}

// sameName suggests the entries that name the live keys called name, for a
// [keys] entry written as a bare name.
func sameName(all []foundKey, name string) string {
	var out []string
	for _, f := range all {
		if f.key.Name == name && !f.key.Revoked() {
			out = append(out, fmt.Sprintf("[keys.%q]", f.account+"/"+name))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; keys of that name: " + strings.Join(out, ", ")
}

func (c *Config) keyError(entry, format string, args ...any) error {
	return countersign.Errorf(countersign.EINVALID, "%sthe MCP gateway configuration: [keys.%q]: %s",
		c.SourcePrefix(), entry, fmt.Sprintf(format, args...))
}

// SourcePrefix is "FILE: " of a configuration read from a file, for its
// errors.
func (c *Config) SourcePrefix() string {
	if c.Source == "" {
		return ""
	}
	return c.Source + ": "
}
