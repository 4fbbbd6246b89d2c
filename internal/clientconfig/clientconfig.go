// Package clientconfig reads the configuration the agent-side clients
// share: the rm wrapper, the Claude Code hook and the MCP gateway. It holds
// where the server is and the agent key, and the [rm] and [hook] tables as
// the file has them; each client applies its own table with its own rules.
//
// It is linked into the small countersign-agent binary, so it imports the
// standard library and the TOML decoder only.
package clientconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// DefaultSystemConfig is the configuration file read when neither a flag,
// the environment nor the user's configuration directory names one.
const DefaultSystemConfig = "/etc/countersign/config.toml"

// DefaultPollTimeout is how long a client waits for a decision unless the
// file says otherwise: the seed's ten-minute approval lifetime.
const DefaultPollTimeout = 10 * time.Minute

// Config is the clients' configuration. The connection settings sit at the
// top of the TOML file, each client's policy in its own table:
//
//	server_url = "https://countersign.example.com"
//	agent_key_file = "/etc/countersign/agent.key"
//	poll_timeout = "10m"
//
//	[rm]
//	real_rm = "/bin/rm"
//	guard = "auto"                  # "auto", "always" or "never"
//	guard_networks = ["10.0.0.0/8"] # SSH clients from here are guarded
//	agent_markers = ["CLAUDECODE=1", "GEMINI_CLI=1"]
//	protected_paths = ["/data", "~/notes"]   # added to the defaults
//	safe_patterns = ["/tmp/build-*"]
//	file_threshold = 100
//	bytes_threshold = 104857600
//	strict = false                  # true: -r and -f alone ask, as in the seed
//
//	[hook]                          # the Claude Code hook's rules; see HookRules
//	allow = ["Bash(go test:*)"]
//	ask = ["mcp__*__delete_*"]
//	deny = ["Write(~/.bashrc)"]
//	prompt = ["WebFetch"]
type Config struct {
	ServerURL    string        // COUNTERSIGN_URL, --server
	AgentKey     string        // COUNTERSIGN_KEY; never printed
	AgentKeyFile string        // COUNTERSIGN_KEY_FILE; read into AgentKey by Load
	PollTimeout  time.Duration // how long to wait for a decision
	Rm           Rm            // the [rm] table, for the rm wrapper
	Hook         HookRules     // the [hook] table, read by the Claude Code hook only
	File         string        // the configuration file read, "" when none
	Home         string        // the home directory the paths are expanded for
}

// Rm is the [rm] table as the file has it. A nil field is one the file
// leaves out, so that the rm wrapper keeps its default; a list that is set
// replaces the default, even when empty, except ProtectedPaths, which the
// wrapper adds to its defaults: a file cannot unprotect /etc.
type Rm struct {
	RealRm         *string   `toml:"real_rm"`
	Guard          *string   `toml:"guard"`
	GuardNetworks  *[]string `toml:"guard_networks"`
	AgentMarkers   *[]string `toml:"agent_markers"`
	ProtectedPaths []string  `toml:"protected_paths"`
	SafePatterns   *[]string `toml:"safe_patterns"`
	FileThreshold  *int      `toml:"file_threshold"`
	BytesThreshold *int64    `toml:"bytes_threshold"`
	Strict         *bool     `toml:"strict"`
}

// HookRules are the Claude Code hook's rules from the [hook] table, one list
// per outcome: allow at once, ask a human through countersign, deny at once,
// or leave the call to Claude Code's own permission prompt. The rm wrapper
// ignores them; the hook parses and validates them (package claudehook), so
// that a broken rule stops the hook, which fails closed, and not rm.
type HookRules struct {
	Allow  []string `toml:"allow"`
	Ask    []string `toml:"ask"`
	Deny   []string `toml:"deny"`
	Prompt []string `toml:"prompt"`
}

// Options are the process's surroundings and flags, injectable for tests.
type Options struct {
	ConfigFile   string              // --config FILE
	ServerURL    string              // --server URL
	Getenv       func(string) string // nil for os.Getenv
	Home         string              // "" for $HOME
	SystemConfig string              // "" for DefaultSystemConfig
}

// Load builds the configuration: defaults, then one file (--config, else
// $COUNTERSIGN_CONFIG, else the user's countersign/config.toml when
// present, else /etc/countersign/config.toml when present), then the
// environment, then the flags; last, the agent key file is read. A file
// with unknown keys is refused. Only the connection comes from the
// environment: policy is what an agent most easily changes there. Load
// does not validate; the client does, with CheckServerURL and its own
// rules, so that one error lists every problem.
func Load(o Options) (*Config, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	home := o.Home
	if home == "" {
		home = getenv("HOME")
	}
	c := &Config{PollTimeout: DefaultPollTimeout, Home: home}
	path, err := find(o, getenv, home)
	if err != nil {
		return nil, err
	}
	if path != "" {
		if err := c.mergeFile(path); err != nil {
			return nil, err
		}
	}
	if err := c.mergeEnv(getenv); err != nil {
		return nil, err
	}
	if o.ServerURL != "" {
		c.ServerURL = o.ServerURL
	}
	if err := c.readKey(); err != nil {
		return nil, err
	}
	return c, nil
}

