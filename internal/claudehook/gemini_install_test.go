package claudehook

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// geminiSettings has keys the hook does not know, in an order that must
// survive, and a hook of someone else on BeforeTool.
const geminiSettings = `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "hooks": {
    "BeforeTool": [{"matcher": "write_file", "hooks": [{"type": "command", "command": "other-check", "timeout": 5000}]}],
    "SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]
  },
  "ui": {"theme": "<&>"}
}
`

// geminiHome is a home directory with Gemini CLI's user settings.
func geminiHome(t *testing.T, settings string) (home, path string, getenv func(string) string) {
	t.Helper()
	home = t.TempDir()
	path = filepath.Join(home, ".gemini", "settings.json")
	if settings != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(settings), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return home, path, func(k string) string { return map[string]string{"HOME": home}[k] }
}

func TestInstallGeminiMerges(t *testing.T) {
	home, path, getenv := geminiHome(t, geminiSettings)
	var out bytes.Buffer
	if err := InstallGemini([]string{"--settings", path, "--command", "/usr/bin/countersign hook gemini"}, &out, &out, getenv); err != nil {
		t.Fatal(err)
	}
	policy := filepath.Join(home, ".gemini", "policies", "countersign.toml")
	if !strings.Contains(out.String(), "installed in "+path) || !strings.Contains(out.String(), policy) {
		t.Errorf("said %q", out.String())
	}
	data, _ := os.ReadFile(path)
	var v struct {
		Security json.RawMessage
		Hooks    map[string][]geminiGroup
		UI       struct{ Theme string }
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	want := geminiHook{Name: "countersign", Type: "command", Command: "/usr/bin/countersign hook gemini --timeout 600", Timeout: 600000}
	before, after := v.Hooks[GeminiBeforeTool], v.Hooks[GeminiAfterTool]
	if len(before) != 2 || before[0].Hooks[0].Command != "other-check" || before[1].Matcher != "*" || len(before[1].Hooks) != 1 || before[1].Hooks[0] != want {
		t.Errorf("BeforeTool %+v; want the other hook kept and ours after it", before)
	}
	if len(after) != 1 || after[0].Hooks[0] != want || len(v.Hooks["SessionStart"]) != 1 || v.UI.Theme != "<&>" || len(v.Security) == 0 {
		t.Errorf("settings now %s", data)
	}
	// The keys keep their order; the file keeps its mode.
	s := string(data)
	if !(strings.Index(s, `"security"`) < strings.Index(s, `"hooks"`) && strings.Index(s, `"hooks"`) < strings.Index(s, `"ui"`)) {
		t.Errorf("order changed: %s", s)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	got, err := os.ReadFile(policy)
	if err != nil || !bytes.Equal(got, geminiPolicy()) {
		t.Errorf("policy file %s (%v)", got, err)
	}
	for _, line := range []string{`toolName = ["run_shell_command", "write_file", "replace"]`, `decision = "allow"`, `priority = 1`, `modes = ["default", "autoEdit"]`, `allowRedirection = true`} {
		if !strings.Contains(string(got), "\n"+line+"\n") {
			t.Errorf("the policy file has no line %s:\n%s", line, got)
		}
	}
}

// TestInstallGeminiIdempotent: installing again changes nothing; another
// timeout updates the entries in place.
func TestInstallGeminiIdempotent(t *testing.T) {
	_, path, getenv := geminiHome(t, geminiSettings)
	install := func(args ...string) []byte {
		t.Helper()
		var out bytes.Buffer
		if err := InstallGemini(append([]string{"--settings", path, "--command", "countersign hook gemini"}, args...), &out, &out, getenv); err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		return data
	}
	first := install()
	if again := install(); !bytes.Equal(first, again) {
		t.Errorf("a second install changed the settings:\n%s\n%s", first, again)
	}
	longer := install("--timeout", "900")
	if strings.Count(string(longer), "hook gemini") != 2 || !strings.Contains(string(longer), `"timeout": 900000`) || !strings.Contains(string(longer), "--timeout 900") {
		t.Errorf("after --timeout 900: %s", longer)
	}
}

// TestInstallGeminiProject: the hook in a project's settings writes no
// policy file, which would let the tools run unasked in every project,
// unless --policy names one.
func TestInstallGeminiProject(t *testing.T) {
	home, _, getenv := geminiHome(t, "")
	project := filepath.Join(home, "proj", ".gemini", "settings.json")
	var out bytes.Buffer
	if err := InstallGemini([]string{"--settings", project}, &out, &out, getenv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".gemini", "policies")); !os.IsNotExist(err) || !strings.Contains(out.String(), "no policy file written") {
		t.Errorf("said %q; policies: %v", out.String(), err)
	}
	data, _ := os.ReadFile(project)
	if !strings.Contains(string(data), "hook gemini --timeout 600") {
		t.Errorf("project settings %s", data)
	}
	policy := filepath.Join(home, "elsewhere.toml")
	out.Reset()
	if err := InstallGemini([]string{"--settings", project, "--policy", policy}, &out, &out, getenv); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(policy); !bytes.Equal(got, geminiPolicy()) {
		t.Errorf("--policy wrote %q", got)
	}
}

// TestInstallGeminiHome: GEMINI_CLI_HOME, Gemini CLI's own home, is where
// the policy file goes.
func TestInstallGeminiHome(t *testing.T) {
	home := t.TempDir()
	path := filepath.Join(home, ".gemini", "settings.json")
	getenv := func(k string) string { return map[string]string{"HOME": "/nonexistent", "GEMINI_CLI_HOME": home}[k] }
	var out bytes.Buffer
	if err := InstallGemini([]string{"--settings", path}, &out, &out, getenv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(home, ".gemini", "policies", "countersign.toml")); err != nil {
		t.Errorf("no policy file under GEMINI_CLI_HOME: %v; said %q", err, out.String())
	}
}

// TestInstallGeminiRefuses: settings it cannot merge are refused, and
// nothing is written: neither the settings nor the policy file.
func TestInstallGeminiRefuses(t *testing.T) {
	for name, settings := range map[string]string{
		"not an object":       `[1]`,
		"hooks not an object": `{"hooks": []}`,
		"event not a list":    `{"hooks": {"BeforeTool": {"matcher": "*"}}}`,
		"after not a list":    `{"hooks": {"AfterTool": 3}}`,
		"trailing data":       `{} {}`,
		"broken JSON":         `{"hooks": `,
		"event a string":      `{"hooks": {"BeforeTool": "x"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			home, path, getenv := geminiHome(t, settings)
			var out bytes.Buffer
			if err := InstallGemini([]string{"--settings", path}, &out, &out, getenv); err == nil {
				t.Fatalf("installed into %s: %s", settings, out.String())
			}
			if data, _ := os.ReadFile(path); string(data) != settings {
				t.Errorf("the settings changed: %s", data)
			}
			if _, err := os.Stat(filepath.Join(home, ".gemini", "policies")); !os.IsNotExist(err) {
				t.Errorf("a policy directory was made: %v", err)
			}
		})
	}
}

// TestInstallGeminiPrints: without --settings, install prints the block
// and the policy file, and writes nothing.
func TestInstallGeminiPrints(t *testing.T) {
	home, _, getenv := geminiHome(t, "")
	var out bytes.Buffer
	if err := InstallGemini([]string{"--timeout", "120", "--command", "countersign hook gemini"}, &out, &out, getenv); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, `"command": "countersign hook gemini --timeout 120"`) || !strings.Contains(s, `"timeout": 120000`) ||
		!strings.Contains(s, `"AfterTool"`) || !strings.Contains(s, string(geminiPolicy())) {
		t.Errorf("printed %s", s)
	}
	if entries, _ := os.ReadDir(home); len(entries) != 0 {
		t.Errorf("wrote %v", entries)
	}
}

// TestInstallGeminiPolicyPaths: settings that name their own policy paths
// hide ~/.gemini/policies from Gemini CLI, which install says.
func TestInstallGeminiPolicyPaths(t *testing.T) {
	_, path, getenv := geminiHome(t, `{"policyPaths": ["/etc/mine"]}`)
	var out bytes.Buffer
	if err := InstallGemini([]string{"--settings", path}, &out, &out, getenv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "sets policyPaths") {
		t.Errorf("said %q", out.String())
	}
}

// TestInstallGeminiFlags: bad flags are refused.
func TestInstallGeminiFlags(t *testing.T) {
	_, path, getenv := geminiHome(t, "")
	for _, args := range [][]string{{"--timeout", "0"}, {"--timeout", "1.5s"}, {"--command", " "}, {"extra"}} {
		var out bytes.Buffer
		if err := InstallGemini(append([]string{"--settings", path}, args...), &out, &out, getenv); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused install wrote the settings: %v", err)
	}
}
