package claudehook

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/clientconfig"
	"github.com/countersign/countersign/internal/saferm"
)

func TestParseRulesErrors(t *testing.T) {
	tests := []struct {
		rule, want string
	}{
		{"", "a rule is Tool or Tool(pattern)"},
		{"Bash(", "a rule is Tool or Tool(pattern)"},
		{"Bash()", "empty pattern"},
		{"Read Write", "a rule is Tool or Tool(pattern)"},
		{"(ls)", "a rule is Tool or Tool(pattern)"},
		{"mcp__github__get_issue(x)", "takes no (…) part"},
		{"WebFetch(example.com)", "takes no (…) part"},
		{"Bash[", "bad tool pattern"},
	}
	for _, tt := range tests {
		_, err := ParseRules(clientconfig.HookRules{Ask: []string{tt.rule}})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "[hook] ask") {
			t.Errorf("%q: err = %v, want one containing %q", tt.rule, err, tt.want)
		}
	}
	rs, err := ParseRules(clientconfig.HookRules{Allow: []string{"Read", " Bash(git status) "}, Deny: []string{"mcp__*__delete_*", "*(/etc/**)"}})
	if err != nil || len(rs) != 4 || rs[0].Action != Deny || rs[2].Tool != "Read" || rs[3].Arg != "git status" {
		t.Errorf("ParseRules = %+v, %v", rs, err)
	}
}

// TestConfigHookTable reads the [hook] table through the rm wrapper's
// configuration loader: one file for both.
func TestConfigHookTable(t *testing.T) {
	w := newWorld(t)
	w.writeConfig("server_url = \"https://c.example.com\"\n[rm]\nfile_threshold = 5\n[hook]\nallow = [\"Bash(go test:*)\"]\nask = [\"mcp__*\"]\ndeny = [\"Write(~/.bashrc)\"]\nprompt = [\"WebFetch\"]\n")
	cfg, err := saferm.LoadConfig(saferm.Invocation{}, w.load())
	if err != nil {
		t.Fatal(err)
	}
	want := clientconfig.HookRules{Allow: []string{"Bash(go test:*)"}, Ask: []string{"mcp__*"}, Deny: []string{"Write(~/.bashrc)"}, Prompt: []string{"WebFetch"}}
	if strings.Join(cfg.Hook.Allow, ",") != strings.Join(want.Allow, ",") || cfg.Hook.Ask[0] != "mcp__*" || cfg.Hook.Deny[0] != want.Deny[0] || cfg.Hook.Prompt[0] != "WebFetch" || cfg.FileThreshold != 5 {
		t.Errorf("Hook = %+v, FileThreshold %d", cfg.Hook, cfg.FileThreshold)
	}
	w.writeConfig("[hook]\nallow = [\"Read\"]\nalow = [\"x\"]\n")
	if _, err := saferm.LoadConfig(saferm.Invocation{}, w.load()); err == nil || !strings.Contains(err.Error(), "unknown keys: hook.alow") {
		t.Errorf("unknown key in [hook]: err = %v", err)
	}
}

