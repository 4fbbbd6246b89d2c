package saferm

import (
	"strings"
	"testing"
)

func TestFormatDryRun(t *testing.T) {
	guarded := Guard{Guarded: true, Reason: "agent marker CLAUDECODE=1 is set"}
	got := FormatDryRun(sample(), guarded, "/bin/rm")
	want := `session: guarded (agent marker CLAUDECODE=1 is set)
verdict: would ask for approval, then run /bin/rm
targets (3):
  /var/www/data
  /var/www/old (does not exist)
  '/var/www/my data'
files: 47
bytes: 1.2 MB (1234567)
recursive: true
force: true
reasons:
  - recursive deletion (-r/-R)
  - protected path: /var/www
`
	if got != want {
		t.Errorf("FormatDryRun =\n%s\nwant\n%s", got, want)
	}
}

func TestFormatDryRunVerdicts(t *testing.T) {
	guarded := Guard{Guarded: true, Reason: "r"}
	open := Guard{Reason: "no agent marker set"}
	blocked := &Assessment{Blocked: true, BlockReason: `refusing to delete /: hard-blocked path`}
	exempt := &Assessment{Targets: []string{"/tmp/build-1"}, Reasons: []string{"recursive deletion (-r/-R)"}, Exempt: true, Recursive: true}
	capped := &Assessment{Targets: []string{"/big"}, FileCount: 1000, FileCountCapped: true, NeedsApproval: true, Reasons: []string{"x"}}
	tests := []struct {
		name string
		a    *Assessment
		g    Guard
		want []string
	}{
		{"block", blocked, guarded, []string{"verdict: would block (exit 1, no request): refusing to delete /: hard-blocked path\n"}},
		{"block, unguarded", blocked, open, []string{
			"session: not guarded (no agent marker set)\n",
			"verdict: would pass straight to /bin/rm\n",
			"in a guarded session: would block (exit 1, no request)",
		}},
		{"exempt", exempt, guarded, []string{"verdict: would pass to /bin/rm\n", "every target matches a safe pattern"}},
		{"capped", capped, guarded, []string{"files: at least 1000 (count stopped at the cap)\n"}},
		{"nothing to say", &Assessment{Targets: []string{"/tmp/a"}}, guarded, []string{"verdict: would pass to /bin/rm\n", "reasons: none\n"}},
	}
	for _, tt := range tests {
		got := FormatDryRun(tt.a, tt.g, "/bin/rm")
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: output lacks %q:\n%s", tt.name, w, got)
			}
		}
	}
}
