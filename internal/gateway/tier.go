package gateway

import (
	"fmt"
	"path"
	"strings"

	"github.com/countersign/countersign"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tier is a class of MCP tools by what a call can do, from reading to
// reaching the outside world. The order matters: a higher tier is riskier.
type Tier uint8

// The tiers.
const (
	TierRead     Tier = iota // reads, changes nothing
	TierWrite                // changes something that can be undone
	TierCommit               // changes something for good (deletes, overwrites, books)
	TierExternal             // reaches the outside world (sends, publishes, pays)
	numTiers
)

var tierNames = [numTiers]string{"read", "write", "commit", "external"}

// String returns the tier's name.
func (t Tier) String() string {
	if t < numTiers {
		return tierNames[t]
	}
	return fmt.Sprintf("tier(%d)", uint8(t))
}

// Fact is the tier as a request carries it (countersign.Tier): its name.
// A tier is never converted with string(t), which, t being a number,
// makes a control character, not the name.
func (t Tier) Fact() countersign.Tier { return countersign.Tier(t.String()) }

// ParseTier reads a tier's name.
func ParseTier(s string) (Tier, error) {
	for i, n := range tierNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Tier(i), nil
		}
	}
	return 0, fmt.Errorf("unknown tier %q: use read, write, commit or external", s)
}

// UnmarshalText lets a configuration file name a tier.
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// MarshalText writes the tier's name.
func (t Tier) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// TierSet is a set of tiers.
type TierSet uint8

// AllTiers holds every tier.
const AllTiers TierSet = 1<<numTiers - 1

// Tiers returns the set of the tiers given.
func Tiers(list ...Tier) TierSet {
	var s TierSet
	for _, t := range list {
		s |= 1 << t
	}
	return s
}

// Has reports whether t is in the set.
func (s TierSet) Has(t Tier) bool { return s&(1<<t) != 0 }

// String lists the set's tiers, lowest first.
func (s TierSet) String() string {
	var names []string
	for t := range numTiers {
		if s.Has(t) {
			names = append(names, t.String())
		}
	}
	return strings.Join(names, ",")
}

// AnnotationTier is the tier the annotations of a tool suggest. A tool
// without annotations takes every default of the specification, which is
// the pessimistic reading: not read-only, destructive and open world, so
// external. Read-only wins over the rest (destructiveHint means nothing on
// a read-only tool); then an open world makes it external, a destructive
// one commit, and anything else is write.
func AnnotationTier(a *mcp.ToolAnnotations) Tier {
	if a == nil {
		return TierExternal
	}
	if a.ReadOnlyHint {
		return TierRead
	}
	switch {
	case a.OpenWorldHint == nil || *a.OpenWorldHint:
		return TierExternal
	case a.DestructiveHint == nil || *a.DestructiveHint:
		return TierCommit
	}
	return TierWrite
}

// TierRule sets the tier of every tool whose name matches, with the
// wildcards of path.Match: its qualified name ("fs/write_file"), its
// prefixed name ("fs_write_file"), or its own name when the tool is exposed
// under it. A rule on a tool's own name that another upstream's tool of
// that name has made ambiguous never lowers the tier below the annotations'
// (see tierOf).
type TierRule struct {
	Match string `toml:"match"`
	Tier  Tier   `toml:"tier"`
}

// matches reports whether the rule covers the tool by the name given or by
// its qualified name.
func (r TierRule) matches(name, upstream, tool string) bool {
	return r.matchesName(name) || r.matchesName(upstream+"/"+tool)
}

// matchesName reports whether the rule's pattern matches name.
func (r TierRule) matchesName(name string) bool {
	ok, _ := path.Match(r.Match, name)
	return ok
}

// Policy says what one agent key may do: which tiers exist for it at all
// (a tool of another tier is neither listed nor callable) and which of
// those need a human's confirmation.
type Policy struct {
	Tiers   TierSet
	Confirm TierSet
	// ElicitationDecides makes the Accept of the key's MCP client to the
	// form elicitation of a call the approval of that call (countersign
	// serve only, set per key): for keys whose client is answered by a
	// person, as Claude Code's prompt is. A call that needs a passkey
	// still waits for the inbox.
	ElicitationDecides bool
}

// DefaultPolicy lets every tier exist and confirms commit and external.
func DefaultPolicy() Policy {
	return Policy{Tiers: AllTiers, Confirm: Tiers(TierCommit, TierExternal)}
}

// Sees reports whether the policy lets a tool of tier t exist.
func (p Policy) Sees(t Tier) bool { return p.Tiers.Has(t) }

// Confirms reports whether a call of tier t needs a human.
func (p Policy) Confirms(t Tier) bool { return p.Confirm.Has(t) }
