package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/countersign/countersign"
)

// Teams says which approvers may decide which requests, and which
// requests need the approvals of several of them: the rules of the
// server's teams configuration, first match wins. A request no rule
// matches is decided as always, by any approver of its account whose role
// decides, and the first decision wins. The zero value has no rules.
type Teams struct {
	Rules []TeamRule
}

// TeamRule is one rule: the requests it matches (every field set must
// match; an empty one matches anything), who may decide them, and how
// many of them must approve.
type TeamRule struct {
	// AccountID is the account of the requests; "" matches every account.
	AccountID string
	// Account is the account's name as the file wrote it ("" for any).
	Account string
	Kind    countersign.Kind
	// Tier is an MCP call's tier; an MCP request of unknown tier matches
	// every tier, as the step-up rules read it.
	Tier countersign.Tier
	// Tool is a glob over the action (the tool or the command).
	Tool string
	// Protected matches only requests that touch a protected path.
	Protected bool
	// Key is a glob over the name of the asking agent key; a grant's key
	// is named grant-CLIENT-ID.
	Key string
	// Approvers are the usernames who may decide the requests, groups
	// expanded; empty: every approver of the account whose role decides.
	Approvers []string
	// Route is how the rule names its approvers to people, as the file
	// wrote them: "group:sre, carol".
	Route string
	// Quorum is how many distinct approvers must approve (at least 1).
	Quorum int
	// Separate keeps the approver who made the asking key, or allowed
	// the grant whose key it is, from approving its requests.
	Separate bool
}

// Rule returns the first rule that matches r, nil for none.
func (t *Teams) Rule(r *countersign.Request) *TeamRule {
	if t == nil {
		return nil
	}
	for i := range t.Rules {
		if t.Rules[i].matches(r) {
			return &t.Rules[i]
		}
	}
	return nil
}

func (rule *TeamRule) matches(r *countersign.Request) bool {
	switch {
	case rule.AccountID != "" && r.AccountID != rule.AccountID,
		rule.Kind != "" && r.Kind != rule.Kind,
		rule.Tier != "" && r.Tier != rule.Tier && !UnknownTier(r),
		rule.Tool != "" && !glob(rule.Tool, r.Action),
		rule.Protected && !r.Protected,
		rule.Key != "" && !glob(rule.Key, r.KeyName):
		return false
	}
	return true
}

// Routed reports whether the rule names who may decide.
func (rule *TeamRule) Routed() bool { return len(rule.Approvers) > 0 }

// Votes reports whether an approval under the rule is a vote: it needs
// several approvers, or keeps the key's maker apart.
func (rule *TeamRule) Votes() bool { return rule.Quorum > 1 || rule.Separate }

// May reports whether the approver may decide the rule's requests.
func (rule *TeamRule) May(username string) bool {
	return !rule.Routed() || slices.Contains(rule.Approvers, username)
}

// ErrNotRouted is the refusal of a decision by an approver the request is
// not routed to. Nothing changes.
func ErrNotRouted(rule *TeamRule) error {
	return countersign.Errorf(countersign.EFORBIDDEN, "this request is routed to %s: you may see it, not decide it", rule.Route)
}

// ErrNeedsApprover is the refusal of a decision that no approver signed
// (an e-mailed link, an MCP client's answer, the gateway's local page) on
// a request a team rule routes or gives a quorum: only an approver who
// signed in can be counted.
func ErrNeedsApprover(rule *TeamRule) error {
	if rule.Votes() {
		return countersign.Errorf(countersign.EFORBIDDEN, "this request needs %s: decide it in the inbox, signed in", rule.needs())
	}
	return ErrNotRouted(rule)
}

// needs says whose approval a request of a rule that counts votes needs.
func (rule *TeamRule) needs() string {
	if rule.Quorum > 1 {
		return fmt.Sprintf("the approval of %d approvers", rule.Quorum)
	}
	return "the approval of an approver who did not make the agent key that asks"
}

