package gateway

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/countersign/countersign"
)

// Config is the gateway's configuration: the upstream servers, the tiers of
// their tools and what each agent key may do. The stdio gateway reads it
// from `countersign mcp --config FILE`, the server from
// `countersign serve --mcp-config FILE`:
//
//	hold = "45s"                  # how long a retry waits for a decision in progress
//	rate = 600                    # calls and new sessions per minute and agent key (0: no limit)
//
//	[sessions]                    # /mcp sessions (clients of 2025-11-25 and older)
//	per_key = 64                  # live sessions of one agent key
//	max = 4096                    # live sessions in all
//
//	[[upstream]]
//	name = "fs"
//	command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
//	env = { NODE_ENV = "production" }
//
//	[[upstream]]
//	name = "github"
//	url = "https://mcp.example.com/mcp"
//	headers = { Authorization = "Bearer ${GITHUB_TOKEN}" }   # ${VAR} from the environment
//	annotations = "ignore"        # do not believe its hints: every tool is external
//
//	[[tier]]                      # first match wins; exposed or upstream/tool names
//	match = "fs/read_*"
//	tier = "read"
//
//	[[resource_tier]]             # resources are read unless a rule says
//	match = "fs/file:///srv/secret/**"   # "upstream/URI", or the URI; ** a prefix
//	tier = "commit"
//
//	[policy]                      # every agent key (over stdio: the gateway's)
//	tiers = ["read", "write", "commit", "external"]
//	confirm = ["commit", "external"]
//
//	[keys."acme/ci"]              # the agent key "ci" of the account "acme", or
//	tiers = ["read", "write"]     # [keys.key_…] by its id (countersign serve)
//
//	[keys."acme/claude"]          # a key whose MCP client a person answers:
//	elicitation_decides = true    # its Accept approves the call (no step-up)
//
//	[standalone]                  # stdio without a server (ADR 0003's local page)
//	opener = ["xdg-open"]
//	data = "~/.local/state/countersign-mcp"
type Config struct {
	Upstreams []UpstreamConfig
	Rules     []TierRule
	// ResourceRules give resources and templates tiers; without one, a
	// resource is of the read tier.
	ResourceRules []ResourceTierRule
	Policy        Policy
	// Keys are the policies of agent keys, each named "ACCOUNT/NAME" or by
	// the key's id: key names are unique only within an account. They take
	// effect once ResolveKeys found each in the store.
	Keys map[string]Policy
	// byKey are the resolved Keys, by account id and key name; nil until
	// ResolveKeys.
	byKey map[keyRef]Policy
	// Source is the file the configuration was read from, for messages.
	Source string
	// Hold is how long a call waits for a human's decision that is under
	// way: a retry of a pending call, or the retry after the user answered
	// an elicitation (default 45 s, below the 60 s request timeout of the
	// TypeScript SDK).
	Hold time.Duration
	// Rate is how many calls (of tools, resources, prompts, completions,
	// log levels) one agent key may make in a minute, with bursts of a sixth of it; 0:
	// no limit. A call over it is a tool error that says when to retry.
	// Opening a /mcp session counts as a call.
	Rate int
	// Sessions bound the sessions of /mcp (sessions.go).
	Sessions SessionLimits
	// Opener is the command that opens the local approval page (standalone
	// only); empty: the system's opener.
	Opener []string
	// Data is where the standalone gateway keeps its store and audit log;
	// empty: a temporary directory removed at exit.
	Data string
	// Clock tells the time of request states' expiry; nil: the system
	// clock. Tests share one with the approval service.
	Clock countersign.Clock
	// Files is file transfer (ADR 0008; see upload.go).
	Files FilesConfig
	// stopWait is how long a command upstream has to exit once its stdin
	// is closed, before it is signalled; 0: two seconds. Tests
	// shorten it for servers that keep running until signalled.
	stopWait time.Duration
}

// defaultStopWait is how long a command upstream has to exit on its own.
const defaultStopWait = 2 * time.Second

// UpstreamConfig is one MCP server behind the gateway: a command spoken to
// over stdio, or a streamable HTTP URL.
type UpstreamConfig struct {
	Name    string            `toml:"name"`
	Command CommandLine       `toml:"command"`
	Env     map[string]string `toml:"env"`
	URL     string            `toml:"url"`
	Headers map[string]string `toml:"headers"`
	// Prefix exposes every tool as <name>_<tool>, not only those whose
	// names collide with another upstream's.
	Prefix bool `toml:"prefix"`
	// IgnoreAnnotations treats every tool as unannotated (external): for
	// upstreams whose hints are not to be believed.
	IgnoreAnnotations bool `toml:"-"`
	// Files are the tools' arguments that take files (upload.go).
	Files []FileArg `toml:"files"`
}

