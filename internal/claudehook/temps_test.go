package claudehook

import (
	"strings"
	"testing"
)

// TestTempDirs checks that deleting a temporary directory the line made
// is no reason to ask, and that the hook trusts the variable only while it
// surely holds mktemp's directory.
func TestTempDirs(t *testing.T) {
	w := newWorld(t)
	p := w.policy()
	const made = "deletes the temporary directory $d that this command line made"
	tests := []struct {
		cmd  string
		want Action
	}{
		{`d=$(mktemp -d); echo x > "$d/f"; rm -rf "$d"`, Prompt},
		{`d=$(mktemp -d) && cd src && rm -rf "$d"`, Prompt},
		{`d="$(mktemp -d -t build.XXXXXX)"; rm -r -f "${d}"`, Prompt},
		{`d=$(mktemp -d); trap 'rm -rf "$d"' EXIT; ls "$d"`, Prompt},
		{`d=$(mktemp -dp /var/tmp); rm -rf "$d"`, Ask}, // -dp: not read as -d -p
		{`d=$(mktemp -d -p /var/tmp); rm -rf "$d"`, Prompt},
		{`d=$(mktemp -d); rm -rf $d`, Ask}, // splits where $TMPDIR holds a space
		{`d=$(mktemp -d); echo x > $d/f; rm -rf "$d"`, Ask},

		// Not surely mktemp's directory when rm runs.
		{`rm -rf "$d"`, Ask},
		{`if true; then d=$(mktemp -d); fi; rm -rf "$d"`, Ask},
		{`true && d=$(mktemp -d); rm -rf "$d"`, Ask},
		{`false || d=$(mktemp -d); rm -rf "$d"`, Ask},
		{`(d=$(mktemp -d)); rm -rf "$d"`, Ask},
		{`d=$(mktemp -d) | cat; rm -rf "$d"`, Ask},
		{`rm -rf "$d"; d=$(mktemp -d)`, Ask},
		{`d=$(mktemp -d); d=/; rm -rf "$d"`, Ask},
		{`d=$(mktemp -d); read d; rm -rf "$d"`, Ask},
		{`d=$(mktemp -d); eval 'd=/'; rm -rf "$d"`, Ask},
		{`f() { d=$HOME; }; d=$(mktemp -d); f; rm -rf "$d"`, Ask},
		{`d=$(mktemp -d); : ${d:=/}; rm -rf "$d"`, Ask},
		{`d=$(mktemp -d); for d in /; do :; done; rm -rf "$d"`, Ask},
		{`d=$(mktemp -d); (( d=1 )); rm -rf "$d"`, Ask},
		{`mktemp() { echo ~; }; d=$(mktemp -d); rm -rf "$d"`, Ask},
		{`PATH=~/bin:$PATH; d=$(mktemp -d); rm -rf "$d"`, Ask},
		{`alias mktemp='echo /'; d=$(mktemp -d); rm -rf "$d"`, Ask},

		// Not the bare directory, or not a directory mktemp made.
		{`d=$(mktemp -d); rm -rf "$d"/*`, Ask},
		{`d=$(mktemp -d); rm -rf "$d/sub"`, Ask},
		{`d=$(mktemp -u -d); rm -rf "$d"`, Ask},
		{`d=$(mktemp); rm -rf "$d"`, Ask},
		{`d=$(mktemp -d foo.XXXX); cd /; rm -rf "$d"`, Ask},
		{`d=$(mktemp -d $HOME/x.XXXX); rm -rf "$d"`, Ask},
		{`d=$(mktemp -d 2>/dev/null); rm -rf "$d"`, Ask},
	}
	for _, tt := range tests {
		v := w.bash(p, tt.cmd)
		if v.Action != tt.want {
			t.Errorf("%s: %v %q, want %v", tt.cmd, v.Action, v.Reasons, tt.want)
		}
		if tt.want == Prompt && !strings.Contains(strings.Join(v.Details, "; "), made[:30]) {
			t.Errorf("%s: details %q", tt.cmd, v.Details)
		}
	}
	// The seed's rule: -r and -f alone ask.
	p.Config.Strict = true
	if v := w.bash(p, `d=$(mktemp -d); rm -rf "$d"`); v.Action != Ask {
		t.Errorf("strict: %v %q", v.Action, v.Reasons)
	}
}
