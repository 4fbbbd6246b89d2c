package saferm

import (
	"fmt"
	"net/netip"
	"strings"
)

// GuardMode says which sessions the wrapper guards.
type GuardMode string

// Guard modes. Auto guards agent sessions (an agent marker is set) and SSH
// sessions from the configured networks, so that a person's own shell keeps
// plain rm; always guards every session; never turns the wrapper into a
// pass-through.
const (
	GuardAuto   GuardMode = "auto"
	GuardAlways GuardMode = "always"
	GuardNever  GuardMode = "never"
)

// valid reports whether m is a known mode.
func (m GuardMode) valid() bool {
	return m == GuardAuto || m == GuardAlways || m == GuardNever
}

// Guard is the verdict on the current session.
type Guard struct {
	Guarded bool
	Reason  string // why, for --dry-run and logs
}

// DetectGuard decides whether the session described by getenv is guarded
// under mode, networks (CIDR prefixes or single addresses) and markers
// ("NAME=VALUE" matches that exact value, "NAME" any non-empty value).
// A network that does not parse guards every SSH session: a typo in the
// policy must not open it up.
func DetectGuard(mode GuardMode, networks, markers []string, getenv func(string) string) Guard {
	switch mode {
	case GuardAlways:
		return Guard{Guarded: true, Reason: `guard = "always"`}
	case GuardNever:
		return Guard{Reason: `guard = "never"`}
	}
	for _, m := range markers {
		if markerSet(m, getenv) {
			return Guard{Guarded: true, Reason: "agent marker " + m + " is set"}
		}
	}
	if g, ok := sshGuard(networks, getenv); ok {
		return g
	}
	return Guard{Reason: "no agent marker set and no SSH connection from a guarded network"}
}

// markerSet reports whether one marker matches the environment.
func markerSet(marker string, getenv func(string) string) bool {
	name, value, exact := strings.Cut(marker, "=")
	if name == "" {
		return false
	}
	got := getenv(name)
	if exact {
		return got == value
	}
	return got != ""
}

// sshGuard guards an SSH session whose client address lies in one of the
// networks. SSH_CONNECTION is "client port server port", SSH_CLIENT is
// "client port port"; both start with the client address.
func sshGuard(networks []string, getenv func(string) string) (Guard, bool) {
	conn := getenv("SSH_CONNECTION")
	if conn == "" {
		conn = getenv("SSH_CLIENT")
	}
	fields := strings.Fields(conn)
	if len(fields) == 0 || len(networks) == 0 {
		return Guard{}, false
	}
	addr, err := netip.ParseAddr(fields[0])
	if err != nil {
		// An SSH session we cannot place is treated as coming from a
		// guarded network: fail towards asking.
		return Guard{Guarded: true, Reason: fmt.Sprintf("SSH session from unparseable address %q", fields[0])}, true
	}
	addr = addr.Unmap().WithZone("")
	for _, n := range networks {
		p, err := parseNetwork(n)
		if err != nil {
			return Guard{Guarded: true, Reason: fmt.Sprintf("SSH session and invalid guard network %q", n)}, true
		}
		if p.Contains(addr) {
			return Guard{Guarded: true, Reason: fmt.Sprintf("SSH session from %s (in %s)", addr, p)}, true
		}
	}
	return Guard{}, false
}

// parseNetwork accepts a CIDR prefix or a single address.
func parseNetwork(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
