package saferm

import (
	"fmt"
	"path/filepath"

	"github.com/countersign/countersign/internal/clientconfig"
)

// DefaultSafeRmConf is where safe-rm keeps its list of protected paths,
// which the wrapper honours too.
const DefaultSafeRmConf = "/etc/safe-rm.conf"

// Config is the rm wrapper's configuration: the clients' shared one (the
// connection, the file read, the [hook] table; see clientconfig.Config for
// the file's shape) and the rm policy, the [rm] table over the defaults.
type Config struct {
	clientconfig.Config
	RealRm         string // "" for /bin/rm, else /usr/bin/rm
	Guard          GuardMode
	GuardNetworks  []string // CIDR prefixes or addresses
	AgentMarkers   []string // NAME=VALUE or NAME
	ProtectedPaths []string // complete: defaults, file entries, safe-rm.conf, the config file
	SafePatterns   []string
	FileThreshold  int
	BytesThreshold int64
	Strict         bool // -r and -f are reasons by themselves, as in the seed
}

// DefaultAgentMarkers are environment variables that coding agents set in
// the shells they run commands in: Claude Code (CLAUDECODE=1), Gemini CLI
// (GEMINI_CLI=1), Codex (CODEX_SANDBOX in its sandbox, CODEX_THREAD_ID)
// and GitHub Copilot CLI (COPILOT_CLI=1).
func DefaultAgentMarkers() []string {
	return []string{"CLAUDECODE=1", "GEMINI_CLI=1", "CODEX_SANDBOX", "CODEX_THREAD_ID", "COPILOT_CLI=1"}
}

// DefaultConfig returns the configuration before any file, environment or
// flag: guard agents only, no guard networks (a person's SSH shell keeps
// plain rm until networks are configured), 100 files, 100 MiB, and the
// seed's ten-minute approval lifetime as poll timeout.
func DefaultConfig(home string) *Config {
	return &Config{
		Config:         clientconfig.Config{PollTimeout: clientconfig.DefaultPollTimeout, Home: home},
		Guard:          GuardAuto,
		AgentMarkers:   DefaultAgentMarkers(),
		ProtectedPaths: DefaultProtectedPaths(home),
		FileThreshold:  100,
		BytesThreshold: 100 << 20,
	}
}

// LoadOptions are the process's surroundings, injectable for tests.
type LoadOptions struct {
	Getenv       func(string) string // nil for os.Getenv
	Home         string              // "" for $HOME
	SystemConfig string              // "" for clientconfig.DefaultSystemConfig
	SafeRmConf   string              // "" for DefaultSafeRmConf
}

// LoadConfig builds the configuration: the clients' shared one
// (clientconfig.Load: defaults, one file, the environment, the flags in
// inv), then the file's [rm] table over the rm policy's defaults, with
// safe-rm.conf. Policy (protected paths, guard, real rm, thresholds) comes
// only from files: the environment is what an agent most easily changes.
func LoadConfig(inv Invocation, o LoadOptions) (*Config, error) {
	cc, err := clientconfig.Load(clientconfig.Options{
		ConfigFile: inv.ConfigFile, ServerURL: inv.ServerURL,
		Getenv: o.Getenv, Home: o.Home, SystemConfig: o.SystemConfig,
	})
	if err != nil {
		return nil, err
	}
	cfg := DefaultConfig(cc.Home)
	cfg.Config = *cc
	cfg.mergeRm(cc.Rm)
	if err := cfg.finish(o); err != nil {
		return nil, err
	}
	return cfg, nil
}

// finish completes the configuration after all layers: safe-rm.conf and
// the config file itself join the protected paths, and everything is
// validated.
func (c *Config) finish(o LoadOptions) error {
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
