package claudehook

import "testing"

// TestCommandOfKeepsWhatChangesTheProgram: the name a window keeps of a
// command tells apart commands that run different code. A program named
// by a path other than the one on PATH, a subcommand after an option that
// may take it as a value, and an option that changes what git runs are
// each a different command, never the one the human approved.
func TestCommandOfKeepsWhatChangesTheProgram(t *testing.T) {
	same := [][2]string{
		{"git push --force", "git push"},
		{"git -C sub push --force", "git push"},
		{"git --git-dir=.git push", "git push"},
		{"npm test", "npm test"},
		{"rm -rf build", "rm"},
	}
	for _, tt := range same {
		if got := commandOf(tt[0]); got != tt[1] {
			t.Errorf("commandOf(%q) = %q, want %q", tt[0], got, tt[1])
		}
	}
	differ := [][2]string{
		{"./git push", "git push"},
		{"/tmp/evil/git push", "git push"},
		{"/usr/bin/git status", "/usr/bin/git push"},
		{"kubectl -n prod get pods", "kubectl -n prod delete ns prod"},
		{"make -C sub test", "make -C sub install"},
		{"cargo +nightly build", "cargo +nightly publish"},
		{"git -c core.sshCommand=./evil.sh push", "git push"},
		{"git --config-env=core.sshCommand=EVIL push", "git push"},
		{"git --exec-path=/tmp/evil push", "git push"},
	}
	for _, tt := range differ {
		if a, b := commandOf(tt[0]), commandOf(tt[1]); a == b {
			t.Errorf("commandOf(%q) = commandOf(%q) = %q: a window on one covers the other", tt[0], tt[1], a)
		}
	}
}
