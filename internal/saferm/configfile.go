package saferm

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// fileConfig is the TOML file's shape. Pointers and IsDefined tell "not
// set" from "set to the zero value".
type fileConfig struct {
	ServerURL    *string        `toml:"server_url"`
	AgentKey     *string        `toml:"agent_key"`
	AgentKeyFile *string        `toml:"agent_key_file"`
	PollTimeout  *time.Duration `toml:"poll_timeout"`
	Rm           struct {
		RealRm         *string  `toml:"real_rm"`
		Guard          *string  `toml:"guard"`
		GuardNetworks  []string `toml:"guard_networks"`
		AgentMarkers   []string `toml:"agent_markers"`
		ProtectedPaths []string `toml:"protected_paths"`
		SafePatterns   []string `toml:"safe_patterns"`
		FileThreshold  *int     `toml:"file_threshold"`
		BytesThreshold *int64   `toml:"bytes_threshold"`
		Strict         *bool    `toml:"strict"`
	} `toml:"rm"`
	Hook struct {
		Allow  []string `toml:"allow"`
		Ask    []string `toml:"ask"`
		Deny   []string `toml:"deny"`
		Prompt []string `toml:"prompt"`
	} `toml:"hook"`
}

// mergeFile applies one configuration file over c.
func (c *Config) mergeFile(path string) error {
	var f fileConfig
	md, err := decodeFile(path, &f)
	if err != nil {
		return err
	}
	c.File = path
	if f.AgentKey != nil && f.AgentKeyFile != nil {
		return fmt.Errorf("config %s: agent_key and agent_key_file are both set; set one", path)
	}
	setString(&c.ServerURL, f.ServerURL)
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
	c.mergeRm(f, md.IsDefined)
	c.Hook = HookRules(f.Hook)
	return nil
}

// mergeRm applies the [rm] table. Lists replace the defaults, except
// protected_paths, which adds to them: a file cannot unprotect /etc.
func (c *Config) mergeRm(f fileConfig, defined func(...string) bool) {
	r := f.Rm
	setString(&c.RealRm, r.RealRm)
	if r.Guard != nil {
		c.Guard = GuardMode(*r.Guard)
	}
	if defined("rm", "guard_networks") {
		c.GuardNetworks = r.GuardNetworks
	}
	if defined("rm", "agent_markers") {
		c.AgentMarkers = r.AgentMarkers
	}
	if defined("rm", "safe_patterns") {
		c.SafePatterns = r.SafePatterns
	}
	for _, p := range r.ProtectedPaths {
		c.ProtectedPaths = append(c.ProtectedPaths, expandHome(p, c.Home))
	}
	if r.FileThreshold != nil {
		c.FileThreshold = *r.FileThreshold
	}
	if r.BytesThreshold != nil {
		c.BytesThreshold = *r.BytesThreshold
	}
	if r.Strict != nil {
		c.Strict = *r.Strict
	}
}

// setString sets *dst when src is set.
func setString(dst *string, src *string) {
	if src != nil {
		*dst = *src
	}
}

// expandHome expands a leading "~" or "~/" to home.
func expandHome(p, home string) string {
	if home == "" {
		return p
	}
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// validate refuses a configuration the wrapper could only half obey.
func (c *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if c.ServerURL != "" {
		u, err := url.Parse(c.ServerURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad("server_url %q: want an http or https URL", c.ServerURL)
		}
	}
	if !c.Guard.valid() {
		bad("guard %q: want auto, always or never", c.Guard)
	}
	for _, n := range c.GuardNetworks {
		if _, err := parseNetwork(n); err != nil {
			bad("guard_networks: %q is not a CIDR prefix or address", n)
		}
	}
	for _, m := range c.AgentMarkers {
		if name, _, _ := strings.Cut(m, "="); name == "" {
			bad("agent_markers: %q has no variable name", m)
		}
	}
	if c.RealRm != "" && !filepath.IsAbs(c.RealRm) {
		bad("real_rm %q: must be an absolute path (PATH is never searched)", c.RealRm)
	}
	c.validatePaths(bad)
	if c.FileThreshold < 0 || c.BytesThreshold < 0 {
		bad("file_threshold and bytes_threshold must not be negative")
	}
	if c.PollTimeout <= 0 {
		bad("poll_timeout must be positive")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config %s: %w", c.source(), err)
	}
	return nil
}

// validatePaths checks protected paths and safe patterns.
func (c *Config) validatePaths(bad func(string, ...any)) {
	for _, p := range c.ProtectedPaths {
		if !filepath.IsAbs(p) {
			bad("protected_paths: %q is not absolute", p)
		}
	}
	for _, p := range c.SafePatterns {
		if _, err := filepath.Match(p, ""); err != nil || !filepath.IsAbs(p) {
			bad("safe_patterns: %q is not an absolute shell pattern", p)
		}
	}
}

// source names where the configuration came from, for errors.
func (c *Config) source() string {
	if c.File == "" {
		return "(environment)"
	}
	return c.File
}
