package claudehook

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const printedBlock = `{
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "command",
            "command": "countersign hook claude --timeout 600",
            "timeout": 600,
            "onFailure": "block"
          }
        ]
      }
    ],
    "PostToolUse": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "command",
            "command": "countersign hook claude --timeout 600",
            "timeout": 600
          }
        ]
      }
    ],
    "PostToolUseFailure": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "command",
            "command": "countersign hook claude --timeout 600",
            "timeout": 600
          }
        ]
      }
    ]
  }
}
`

func TestInstallPrints(t *testing.T) {
	var out, errs bytes.Buffer
	if err := Install(nil, &out, &errs, noEnv); err != nil {
		t.Fatal(err)
	}
	if out.String() != printedBlock {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), printedBlock)
	}
	out.Reset()
	if err := Install([]string{"--timeout", "120", "--events", "PreToolUse,PermissionRequest", "--command", "/usr/local/bin/countersign hook claude"}, &out, &errs, noEnv); err != nil {
		t.Fatal(err)
	}
	var v struct {
		Hooks map[string][]groupJSON `json:"hooks"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []string{"PreToolUse", "PermissionRequest"} {
		g := v.Hooks[ev]
		if len(g) != 1 || g[0].Hooks[0].Command != "/usr/local/bin/countersign hook claude --timeout 120" || g[0].Hooks[0].Timeout != 120 ||
			g[0].Hooks[0].OnFailure != "block" {
			t.Errorf("%s: %+v", ev, g)
		}
	}
	for _, bad := range [][]string{{"--events", "Stop"}, {"--timeout", "0"}, {"--timeout", "1.5s"}, {"extra"}} {
		if err := Install(bad, &out, &errs, noEnv); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// existingSettings has keys the hook does not know, in an order that must
// survive, and a hook of someone else on PreToolUse.
const existingSettings = `{
  "model": "opus",
  "permissions": {"allow": ["Bash(ls:*)"], "deny": []},
  "hooks": {
    "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "gofmt -w"}]}],
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "other-check", "timeout": 5}]}]
  },
  "env": {"A": "<&>"},
  "zzz": 1
}
`

func TestInstallMerges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, ".claude", "settings.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(existingSettings), 0o640); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Install([]string{"--settings", path}, &out, &out, noEnv); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "installed in") {
		t.Errorf("said %q", out.String())
	}
	data := readFile(t, path)
	keys := topKeys(t, data)
	if strings.Join(keys, ",") != "model,permissions,hooks,env,zzz" {
		t.Errorf("keys %v: order or content changed", keys)
	}
	var s struct {
		Permissions map[string][]string    `json:"permissions"`
		Env         map[string]string      `json:"env"`
		Hooks       map[string][]groupJSON `json:"hooks"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	pre := s.Hooks["PreToolUse"]
	if len(pre) != 2 || pre[0].Hooks[0].Command != "other-check" || pre[1].Hooks[0].Command != "countersign hook claude --timeout 600" || pre[1].Matcher != "*" {
		t.Errorf("PreToolUse = %+v", pre)
	}
	if pre[1].Hooks[0].OnFailure != "block" || pre[0].Hooks[0].OnFailure != "" {
		t.Errorf("onFailure: countersign's %q, the other hook's %q; want block, and the other left alone", pre[1].Hooks[0].OnFailure, pre[0].Hooks[0].OnFailure)
	}
	// After a call: the other hook kept first, countersign's added; a
	// report that fails blocks nothing.
	post := s.Hooks["PostToolUse"]
	if len(post) == 2 && post[1].Hooks[0].OnFailure != "" {
		t.Errorf("the hook after a call blocks on failure: %+v", post[1].Hooks[0])
	}
	if len(post) != 2 || post[0].Hooks[0].Command != "gofmt -w" || post[1].Hooks[0].Command != "countersign hook claude --timeout 600" ||
		len(s.Hooks["PostToolUseFailure"]) != 1 || s.Env["A"] != "<&>" || s.Permissions["allow"][0] != "Bash(ls:*)" {
		t.Errorf("other settings changed, or the hook is not installed after a call: %s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want the file's own 0640", fi.Mode().Perm())
	}

	// Again, with another timeout: updated in place, not added twice.
	out.Reset()
	if err := Install([]string{"--settings", path, "--timeout", "300"}, &out, &out, noEnv); err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(readFile(t, path), &s)
	pre = s.Hooks["PreToolUse"]
	if len(pre) != 2 || pre[1].Hooks[0].Command != "countersign hook claude --timeout 300" || pre[1].Hooks[0].Timeout != 300 || !strings.Contains(out.String(), "updated in") {
		t.Errorf("second install: %+v, said %q", pre, out.String())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("files left next to settings.json: %v", entries)
	}
}

func TestInstallRecognisesOtherPaths(t *testing.T) {
	path := filepath.Join(t.TempDir(), "settings.json")
	os.WriteFile(path, []byte(`{"hooks":{"PreToolUse":[{"matcher":"Bash|Write","hooks":[{"type":"command","command":"/opt/bin/countersign hook claude","timeout":600}]}]}}`), 0o600)
	if _, err := MergeSettings(path, InstallOptions{Timeout: DefaultTimeout, Command: "countersign hook claude", Events: []string{EventPreToolUse}}); err != nil {
		t.Fatal(err)
	}
	var s struct {
		Hooks map[string][]groupJSON `json:"hooks"`
	}
	json.Unmarshal(readFile(t, path), &s)
	if pre := s.Hooks["PreToolUse"]; len(pre) != 1 || len(pre[0].Hooks) != 1 || pre[0].Matcher != "Bash|Write" {
		t.Errorf("an existing countersign entry was duplicated: %+v", pre)
	} else if pre[0].Hooks[0].OnFailure != "block" {
		t.Errorf("the updated entry does not block the call when it fails: %+v", pre[0].Hooks[0])
	}
}