// fileConfig is the TOML file's shape.
type fileConfig struct {
	Hold      string `toml:"hold"`
	Rate      *int   `toml:"rate"`
	Upstreams []struct {
		UpstreamConfig
		Annotations string `toml:"annotations"`
	} `toml:"upstream"`
	Tier       []TierRule            `toml:"tier"`
	ResTier    []ResourceTierRule    `toml:"resource_tier"`
	Policy     filePolicy            `toml:"policy"`
	Keys       map[string]filePolicy `toml:"keys"`
	Standalone struct {
		Opener CommandLine `toml:"opener"`
		Data   string      `toml:"data"`
	} `toml:"standalone"`
	Files    FilesConfig  `toml:"files"`
	Sessions fileSessions `toml:"sessions"`
}

type filePolicy struct {
	Tiers              *[]Tier `toml:"tiers"`
	Confirm            *[]Tier `toml:"confirm"`
	ElicitationDecides *bool   `toml:"elicitation_decides"`
}

// apply overrides the policy with what the file sets.
func (f filePolicy) apply(p Policy) Policy {
	if f.Tiers != nil {
		p.Tiers = Tiers(*f.Tiers...)
	}
	if f.Confirm != nil {
		p.Confirm = Tiers(*f.Confirm...)
	}
	if f.ElicitationDecides != nil {
		p.ElicitationDecides = *f.ElicitationDecides
	}
	return p
}

// DefaultHold is the hold of a configuration that sets none.
const DefaultHold = 45 * time.Second

// NewConfig returns the configuration before any file: no upstreams, the
// default policy and hold.
func NewConfig() *Config {
	return &Config{Policy: DefaultPolicy(), Keys: map[string]Policy{}, Hold: DefaultHold, Rate: DefaultRate,
		Sessions: SessionLimits{PerKey: DefaultSessionsPerKey, Max: DefaultSessions}}
}

// LoadConfig reads a configuration file. Unknown keys are refused, so that
// a misspelt policy never silently allows more.
func LoadConfig(file string) (*Config, error) {
	var f fileConfig
	md, err := toml.DecodeFile(file, &f)
	if err != nil {
		return nil, fmt.Errorf("read the MCP gateway configuration %s: %w", file, err)
	}
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		return nil, fmt.Errorf("the MCP gateway configuration %s has unknown keys: %v", file, undecoded)
	}
	c := NewConfig()
	if f.Hold != "" {
		if c.Hold, err = time.ParseDuration(f.Hold); err != nil || c.Hold < 0 || c.Hold > 10*time.Minute {
			return nil, fmt.Errorf("%s: hold %q must be a duration from 0s to 10m", file, f.Hold)
		}
	}
	if f.Rate != nil {
		if c.Rate = *f.Rate; c.Rate < 0 || c.Rate > 1_000_000 {
			return nil, fmt.Errorf("%s: rate %d must be a number of calls per minute from 0 (no limit) to 1000000", file, c.Rate)
		}
	}
	if err := c.Sessions.apply(f.Sessions); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for _, u := range f.Upstreams {
		switch u.Annotations {
		case "", "trust":
		case "ignore":
			u.IgnoreAnnotations = true
		default:
			return nil, fmt.Errorf("%s: upstream %q: annotations must be \"trust\" or \"ignore\"", file, u.Name)
		}
		c.Upstreams = append(c.Upstreams, u.UpstreamConfig)
	}
	c.Rules, c.ResourceRules = f.Tier, f.ResTier
	if f.Policy.ElicitationDecides != nil {
		// Which clients a person answers is known key by key; one switch
		// for every key would let any agent's client approve.
		return nil, fmt.Errorf("%s: elicitation_decides is set per agent key, under [keys.\"ACCOUNT/NAME\"], not under [policy]", file)
	}
	c.Policy = f.Policy.apply(c.Policy)
	for name, p := range f.Keys {
		c.Keys[name] = p.apply(c.Policy)
	}
	c.Opener, c.Data = f.Standalone.Opener, expandHome(f.Standalone.Data)
	c.Files = f.Files
	c.Source = file
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

