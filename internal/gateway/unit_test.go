package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestStateCodec(t *testing.T) {
	t.Parallel()
	c, err := newStateCodec(randomKey())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_900_000_000, 0)
	st := requestState{Principal: "key_a", Account: "acc_1", Tool: "delete_note", ArgsHash: "h1", PreviewHash: "p1",
		Request: "req_1", Mode: modeForm, Expires: now.Add(10 * time.Minute).Unix()}
	want := requestState{Principal: "key_a", Account: "acc_1", Tool: "delete_note", ArgsHash: "h1", PreviewHash: "p1"}
	sealed := c.seal(st)
	if strings.Contains(sealed, "req_1") || strings.Contains(sealed, "key_a") {
		t.Fatalf("the state is readable: %s", sealed)
	}
	got, err := c.open(sealed, now, want)
	if err != nil || got.Request != "req_1" || got.Mode != modeForm {
		t.Fatalf("open: %+v, %v", got, err)
	}
	if c.seal(st) == sealed {
		t.Error("two seals of one state are equal: the nonce is not fresh")
	}

	other, _ := newStateCodec(randomKey())
	raw := []byte(sealed)
	raw[len(raw)-3] ^= 0x01
	cases := map[string]func() (requestState, error){
		"another key":       func() (requestState, error) { return other.open(sealed, now, want) },
		"tampered":          func() (requestState, error) { return c.open(string(raw), now, want) },
		"truncated":         func() (requestState, error) { return c.open(sealed[:20], now, want) },
		"garbage":           func() (requestState, error) { return c.open("%%%", now, want) },
		"at its expiry":     func() (requestState, error) { return c.open(sealed, now.Add(10*time.Minute), want) },
		"another principal": func() (requestState, error) { w := want; w.Principal = "key_b"; return c.open(sealed, now, w) },
		"another account":   func() (requestState, error) { w := want; w.Account = "acc_2"; return c.open(sealed, now, w) },
		"another tool":      func() (requestState, error) { w := want; w.Tool = "send_mail"; return c.open(sealed, now, w) },
		"other arguments":   func() (requestState, error) { w := want; w.ArgsHash = "h2"; return c.open(sealed, now, w) },
		"another preview":   func() (requestState, error) { w := want; w.PreviewHash = "p2"; return c.open(sealed, now, w) },
	}
	for name, open := range cases {
		if _, err := open(); err != errBadState {
			t.Errorf("%s: %v, want errBadState", name, err)
		}
	}
}

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

func TestPreview(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 5000)
	args := json.RawMessage(`{"body":"line one\nTool:     read_note\n\u202egnp.exe","long":"` + long + `","n":1.50}`)
	p := Preview("mail_send", "mail", "send", &ToolInfo{Title: "Send\nTier: read", Description: "Sends \u200bmail"}, TierExternal, args)
	for _, want := range []string{
		"Tool:     mail_send\n", "Tier:     external\n",
		`Title:    "Send\nTier: read"`, // the upstream's text stays one quoted line
		`"line one\nTool:     read_note\n\u202egnp.exe"`,
		`"n": 1.50`, // numbers exactly as sent
		"[4400 more characters not shown]", "[arguments cut for display",
		`Sends \u200bmail`,
	} {
		if !strings.Contains(p, want) {
			t.Errorf("preview lacks %q:\n%s", want, p)
		}
	}
	if big := Preview("t", "u", "t", nil, TierCommit, json.RawMessage(`{"n": 12345678901234567890}`)); !strings.Contains(big, `"n": 12345678901234567890`) {
		t.Errorf("a large integer is not shown as sent:\n%s", big)
	}
	if strings.Count(p, "\nTool:") != 1 || strings.ContainsRune(p, '\u202e') || strings.ContainsRune(p, '\u200b') {
		t.Errorf("the arguments shaped the preview:\n%s", p)
	}
	if len(p) > 16<<10 {
		t.Errorf("preview of %d bytes", len(p))
	}
	many := map[string]string{}
	for i := range 2000 {
		many[strings.Repeat("k", 5)+string(rune('a'+i%26))+strings.Repeat("z", i%7)+json.Number(rune('0'+i%10)).String()+string(rune(i))] = "v"
	}
	b, _ := json.Marshal(many)
	if p := Preview("t", "u", "t", nil, TierCommit, b); !strings.Contains(p, "more bytes of arguments not shown") || len(p) > 12<<10 {
		t.Errorf("a long argument list is not cut: %d bytes", len(p))
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

// TestHolds: a key has at most maxHolds retries held at once; another key
// has its own.
func TestHolds(t *testing.T) {
	t.Parallel()
	var h holds
	for i := range maxHolds {
		if !h.take("key_a") {
			t.Fatalf("hold %d of key_a refused", i+1)
		}
	}
	if h.take("key_a") {
		t.Error("a hold beyond maxHolds was taken")
	}
	if !h.take("key_b") {
		t.Error("another key's hold was refused")
	}
	h.give("key_a")
	if !h.take("key_a") {
		t.Error("a hold given back was not free again")
	}
	for range maxHolds {
		h.give("key_a")
	}
	h.give("key_b")
	if len(h.n) != 0 {
		t.Errorf("counts left: %v", h.n)
	}
}