// TeamsFile is the teams configuration as written (TOML):
//
//	[groups]
//	sre = ["alice", "bob"]
//
//	[[rule]]              # first match wins
//	account = "default"
//	kind = "mcp"
//	tier = "commit"
//	approvers = ["group:sre"]
//	quorum = 2
//	separate = true
type TeamsFile struct {
	Groups map[string][]string `toml:"groups"`
	Rules  []fileRule          `toml:"rule"`
}

type fileRule struct {
	Account   string   `toml:"account"`
	Kind      string   `toml:"kind"`
	Tier      string   `toml:"tier"`
	Tool      string   `toml:"tool"`
	Protected bool     `toml:"protected"`
	Key       string   `toml:"key"`
	Approvers []string `toml:"approvers"`
	Quorum    int      `toml:"quorum"`
	Separate  bool     `toml:"separate"`
}

// LoadTeams reads and checks a teams configuration file: an unknown key, an
// unknown group, a bad kind or tier, or a quorum larger than the approvers
// a rule names is an error. Accounts and usernames are checked against the
// store by Resolve.
func LoadTeams(path string) (*TeamsFile, error) {
	var f TeamsFile
	md, err := toml.DecodeFile(path, &f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		keys := make([]string, len(undecoded))
		for i, k := range undecoded {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("%s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// check checks what the file alone can tell.
func (f *TeamsFile) check() error {
	for name, members := range f.Groups {
		if len(members) == 0 {
			return fmt.Errorf("group %q has no approvers", name)
		}
		for _, m := range members {
			if m == "" || strings.HasPrefix(m, "group:") {
				return fmt.Errorf("group %q: %q is not a username (groups hold usernames, not groups)", name, m)
			}
		}
	}
	for i, r := range f.Rules {
		if r.Kind != "" && !countersign.Kind(r.Kind).Valid() {
			return fmt.Errorf("rule %d: no kind %q (rm, tool, mcp, generic)", i+1, r.Kind)
		}
		if r.Tier != "" && !countersign.Tier(r.Tier).Valid() {
			return fmt.Errorf("rule %d: no tier %q (read, write, commit, external)", i+1, r.Tier)
		}
		if r.Tier != "" && r.Kind != "" && r.Kind != string(countersign.KindMCP) {
			return fmt.Errorf("rule %d: a tier is an MCP call's: it goes with kind = \"mcp\" or no kind", i+1)
		}
		if r.Quorum < 0 || r.Quorum > 16 {
			return fmt.Errorf("rule %d: quorum must be from 1 to 16", i+1)
		}
		names, err := f.expand(r.Approvers)
		if err != nil {
			return fmt.Errorf("rule %d: %w", i+1, err)
		}
		if len(names) > 0 && max(r.Quorum, 1) > len(names) {
			return fmt.Errorf("rule %d: quorum %d is more than the %d approvers it names (%s)", i+1, r.Quorum, len(names), strings.Join(r.Approvers, ", "))
		}
	}
	return f.checkOrder()
}

// checkOrder refuses a rule that can never apply: an earlier rule matches
// every request it would, and the first match wins. A rule that sets no
// matcher but its account matches all of that account's requests, so it
// is a catch-all and must come last; left earlier, it would silently take
// the requests of every rule after it.
func (f *TeamsFile) checkOrder() error {
	for j, later := range f.Rules {
		for i, earlier := range f.Rules[:j] {
			if !earlier.covers(later) {
				continue
			}
			if earlier.catchAll() {
				return fmt.Errorf("rule %d sets no kind, tier, tool, protected or key, so it matches every request of %s, and rule %d after it would never apply: a catch-all rule goes last",
					i+1, earlier.accountWords(), j+1)
			}
			return fmt.Errorf("rule %d would never apply: rule %d before it matches every request it matches (the first rule that matches wins); put the narrower rule first",
				j+1, i+1)
		}
	}
	return nil
}

// catchAll reports whether the rule sets no matcher but its account.
func (r fileRule) catchAll() bool {
	return r.Kind == "" && r.Tier == "" && r.Tool == "" && !r.Protected && r.Key == ""
}

// accountWords names the requests of the rule's account.
func (r fileRule) accountWords() string {
	if r.Account == "" {
		return "every account"
	}
	return fmt.Sprintf("account %q", r.Account)
}

// covers reports whether every request b matches, r matches too. A glob
// covers another when it matches the other's text with its '*' taken as
// a character: r's literal parts then lie within b's, in order, and so
// in every action b matches.
func (r fileRule) covers(b fileRule) bool {
	return (r.Account == "" || r.Account == b.Account) &&
		(r.Kind == "" || r.Kind == b.Kind) &&
		(r.Tier == "" || r.Tier == b.Tier) &&
		(r.Tool == "" || b.Tool != "" && glob(r.Tool, b.Tool)) &&
		(!r.Protected || b.Protected) &&
		(r.Key == "" || b.Key != "" && glob(r.Key, b.Key))
}

// expand turns a rule's approvers into distinct usernames, groups
// expanded.
func (f *TeamsFile) expand(list []string) ([]string, error) {
	var out []string
	for _, a := range list {
		names := []string{a}
		if g, ok := strings.CutPrefix(a, "group:"); ok {
			members, known := f.Groups[g]
			if !known {
				return nil, fmt.Errorf("no group %q (define it under [groups])", g)
			}
			names = members
		} else if a == "" {
			return nil, fmt.Errorf("an empty approver")
		}
		for _, n := range names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// TeamsDirectory is what Resolve reads of the store: accounts by name and
// their members.
type TeamsDirectory interface {
	AccountByName(ctx context.Context, name string) (*countersign.Account, error)
	Members(ctx context.Context, accountID string) ([]*countersign.Member, error)
}

// Resolve checks the file against the store and returns the rules: every
// account a rule names exists ("" is every account, which then needs no
// approvers named, or names approvers of every account it serves), every
// approver a rule names is a member of the rule's account whose role
// decides, and a rule of no named approvers has a quorum its account's
// deciding members can reach.
func (f *TeamsFile) Resolve(ctx context.Context, dir TeamsDirectory) (*Teams, error) {
	t := &Teams{}
	for i, r := range f.Rules {
		names, _ := f.expand(r.Approvers)
		rule := TeamRule{Account: r.Account, Kind: countersign.Kind(r.Kind), Tier: countersign.Tier(r.Tier), Tool: r.Tool,
			Protected: r.Protected, Key: r.Key, Approvers: names, Route: strings.Join(r.Approvers, ", "), Quorum: max(r.Quorum, 1), Separate: r.Separate}
		if rule.Route == "" {
			rule.Route = "every approver of the account"
		}
		if r.Account == "" {
			if len(names) > 0 || rule.Quorum > 1 {
				return nil, fmt.Errorf("teams configuration, rule %d: name the account whose approvers it routes to or counts (account = \"default\")", i+1)
			}
			t.Rules = append(t.Rules, rule)
			continue
		}
		acc, err := dir.AccountByName(ctx, r.Account)
		if err != nil {
			return nil, fmt.Errorf("teams configuration, rule %d: account %q: %w", i+1, r.Account, err)
		}
		rule.AccountID = acc.ID
		members, err := dir.Members(ctx, acc.ID)
		if err != nil {
			return nil, err
		}
		deciders := 0
		for _, m := range members {
			if m.Role.Decides() {
				deciders++
			}
		}
		for _, n := range names {
			j := slices.IndexFunc(members, func(m *countersign.Member) bool { return m.Username == n })
			if j < 0 {
				return nil, fmt.Errorf("teams configuration, rule %d: %q is not an approver of account %q", i+1, n, r.Account)
			}
			if !members[j].Role.Decides() {
				return nil, fmt.Errorf("teams configuration, rule %d: %q is a viewer of account %q and decides nothing", i+1, n, r.Account)
			}
		}
		if len(names) == 0 && rule.Quorum > deciders {
			return nil, fmt.Errorf("teams configuration, rule %d: quorum %d is more than the %d approvers of account %q who decide", i+1, rule.Quorum, deciders, r.Account)
		}
		t.Rules = append(t.Rules, rule)
	}
	return t, nil
}

// NoTeams is the fingerprint of no teams configuration (no file, or one of
// no rules).
const NoTeams = "none"

// Fingerprint is the SHA-256, in hex, of a canonical form of the rules as
// resolved (accounts by id, groups expanded, approvers sorted), or NoTeams
// when there are none: two servers of one fingerprint route and count
// every request alike, whatever the layout of their files.
func (t *Teams) Fingerprint() string {
	if t == nil || len(t.Rules) == 0 {
		return NoTeams
	}
	rules := make([]TeamRule, len(t.Rules))
	for i, r := range t.Rules {
		r.Approvers = slices.Sorted(slices.Values(r.Approvers))
		rules[i] = r
	}
	b, err := json.Marshal(struct {
		Version int
		Rules   []TeamRule
	}{1, rules})
	if err != nil {
		panic(err) // strings, ints and bools always marshal
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ShortFingerprint is the fingerprint as logs and errors name it: its
// first 12 hex digits, or NoTeams.
func ShortFingerprint(fp string) string {
	if len(fp) > 12 {
		return fp[:12]
	}
	return fp
}

// ErrTeamsDiffer is the refusal of a decision on a replica whose teams
// configuration (own) is not the one the store records as the replicas'
// (stored): the last replica started wrote its own. Nothing changes.
func ErrTeamsDiffer(own, stored string) error {
	if stored == "" {
		stored = "none recorded"
	}
	return countersign.Errorf(countersign.EUNAVAILABLE,
		"this replica's teams file differs from the one the other replicas run: this replica's teams configuration is %s, the store's (the last replica started) is %s; "+
			"this replica decides nothing until every replica is restarted with the same file (--teams-config)",
		ShortFingerprint(own), ShortFingerprint(stored))
}

// checkTeams refuses, with ErrTeamsDiffer, when the store that replicas
// share records another teams configuration than this server's: the
// rules this server would apply are not the other replicas'. It reads
// what the store keeps in memory while its change feed listens, so a
// decision costs no round trip when nothing changed. A store of one
// server (SharedTeams nil) is never asked.
func (s *Service) checkTeams(ctx context.Context) error {
	if s.cfg.SharedTeams == nil {
		return nil
	}
	stored, err := s.cfg.SharedTeams.TeamsFingerprint(ctx)
	if err != nil {
		return err
	}
	if stored != s.teamsFP {
		return ErrTeamsDiffer(s.teamsFP, stored)
	}
	return nil
}

// RecordTeams records the fingerprint of teams, the configuration this
// server runs, in the store, and logs a change from the one recorded
// before. On a store that replicas share (it has a change feed) the
// fingerprint recorded is the one the replicas decide under: this
// replica's from now on, until the next one starts. It returns the store
// for Config.SharedTeams, nil on a store of one server, whose
// configuration is its own.
func RecordTeams(ctx context.Context, store countersign.Store, teams *Teams, log *slog.Logger) (countersign.TeamsFingerprints, error) {
	rec, ok := store.(countersign.TeamsFingerprints)
	if !ok {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fp := teams.Fingerprint()
	previous, err := rec.SetTeamsFingerprint(ctx, fp, time.Now())
	if err != nil {
		return nil, err
	}
	_, shared := store.(countersign.ChangeFeed)
	switch {
	case previous != "" && previous != fp && shared:
		log.Warn("the teams configuration changed: replicas still running the earlier one decide nothing until restarted with this one",
			"teams", ShortFingerprint(fp), "previous", ShortFingerprint(previous))
	case previous != "" && previous != fp:
		log.Warn("the teams configuration changed since the last start", "teams", ShortFingerprint(fp), "previous", ShortFingerprint(previous))
	case fp != NoTeams:
		log.Info("teams configuration", "teams", ShortFingerprint(fp))
	}
	if !shared {
		return nil, nil
	}
	return rec, nil
}