func TestInstallCreatesAndRefuses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new", "settings.json")
	var out bytes.Buffer
	if err := Install([]string{"--settings", path}, &out, &out, noEnv); err != nil {
		t.Fatal(err)
	}
	if got := string(readFile(t, path)); got != printedBlock {
		t.Errorf("new file\n%s", got)
	}
	for name, content := range map[string]string{
		"not JSON":          "{",
		"not an object":     "[]",
		"hooks not object":  `{"hooks": []}`,
		"event not a list":  `{"hooks": {"PreToolUse": {}}}`,
		"trailing data":     `{} {}`,
		"hooks is a string": `{"hooks": "x"}`,
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".json")
		os.WriteFile(p, []byte(content), 0o600)
		if err := Install([]string{"--settings", p}, &out, &out, noEnv); err == nil {
			t.Errorf("%s: no error", name)
		}
		if got := string(readFile(t, p)); got != content {
			t.Errorf("%s: the file was changed to %q", name, got)
		}
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// topKeys returns the keys of a JSON object in order.
func topKeys(t *testing.T, data []byte) []string {
	t.Helper()
	o, err := parseObject(data)
	if err != nil {
		t.Fatal(err)
	}
	return o.keys
}

// noEnv is an empty environment.
func noEnv(string) string { return "" }

const printedHTTPBlock = `{
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "http",
            "url": "http://127.0.0.1:8080/api/v1/hooks/claude?timeout=600",
            "headers": {
              "Authorization": "Bearer $COUNTERSIGN_KEY",
              "X-Countersign-Path": "$PATH",
              "X-Countersign-Project-Dir": "$PWD"
            },
            "allowedEnvVars": [
              "COUNTERSIGN_KEY",
              "PWD",
              "PATH"
            ],
            "timeout": 600,
            "onFailure": "block"
          }
        ]
      }
    ],
    "PostToolUse": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "http",
            "url": "http://127.0.0.1:8080/api/v1/hooks/claude?timeout=600",
            "headers": {
              "Authorization": "Bearer $COUNTERSIGN_KEY",
              "X-Countersign-Path": "$PATH",
              "X-Countersign-Project-Dir": "$PWD"
            },
            "allowedEnvVars": [
              "COUNTERSIGN_KEY",
              "PWD",
              "PATH"
            ],
            "timeout": 600
          }
        ]
      }
    ],
    "PostToolUseFailure": [
      {
        "matcher": "*",
        "hooks": [
          {
            "type": "http",
            "url": "http://127.0.0.1:8080/api/v1/hooks/claude?timeout=600",
            "headers": {
              "Authorization": "Bearer $COUNTERSIGN_KEY",
              "X-Countersign-Path": "$PATH",
              "X-Countersign-Project-Dir": "$PWD"
            },
            "allowedEnvVars": [
              "COUNTERSIGN_KEY",
              "PWD",
              "PATH"
            ],
            "timeout": 600
          }
        ]
      }
    ]
  }
}
`

// TestInstallHTTP: --http writes Claude Code's HTTP hook for the
// configured server, with the key as a reference to Claude Code's
// environment, never the key; installing one kind over the other replaces
// countersign's entry instead of adding a second.
func TestInstallHTTP(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"COUNTERSIGN_URL": "http://127.0.0.1:8080/", "COUNTERSIGN_KEY": "csk_secret_never_written"}[k]
	}
	var out, errs bytes.Buffer
	if err := Install([]string{"--http"}, &out, &errs, env); err != nil {
		t.Fatal(err)
	}
	if out.String() != printedHTTPBlock {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), printedHTTPBlock)
	}
	for _, bad := range [][]string{{"--http"}, {"--server", "http://x"}, {"--http", "--server", "ftp://x"}, {"--http", "--server", "http://x/?a=b"}} {
		if err := Install(bad, &out, &errs, noEnv); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}

	path := filepath.Join(t.TempDir(), "settings.json")
	if err := os.WriteFile(path, []byte(`{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"lint"}]}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	entries := func() []hookJSON {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "csk_secret_never_written") {
			t.Fatal("settings.json holds the key")
		}
		var v struct {
			Hooks map[string][]groupJSON `json:"hooks"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		var list []hookJSON
		for _, g := range v.Hooks["PreToolUse"] {
			list = append(list, g.Hooks...)
		}
		return list
	}
	for _, step := range []struct {
		args []string
		want string // the type of countersign's entry
	}{
		{[]string{"--settings", path}, "command"},
		{[]string{"--settings", path, "--http", "--server", "http://127.0.0.1:9000"}, "http"},
		{[]string{"--settings", path, "--http", "--server", "http://127.0.0.1:9000", "--timeout", "300"}, "http"},
		{[]string{"--settings", path}, "command"},
	} {
		if err := Install(step.args, &out, &errs, env); err != nil {
			t.Fatalf("%q: %v", step.args, err)
		}
		list := entries()
		if len(list) != 2 || list[0].Command != "lint" || list[1].Type != step.want {
			t.Fatalf("after %q: %+v; want lint and one countersign %s hook", step.args, list, step.want)
		}
		if step.want == "http" && list[1].URL != "http://127.0.0.1:9000/api/v1/hooks/claude?timeout="+strconv.Itoa(list[1].Timeout) {
			t.Errorf("after %q: url %s, timeout %d", step.args, list[1].URL, list[1].Timeout)
		}
	}
}