// TestRules decides calls under rules: the strongest matching rule
// replaces the default, but never goes below the checks.
func TestRules(t *testing.T) {
	w := newWorld(t)
	if err := os.Symlink("/etc", filepath.Join(w.project, "etc-link")); err != nil {
		t.Fatal(err)
	}
	w.writeConfig(`[hook]
allow = ["Bash(git push:*)", "Bash(rm:*)", "Write(./src/**)", "Write(~/notes/**)", "Bash(npm test)", "Bash(git *)"]
deny = ["Bash(sudo *)", "Edit(~/.bashrc)", "Bash(git push --delete *)", "Write(/etc/**)"]
ask = ["mcp__*__delete_*"]
prompt = ["Read(~/.aws/**)"]
`)
	p := w.policy()
	tests := []struct {
		call *Call
		want Action
	}{
		{&Call{Tool: "Bash", Command: "git push --force origin main"}, Allow},
		{&Call{Tool: "Bash", Command: "git push --delete origin old"}, Deny},
		{&Call{Tool: "Bash", Command: "rm a.txt"}, Allow},
		{&Call{Tool: "Bash", Command: "rm -rf build"}, Ask},
		{&Call{Tool: "Bash", Command: "rm -rf /"}, Deny},
		{&Call{Tool: "Bash", Command: "sudo ls"}, Deny},
		{&Call{Tool: "Bash", Command: "npm test"}, Allow},
		{&Call{Tool: "Bash", Command: "npm test --watch"}, Prompt},
		{&Call{Tool: "Bash", Command: "echo x > ~/notes/today.md"}, Allow},
		{&Call{Tool: "Bash", Command: "echo x > ~/elsewhere.md"}, Ask},
		{&Call{Tool: "mcp__github__delete_repo"}, Ask},
		{&Call{Tool: "mcp__github__get_issue"}, Prompt},
		{&Call{Tool: "Write", Path: filepath.Join(w.project, "src/x.go")}, Allow},
		{&Call{Tool: "Write", Path: filepath.Join(w.project, "a.txt")}, Prompt},
		{&Call{Tool: "Write", Path: filepath.Join(w.home, "notes/x.md")}, Allow},
		{&Call{Tool: "Write", Path: filepath.Join(w.home, "other.md")}, Ask},
		{&Call{Tool: "Write", Path: filepath.Join(w.project, "etc-link/motd")}, Deny}, // a symlink into /etc
		{&Call{Tool: "Edit", Path: filepath.Join(w.home, ".bashrc")}, Deny},
		{&Call{Tool: "Read", Path: filepath.Join(w.home, ".aws/credentials")}, Prompt},
		{&Call{Tool: "Read", Path: "/etc/hosts"}, Allow},
		// An allowed command does not carry what runs through variables,
		// or a variable that changes what it runs.
		{&Call{Tool: "Bash", Command: "y='a[$(rm -rf ~)]'; (( y )); npm test"}, Prompt},
		{&Call{Tool: "Bash", Command: "GIT_SSH_COMMAND='rm -rf ~' git fetch"}, Prompt},
		{&Call{Tool: "Bash", Command: "export PATH=/tmp/evil:$PATH; npm test"}, Prompt},
		{&Call{Tool: "Bash", Command: "npm test; x=$(sudo ls)"}, Deny},
	}
	for _, tt := range tests {
		tt.call.Cwd, tt.call.Project, tt.call.Mode = w.project, w.project, "default"
		if v := p.Decide(context.Background(), tt.call); v.Action != tt.want {
			t.Errorf("%s %q %s: %s %q, want %s", tt.call.Tool, tt.call.Command, tt.call.Path, v.Action, v.Reasons, tt.want)
		}
	}
}

// TestSymlinkEscape: without rules, a write through a symlink that leaves
// the project is asked.
func TestSymlinkEscape(t *testing.T) {
	w := newWorld(t)
	if err := os.Symlink(w.home, filepath.Join(w.project, "up")); err != nil {
		t.Fatal(err)
	}
	p := w.policy()
	c := &Call{Tool: "Write", Path: filepath.Join(w.project, "up/.profile"), Cwd: w.project, Project: w.project}
	if v := p.Decide(context.Background(), c); v.Action != Ask || !strings.Contains(v.Reasons[0], "outside the project") {
		t.Errorf("write through a symlink out of the project: %s %q", v.Action, v.Reasons)
	}
}

func TestWildcard(t *testing.T) {
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"git push *", "git push --force origin", true},
		{"git push *", "git pushx", false},
		{"*", "", true},
		{"npm test", "npm test", true},
		{"npm test", "npm test2", false},
		{"rm ?", "rm a", true},
		{"*/bin/*", "/usr/bin/env x", true},
		{"a*b*c", "abxbxc", true},
		{"a*b*c", "abxbx", false},
	}
	for _, tt := range tests {
		if got := wildcard(tt.pat, tt.s); got != tt.want {
			t.Errorf("wildcard(%q, %q) = %v", tt.pat, tt.s, got)
		}
	}
	if !matchCommand("git push:*", "git push") || !matchCommand("git push:*", "git push -f") || matchCommand("git push:*", "git pushy") {
		t.Error("the :* suffix")
	}
	m := matchEnv{project: "/p", home: "/h"}
	for _, tt := range []struct {
		pat, p string
		want   bool
	}{
		{"./src/**", "/p/src/a/b.go", true},
		{"src/*.go", "/p/src/a.go", true},
		{"src/*.go", "/p/src/a/b.go", false},
		{"~/.bashrc", "/h/.bashrc", true},
		{"/etc/**", "/etc", true},
		{"/etc/**", "/etcx/a", false},
		{"**/.env", "/p/a/b/.env", true},
	} {
		if got := matchPath(absPattern(tt.pat, m), tt.p); got != tt.want {
			t.Errorf("path %q on %q = %v", tt.pat, tt.p, got)
		}
	}
}