// find picks the one configuration file to read, or "".
func find(o Options, getenv func(string) string, home string) (string, error) {
	if o.ConfigFile != "" {
		return o.ConfigFile, nil
	}
	if p := getenv("COUNTERSIGN_CONFIG"); p != "" {
		return p, nil
	}
	var candidates []string
	if x := getenv("XDG_CONFIG_HOME"); x != "" {
		candidates = append(candidates, filepath.Join(x, "countersign", "config.toml"))
	} else if home != "" {
		candidates = append(candidates, filepath.Join(home, ".config", "countersign", "config.toml"))
	}
	system := o.SystemConfig
	if system == "" {
		system = DefaultSystemConfig
	}
	for _, c := range append(candidates, system) {
		_, err := os.Stat(c)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			// Present but unreadable: refuse rather than run without policy.
			return "", fmt.Errorf("config %s: %w", c, err)
		}
	}
	return "", nil
}

// fileConfig is the TOML file's shape. Pointers tell "not set" from "set
// to the zero value".
type fileConfig struct {
	ServerURL    *string        `toml:"server_url"`
	AgentKey     *string        `toml:"agent_key"`
	AgentKeyFile *string        `toml:"agent_key_file"`
	PollTimeout  *time.Duration `toml:"poll_timeout"`
	Rm           Rm             `toml:"rm"`
	Hook         HookRules      `toml:"hook"`
}

// mergeFile applies one configuration file over c.
func (c *Config) mergeFile(path string) error {
	var f fileConfig
	if err := decodeFile(path, &f); err != nil {
		return err
	}
	c.File = path
	if f.AgentKey != nil && f.AgentKeyFile != nil {
		return fmt.Errorf("config %s: agent_key and agent_key_file are both set; set one", path)
	}
	if f.ServerURL != nil {
		c.ServerURL = *f.ServerURL
	}
	if f.AgentKey != nil {
		c.AgentKey, c.AgentKeyFile = *f.AgentKey, ""
	}
	if f.AgentKeyFile != nil {
		// A relative key file is relative to the file that names it.
		p := *f.AgentKeyFile
		if p != "" && !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(path), p)
		}
		c.AgentKey, c.AgentKeyFile = "", p
	}
	if f.PollTimeout != nil {
		c.PollTimeout = *f.PollTimeout
	}
	c.Rm, c.Hook = f.Rm, f.Hook
	return nil
}

// mergeEnv applies COUNTERSIGN_URL, COUNTERSIGN_KEY and COUNTERSIGN_KEY_FILE.
func (c *Config) mergeEnv(getenv func(string) string) error {
	if v := getenv("COUNTERSIGN_URL"); v != "" {
		c.ServerURL = v
	}
	key, keyFile := getenv("COUNTERSIGN_KEY"), getenv("COUNTERSIGN_KEY_FILE")
	switch {
	case key != "" && keyFile != "":
		return errors.New("config: COUNTERSIGN_KEY and COUNTERSIGN_KEY_FILE are both set; set one")
	case key != "":
		c.AgentKey, c.AgentKeyFile = key, ""
	case keyFile != "":
		c.AgentKey, c.AgentKeyFile = "", keyFile
	}
	return nil
}

// readKey reads the agent key file into AgentKey, after every layer has
// had its say about which file it is.
func (c *Config) readKey() error {
	if c.AgentKey != "" || c.AgentKeyFile == "" {
		return nil
	}
	b, err := os.ReadFile(c.AgentKeyFile)
	if err != nil {
		return fmt.Errorf("config: agent key: %w", err)
	}
	if c.AgentKey = strings.TrimSpace(string(b)); c.AgentKey == "" {
		return fmt.Errorf("config: agent key file %s is empty", c.AgentKeyFile)
	}
	return nil
}

// CheckServerURL refuses a server URL that is set but not http(s)://host.
func (c *Config) CheckServerURL() error {
	if c.ServerURL == "" {
		return nil
	}
	u, err := url.Parse(c.ServerURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("server_url %q: want an http or https URL", c.ServerURL)
	}
	return nil
}

// Source names where the configuration came from, for errors.
func (c *Config) Source() string {
	if c.File == "" {
		return "(environment)"
	}
	return c.File
}

// decodeFile reads one TOML file strictly: a key this version does not know
// is an error, so a misspelt protected_paths cannot silently protect
// nothing.
func decodeFile(path string, into any) error {
	md, err := toml.DecodeFile(path, into)
	if err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		keys := make([]string, len(u))
		for i, k := range u {
			keys[i] = k.String()
		}
		return fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	return nil
}
