package notify_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/notify"
)

func TestConfigFile(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("hook.secret", "a webhook secret\n")
	write("smtp.password", "an smtp password\n")
	path := write("notify.toml", `
[[channel]]
account = "acme"
name = "n8n"
type = "webhook"
url = "https://n8n.example.com/webhook/countersign"
secret_file = "hook.secret"

[[channel]]
account = "acme"
name = "mail"
type = "email"
smtp_host = "smtp.example.com"
smtp_username = "countersign@example.com"
secret_file = "smtp.password"
from = "countersign <countersign@example.com>"
to = ["admin@example.com"]

[[channel]]
account = "acme"
name = "phone"
type = "ntfy"
topic = "countersign-x8k2"
`)
	specs, err := notify.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 3 || specs[0].Secret != "a webhook secret" || specs[1].Settings.SMTPHost != "smtp.example.com" || specs[1].Secret != "an smtp password" {
		t.Fatalf("specs = %+v", specs)
	}
	created, updated, err := e.admin.Apply(e.ctx, specs)
	if err != nil || created != 3 || updated != 0 {
		t.Fatalf("Apply = %d created, %d updated, %v", created, updated, err)
	}
	list, _ := e.admin.List(e.ctx, "acme")
	var describe []string
	for _, c := range list {
		describe = append(describe, c.Name+": "+notify.Describe(c))
		if strings.Contains(string(c.Config), "password") || strings.Contains(string(c.Config), "secret") || strings.Contains(string(c.Secret), "secret") {
			t.Errorf("channel %s stores a secret in the clear: %s", c.Name, c.Config)
		}
	}
	want := `mail: "countersign" <countersign@example.com> via` + " smtp.example.com:587 (starttls) to admin@example.com|" +
		"n8n: POST https://n8n.example.com/…|phone: https://ntfy.sh/countersign-x8k2"
	if got := strings.Join(describe, "|"); got != want {
		t.Errorf("channels:\n got %s\nwant %s", got, want)
	}

	// Applying again updates in place; the ids stay.
	specs[2].Settings.Topic = "another-topic"
	created, updated, err = e.admin.Apply(e.ctx, specs)
	after, _ := e.admin.List(e.ctx, "acme")
	if err != nil || created != 0 || updated != 3 || after[2].ID != list[2].ID || notify.Describe(after[2]) != "https://ntfy.sh/another-topic" {
		t.Fatalf("second Apply = %d, %d, %v; %s", created, updated, err, notify.Describe(after[2]))
	}

	// A typo is an error, not a silently dropped setting.
	bad := write("bad.toml", "[[channel]]\nname = \"x\"\ntype = \"ntfy\"\ntopik = \"t\"\n")
	if _, err := notify.LoadFile(bad); countersign.ErrorCode(err) != countersign.EINVALID || !strings.Contains(err.Error(), "channel.topik") {
		t.Errorf("LoadFile(typo) = %v", err)
	}
	// A secret written in the file itself is not a key.
	inline := write("inline.toml", "[[channel]]\nname = \"x\"\ntype = \"webhook\"\nsecret = \"s\"\n")
	if _, err := notify.LoadFile(inline); err == nil {
		t.Errorf("LoadFile accepted an inline secret")
	}
}
