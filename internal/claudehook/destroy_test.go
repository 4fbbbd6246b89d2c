package claudehook

import (
	"context"
	"strings"
	"testing"
)

// TestDestroyers decides the destroying classes in a permission mode where
// Claude Code does not ask (asked) and in one where it does (left to it),
// and commands that are not destroyers in both.
func TestDestroyers(t *testing.T) {
	w := newWorld(t)
	w.file(".claude/settings.json", "{}\n")
	p := w.policy()
	tests := []struct {
		cmd    string
		bypass Action // in bypassPermissions; default mode leaves every destroyer to Claude Code
		reason string
	}{
		{`python3.12 -c "import os; os.unlink('a.txt')"`, Ask, "deletes files"},
		{`ruby -e 'FileUtils.rm_rf("src")'`, Ask, "deletes files"},
		{`node --eval "fs.unlinkSync('a.txt')"`, Ask, "deletes files"},
		{"perl <<'X'\nunlink 'a.txt';\nX", Ask, "deletes files"},
		{`python3 -c 'print(1)'`, Prompt, ""},
		{`python3 -c "$code"`, Ask, "computed only when it runs"},
		{"python3 <<X\nprint($n)\nX", Ask, "computed only when it runs"},
		{`python3 script.py`, Prompt, ""},
		{"dd if=a.txt of=/dev/null", Prompt, ""},
		{"dd if=/dev/zero of=src/main.go", Ask, "dd writes over"},
		{"chmod -R a-rwx src", Ask, "every permission"},
		{"chmod -R 755 src", Prompt, ""},
		{"chmod 000 a.txt", Prompt, ""},
		{"mv -n src/main.go a.txt", Prompt, ""},
		{"mv src/main.go .", Prompt, ""},
		{"mv a.txt src", Prompt, ""},
		{"mv a.txt src/main.go", Ask, "replaces the existing"},
		{"mv -t src a.txt", Prompt, ""},
		{`mv a.txt "$x"`, Ask, "known only when it runs"},
		{"git restore --staged a.txt", Prompt, ""},
		{"git restore a.txt", Ask, "git restore"},
		{"git checkout main", Prompt, ""},
		{"git checkout a.txt", Ask, "git checkout"},
		{"git switch --discard-changes main", Ask, "git switch"},
		{"git branch -d topic", Prompt, ""},
		{"git branch --delete --force topic", Ask, "git branch -D"},
		{"git stash list", Allow, ""},
		{"rsync -a src/ build/", Prompt, ""},
		{"rsync -a --remove-source-files src/ build/", Ask, "rsync"},
		{"echo x | tee a.txt", Ask, "replaces the contents"},
		{"echo x | tee -a a.txt", Prompt, ""},
		{"echo x > new.txt", Prompt, ""},
		{"cp /dev/null ~/.claude/settings.json", Ask, "Claude Code's settings"},
		{"sed -i s/countersign/true/ ~/.claude/settings.json", Ask, "Claude Code's settings"},
		{"rm ~/.claude/settings.json", Ask, "Claude Code's settings"},
		{"mv .claude old", Ask, "holds Claude Code's settings"},
	}
	for _, tt := range tests {
		for _, mode := range []string{"bypassPermissions", "default"} {
			want := tt.bypass
			if mode == "default" && want == Ask {
				want = Prompt
			}
			v := p.Decide(context.Background(), &Call{Tool: "Bash", Command: tt.cmd, Cwd: w.project, Project: w.project, Mode: mode})
			if v.Action != want || want == Ask && !strings.Contains(strings.Join(v.Reasons, "; "), tt.reason) {
				t.Errorf("%s, %s: %v %q, want %v (%s)", mode, tt.cmd, v.Action, v.Reasons, want, tt.reason)
			}
		}
	}
}

// TestModeAsks pins which permission modes leave the asking to Claude Code.
func TestModeAsks(t *testing.T) {
	for _, tt := range []struct {
		mode, tool string
		asks       bool
	}{
		{"default", "Bash", true}, {"plan", "Write", true}, {"acceptEdits", "Bash git", true},
		{"acceptEdits", "Bash mv", false}, {"acceptEdits", "Bash rm", false}, {"default", "Bash mv", true},
		{"acceptEdits", "Edit", false}, {"bypassPermissions", "Bash", false}, {"dontAsk", "Bash", false},
		{"auto", "Write", false}, {"", "Bash", false}, {"someNewMode", "Bash", false},
	} {
		if got := modeAsks(tt.mode, tt.tool); got != tt.asks {
			t.Errorf("modeAsks(%q, %q) = %v", tt.mode, tt.tool, got)
		}
	}
}
