package saferm

import "testing"

// envOf returns a getenv over a fixed map.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDetectGuard(t *testing.T) {
	lan := []string{"10.0.0.0/8", "2001:db8::/32", "203.0.113.7"}
	tests := []struct {
		name     string
		mode     GuardMode
		networks []string
		env      map[string]string
		want     bool
	}{
		{"a person's shell", GuardAuto, nil, nil, false},
		{"Claude Code", GuardAuto, nil, map[string]string{"CLAUDECODE": "1"}, true},
		{"marker with another value", GuardAuto, nil, map[string]string{"CLAUDECODE": "0"}, false},
		{"Gemini CLI", GuardAuto, nil, map[string]string{"GEMINI_CLI": "1"}, true},
		{"GitHub Copilot CLI", GuardAuto, nil, map[string]string{"COPILOT_CLI": "1"}, true},
		{"name-only marker, any value", GuardAuto, nil, map[string]string{"CODEX_SANDBOX": "seatbelt"}, true},
		{"SSH with no networks configured", GuardAuto, nil, map[string]string{"SSH_CONNECTION": "10.1.2.3 50000 10.0.0.1 22"}, false},
		{"SSH from a guarded network", GuardAuto, lan, map[string]string{"SSH_CONNECTION": "10.1.2.3 50000 10.0.0.1 22"}, true},
		{"SSH from elsewhere", GuardAuto, lan, map[string]string{"SSH_CONNECTION": "192.0.2.9 50000 10.0.0.1 22"}, false},
		{"SSH_CLIENT only", GuardAuto, lan, map[string]string{"SSH_CLIENT": "10.9.9.9 50000 22"}, true},
		{"SSH over IPv6", GuardAuto, lan, map[string]string{"SSH_CONNECTION": "2001:db8::5 50000 2001:db8::1 22"}, true},
		{"IPv4-mapped IPv6 client", GuardAuto, lan, map[string]string{"SSH_CONNECTION": "::ffff:10.1.2.3 50000 ::1 22"}, true},
		{"a single guarded address", GuardAuto, lan, map[string]string{"SSH_CLIENT": "203.0.113.7 1 22"}, true},
		{"next to the single address", GuardAuto, lan, map[string]string{"SSH_CLIENT": "203.0.113.8 1 22"}, false},
		{"unparseable SSH client", GuardAuto, lan, map[string]string{"SSH_CLIENT": "garbage 1 22"}, true},
		{"invalid network fails closed", GuardAuto, []string{"10.0.0.0/99"}, map[string]string{"SSH_CLIENT": "192.0.2.1 1 22"}, true},
		{"always, plain shell", GuardAlways, nil, nil, true},
		{"never, even for an agent", GuardNever, lan, map[string]string{"CLAUDECODE": "1", "SSH_CLIENT": "10.1.1.1 1 22"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := DetectGuard(tt.mode, tt.networks, DefaultAgentMarkers(), envOf(tt.env))
			if g.Guarded != tt.want {
				t.Errorf("Guarded = %t (%s), want %t", g.Guarded, g.Reason, tt.want)
			}
			if g.Reason == "" {
				t.Error("no reason given")
			}
		})
	}
}
