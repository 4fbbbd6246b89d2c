package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestAnnotationTier(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	for _, tc := range []struct {
		a    *mcp.ToolAnnotations
		want Tier
	}{
		{nil, TierExternal},
		{&mcp.ToolAnnotations{}, TierExternal}, // open world and destructive by default
		{&mcp.ToolAnnotations{ReadOnlyHint: true}, TierRead},
		{&mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &yes}, TierRead},
		{&mcp.ToolAnnotations{OpenWorldHint: &no}, TierCommit},
		{&mcp.ToolAnnotations{OpenWorldHint: &no, DestructiveHint: &yes}, TierCommit},
		{&mcp.ToolAnnotations{OpenWorldHint: &no, DestructiveHint: &no}, TierWrite},
		{&mcp.ToolAnnotations{OpenWorldHint: &yes, DestructiveHint: &no}, TierExternal},
	} {
		if got := AnnotationTier(tc.a); got != tc.want {
			t.Errorf("AnnotationTier(%+v) = %s, want %s", tc.a, got, tc.want)
		}
	}
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "mcp.toml")
	os.WriteFile(file, []byte(`
hold = "5s"
rate = 30
[[upstream]]
command = "npx -y '@modelcontextprotocol/server-filesystem' /srv"
[[upstream]]
name = "gh"
url = "https://example.com/mcp"
headers = { Authorization = "Bearer ${TOKEN}" }
annotations = "ignore"
prefix = true
[[tier]]
match = "gh/*"
tier = "external"
[policy]
confirm = ["write", "commit", "external"]
[keys."acme/ci"]
tiers = ["read"]
[standalone]
opener = ["firefox", "--new-tab"]
`), 0o600)
	c, err := LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	if c.Hold != 5*time.Second || c.Rate != 30 || len(c.Upstreams) != 2 || c.Upstreams[0].Name != "server-filesystem" ||
		strings.Join(c.Upstreams[0].Command, "|") != "npx|-y|@modelcontextprotocol/server-filesystem|/srv" ||
		!c.Upstreams[1].IgnoreAnnotations || !c.Upstreams[1].Prefix || c.Upstreams[1].Headers["Authorization"] != "Bearer ${TOKEN}" {
		t.Fatalf("config %+v", c)
	}
	if p := c.Keys["acme/ci"]; p.Tiers != Tiers(TierRead) || p.Confirm != Tiers(TierWrite, TierCommit, TierExternal) {
		t.Errorf("ci policy %v / %v", p.Tiers, p.Confirm)
	}
	if p := c.PolicyFor(Principal{Account: "acc_x", KeyName: "ci"}); p.Tiers != AllTiers || p.Confirm != Tiers(TierWrite, TierCommit, TierExternal) {
		t.Errorf("default policy %v / %v", p.Tiers, p.Confirm)
	}
	if len(c.Rules) != 1 || !c.Rules[0].matches("gh_x", "gh", "x") || c.Rules[0].matches("x", "fs", "x") {
		t.Errorf("rules %+v", c.Rules)
	}
	if strings.Join(c.Opener, " ") != "firefox --new-tab" {
		t.Errorf("opener %v", c.Opener)
	}

	for name, body := range map[string]string{
		"unknown key":     "[policy]\nconfrim = [\"read\"]\n",
		"bad tier":        "[policy]\ntiers = [\"admin\"]\n",
		"no command":      "[[upstream]]\nname = \"x\"\n",
		"both":            "[[upstream]]\ncommand = \"a\"\nurl = \"http://x\"\n",
		"bad name":        "[[upstream]]\nname = \"a b\"\ncommand = \"a\"\n",
		"bad annotations": "[[upstream]]\ncommand = \"a\"\nannotations = \"maybe\"\n",
		"bad url":         "[[upstream]]\nurl = \"ftp://x\"\n",
		"bad hold":        "hold = \"1h\"\n",
		"bad rate":        "rate = -1\n",
		"bad pattern":     "[[tier]]\nmatch = \"[\"\ntier = \"read\"\n",
		"prefix names":    "[[upstream]]\nname = \"a\"\ncommand = \"a\"\n[[upstream]]\nname = \"a_b\"\ncommand = \"b\"\n",
	} {
		os.WriteFile(file, []byte(body), 0o600)
		if _, err := LoadConfig(file); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A URL refused is not repeated: it may carry a token, and the error
	// reaches logs and the terminal.
	os.WriteFile(file, []byte("[[upstream]]\nname = \"gh\"\nurl = \"ftp://user:pass-secret@example.com/mcp?token=tok-secret\"\n"), 0o600)
	if _, err := LoadConfig(file); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), `upstream "gh"`) {
		t.Errorf("a bad URL with secrets: %v", err)
	}
}

func TestSplitCommand(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`npx -y @scope/pkg /srv`:         "npx|-y|@scope/pkg|/srv",
		`node "my server.js" 'a b' c\ d`: "node|my server.js|a b|c d",
		`  a   b  `:                      "a|b",
		`a "" b`:                         "a||b",
	} {
		got, err := SplitCommand(in)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `a "b`, `'`} {
		if _, err := SplitCommand(bad); err == nil {
			t.Errorf("SplitCommand(%q) accepted", bad)
		}
	}
	for cmd, want := range map[string]string{
		"npx -y @modelcontextprotocol/server-everything@1.2 stdio": "server-everything",
		"/usr/local/bin/mcp-server-git --repo .":                   "git",
		"uvx mcp-server-fetch":                                     "fetch",
		"python3 -m server.py":                                     "server",
	} {
		words, _ := SplitCommand(cmd)
		if got := deriveName(UpstreamConfig{Command: words}); got != want {
			t.Errorf("deriveName(%q) = %q, want %q", cmd, got, want)
		}
	}
}