// validName is what an upstream may be called: it becomes part of tool
// names, which clients restrict to these characters.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// Check validates the configuration and names the upstreams that have no
// name.
func (c *Config) Check() error {
	seen := map[string]bool{}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if (len(u.Command) == 0) == (u.URL == "") {
			return fmt.Errorf("upstream %d (%q): set either command or url", i+1, u.Name)
		}
		if u.URL != "" {
			if p, err := url.Parse(u.URL); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				// The URL is not repeated: it may carry a token.
				return fmt.Errorf("upstream %q: its url must be an http or https URL with a host, such as https://mcp.example.com/mcp", u.Name)
			}
		}
		if u.Name == "" {
			u.Name = deriveName(*u)
		}
		base := u.Name
		for n := 2; seen[u.Name]; n++ {
			u.Name = fmt.Sprintf("%s-%d", base, n)
		}
		if !validName.MatchString(u.Name) {
			return fmt.Errorf("upstream name %q must be 1 to 32 letters, digits, - or _", u.Name)
		}
		seen[u.Name] = true
	}
	// A prefixed tool name is "<upstream>_<tool>": with upstreams "a" and
	// "a_b", a_b_c could be either's, and take the other's rules.
	for name := range seen {
		for other := range seen {
			if other != name && strings.HasPrefix(other, name+"_") {
				return fmt.Errorf("upstream names %q and %q: one is the other's prefix with _, so their tools' names could be taken for each other's; rename one", name, other)
			}
		}
	}
	for _, r := range c.Rules {
		if _, err := path.Match(r.Match, ""); err != nil || r.Match == "" {
			return fmt.Errorf("tier rule %q: not a valid pattern", r.Match)
		}
	}
	for _, r := range c.ResourceRules {
		if _, err := path.Match(r.Match, ""); err != nil || r.Match == "" {
			return fmt.Errorf("resource tier rule %q: not a valid pattern", r.Match)
		}
	}
	return c.checkFiles()
}

// PolicyFor returns the policy of the principal's agent key: its [keys]
// entry, found by account and name, else the common policy.
func (c *Config) PolicyFor(p Principal) Policy {
	if pol, ok := c.byKey[keyRef{account: p.Account, name: p.KeyName}]; ok && p.Account != "" {
		return pol
	}
	return c.Policy
}

// runners are commands that start another program named by a later word,
// so that the upstream is named after that program instead.
var runners = map[string]bool{"npx": true, "node": true, "uvx": true, "uv": true, "run": true, "python": true,
	"python3": true, "bunx": true, "bun": true, "deno": true, "pipx": true, "docker": true, "exec": true, "go": true}

// deriveName names an upstream after its program or its host.
func deriveName(u UpstreamConfig) string {
	if u.URL != "" {
		if p, err := url.Parse(u.URL); err == nil {
			return sanitizeName(strings.Split(p.Hostname(), ".")[0])
		}
	}
	word := ""
	for _, w := range u.Command {
		if strings.HasPrefix(w, "-") {
			continue
		}
		word = w
		if !runners[filepath.Base(w)] {
			break
		}
	}
	word = filepath.Base(word)
	if at := strings.LastIndex(word, "@"); at > 0 {
		word = word[:at] // a version: server@1.2.3
	}
	word = strings.TrimSuffix(word, filepath.Ext(word))
	word = strings.TrimPrefix(word, "mcp-server-")
	return sanitizeName(word)
}

func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		}
	}
	out := strings.TrimLeft(b.String(), "-_")
	if len(out) > 32 {
		out = out[:32]
	}
	if out == "" {
		return "upstream"
	}
	return out
}

func expandHome(p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	return p
}

// CommandLine is a command with its arguments: a list of words, or one
// string split like a shell does (quotes and backslashes, no expansion).
type CommandLine []string

// UnmarshalTOML takes a string or a list of strings.
func (c *CommandLine) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		words, err := SplitCommand(v)
		if err != nil {
			return err
		}
		*c = words
	case []any:
		out := make([]string, 0, len(v))
		for _, w := range v {
			s, ok := w.(string)
			if !ok {
				return fmt.Errorf("a command must be a list of strings")
			}
			out = append(out, s)
		}
		*c = out
	default:
		return fmt.Errorf("a command must be a string or a list of strings")
	}
	return nil
}

// SplitCommand splits a command line into words like a POSIX shell, with
// single and double quotes and backslashes, and nothing expanded.
func SplitCommand(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\' && quote != '\'':
			if i+1 < len(rs) {
				i++
				cur.WriteRune(rs[i])
				inWord = true
			}
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unterminated quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	return words, nil
}
