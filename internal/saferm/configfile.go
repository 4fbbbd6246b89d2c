package saferm

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign/internal/clientconfig"
)

// mergeRm applies the [rm] table. Lists replace the defaults, except
// protected_paths, which adds to them: a file cannot unprotect /etc.
func (c *Config) mergeRm(r clientconfig.Rm) {
	setString(&c.RealRm, r.RealRm)
	if r.Guard != nil {
		c.Guard = GuardMode(*r.Guard)
	}
	if r.GuardNetworks != nil {
		c.GuardNetworks = *r.GuardNetworks
	}
	if r.AgentMarkers != nil {
		c.AgentMarkers = *r.AgentMarkers
	}
	if r.SafePatterns != nil {
		c.SafePatterns = *r.SafePatterns
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
	if err := c.CheckServerURL(); err != nil {
		errs = append(errs, err)
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
		return fmt.Errorf("config %s: %w", c.Source(), err)
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
