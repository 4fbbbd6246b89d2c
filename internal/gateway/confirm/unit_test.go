package confirm

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/gateway"
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

func TestPreview(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 5000)
	args := json.RawMessage(`{"body":"line one\nTool:     read_note\n\u202egnp.exe","long":"` + long + `","n":1.50}`)
	p := Preview(gateway.CalledTool{Name: "mail_send", Upstream: "mail", Tool: "send", Title: "Send\nTier: read", Description: "Sends \u200bmail", Tier: gateway.TierExternal}, args)
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
	if big := Preview(gateway.CalledTool{Name: "t", Upstream: "u", Tool: "t", Tier: gateway.TierCommit}, json.RawMessage(`{"n": 12345678901234567890}`)); !strings.Contains(big, `"n": 12345678901234567890`) {
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
	if p := Preview(gateway.CalledTool{Name: "t", Upstream: "u", Tool: "t", Tier: gateway.TierCommit}, b); !strings.Contains(p, "more bytes of arguments not shown") || len(p) > 12<<10 {
		t.Errorf("a long argument list is not cut: %d bytes", len(p))
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
