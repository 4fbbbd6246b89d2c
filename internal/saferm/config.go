package saferm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Default locations of the files the configuration reads.
const (
	DefaultSystemConfig = "/etc/countersign/config.toml"
	DefaultSafeRmConf   = "/etc/safe-rm.conf"
)

// Config is the rm wrapper's configuration. The connection settings sit at
// the top of the TOML file, the rm policy in its [rm] table:
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
	ServerURL      string        // COUNTERSIGN_URL, --server
	AgentKey       string        // COUNTERSIGN_KEY; never printed
	AgentKeyFile   string        // COUNTERSIGN_KEY_FILE; read into AgentKey by LoadConfig
	PollTimeout    time.Duration // how long to wait for a decision
	RealRm         string        // "" for /bin/rm, else /usr/bin/rm
	Guard          GuardMode
	GuardNetworks  []string // CIDR prefixes or addresses
	AgentMarkers   []string // NAME=VALUE or NAME
	ProtectedPaths []string // complete: defaults, file entries, safe-rm.conf, the config file
	SafePatterns   []string
	FileThreshold  int
	BytesThreshold int64
	Strict         bool      // -r and -f are reasons by themselves, as in the seed
	Hook           HookRules // the [hook] table, read by the Claude Code hook only
	File           string    // the configuration file read, "" when none
	Home           string    // the home directory the paths were expanded for
}

// HookRules are the Claude Code hook's rules from the [hook] table, one list
// per outcome: allow at once, ask a human through countersign, deny at once,
// or leave the call to Claude Code's own permission prompt. The rm wrapper
// ignores them; the hook parses and validates them (package claudehook), so
// that a broken rule stops the hook, which fails closed, and not rm.
type HookRules struct {
	Allow  []string
	Ask    []string
	Deny   []string
	Prompt []string
}

// DefaultAgentMarkers are environment variables that coding agents set in
// the shells they run commands in: Claude Code (CLAUDECODE=1), Gemini CLI
// (GEMINI_CLI=1) and Codex (CODEX_SANDBOX in its sandbox, CODEX_THREAD_ID).
func DefaultAgentMarkers() []string {
	return []string{"CLAUDECODE=1", "GEMINI_CLI=1", "CODEX_SANDBOX", "CODEX_THREAD_ID"}
}

// DefaultConfig returns the configuration before any file, environment or
// flag: guard agents only, no guard networks (a person's SSH shell keeps
// plain rm until networks are configured), 100 files, 100 MiB, and the
// seed's ten-minute approval lifetime as poll timeout.
func DefaultConfig(home string) *Config {
	return &Config{
		PollTimeout:    10 * time.Minute,
		Guard:          GuardAuto,
		AgentMarkers:   DefaultAgentMarkers(),
		ProtectedPaths: DefaultProtectedPaths(home),
		FileThreshold:  100,
		BytesThreshold: 100 << 20,
		Home:           home,
	}
}

// LoadOptions are the process's surroundings, injectable for tests.
type LoadOptions struct {
	Getenv       func(string) string // nil for os.Getenv
	Home         string              // "" for $HOME
	SystemConfig string              // "" for DefaultSystemConfig
	SafeRmConf   string              // "" for DefaultSafeRmConf
}

// LoadConfig builds the configuration: defaults, then one file (--config,
// else $COUNTERSIGN_CONFIG, else ~/.config/countersign/config.toml when
// present, else /etc/countersign/config.toml when present), then the
// environment, then the flags in inv. A file with unknown keys is refused.
// Policy (protected paths, guard, real rm, thresholds) comes only from
// files: the environment is what an agent most easily changes.
func LoadConfig(inv Invocation, o LoadOptions) (*Config, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	home := o.Home
	if home == "" {
		home = getenv("HOME")
	}
	cfg := DefaultConfig(home)
	path, err := findConfig(inv, o, getenv, home)
	if err != nil {
		return nil, err
	}
	if path != "" {
		if err := cfg.mergeFile(path); err != nil {
			return nil, err
		}
	}
	if err := cfg.mergeEnv(getenv); err != nil {
		return nil, err
	}
	if inv.ServerURL != "" {
		cfg.ServerURL = inv.ServerURL
	}
	if err := cfg.finish(o); err != nil {
		return nil, err
	}
	return cfg, nil
}

// findConfig picks the one configuration file to read, or "".
func findConfig(inv Invocation, o LoadOptions, getenv func(string) string, home string) (string, error) {
	if inv.ConfigFile != "" {
		return inv.ConfigFile, nil
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

// finish completes the configuration after all layers: the key file is
// read, safe-rm.conf and the config file itself join the protected paths,
// and everything is validated.
func (c *Config) finish(o LoadOptions) error {
	if c.AgentKey == "" && c.AgentKeyFile != "" {
		b, err := os.ReadFile(c.AgentKeyFile)
		if err != nil {
			return fmt.Errorf("config: agent key: %w", err)
		}
		if c.AgentKey = strings.TrimSpace(string(b)); c.AgentKey == "" {
			return fmt.Errorf("config: agent key file %s is empty", c.AgentKeyFile)
		}
	}
	conf := o.SafeRmConf
	if conf == "" {
		conf = DefaultSafeRmConf
	}
	extra, err := ReadSafeRmConf(conf)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	c.ProtectedPaths = append(c.ProtectedPaths, extra...)
	if c.File != "" {
		if abs, err := filepath.Abs(c.File); err == nil {
			c.ProtectedPaths = append(c.ProtectedPaths, abs)
		}
	}
	return c.validate()
}

// Assessor returns an assessor for this policy working from cwd, which
// must be absolute (os.Getwd).
func (c *Config) Assessor(cwd string) *Assessor {
	return &Assessor{
		Cwd:            cwd,
		Home:           c.Home,
		Protected:      c.ProtectedPaths,
		SafePatterns:   c.SafePatterns,
		FileThreshold:  c.FileThreshold,
		BytesThreshold: c.BytesThreshold,
		FileCap:        DefaultFileCap,
		GitTimeout:     DefaultGitTimeout,
		Strict:         c.Strict,
	}
}

// DetectGuard decides whether the session described by getenv is guarded
// under this configuration.
func (c *Config) DetectGuard(getenv func(string) string) Guard {
	return DetectGuard(c.Guard, c.GuardNetworks, c.AgentMarkers, getenv)
}

// decodeFile reads one TOML file strictly: a key this version does not know
// is an error, so a misspelt protected_paths cannot silently protect
// nothing.
func decodeFile(path string, into any) (toml.MetaData, error) {
	md, err := toml.DecodeFile(path, into)
	if err != nil {
		return md, fmt.Errorf("config %s: %w", path, err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		keys := make([]string, len(u))
		for i, k := range u {
			keys[i] = k.String()
		}
		return md, fmt.Errorf("config %s: unknown keys: %s", path, strings.Join(keys, ", "))
	}
	return md, nil
}
