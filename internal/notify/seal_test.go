package notify_test

import (
	"bytes"
	"database/sql"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// TestPayloadSealed: the link tokens of a queued notification are not in
// the database in the clear, and nothing of the payload stays once it is
// sent.
func TestPayloadSealed(t *testing.T) {
	e := newEnv(t)
	m := newMailServer(t, "starttls")
	addEmail(t, e, m, "starttls")
	e.ask("rm -rf /srv/data")

	raw, err := sql.Open("sqlite", e.path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var queued []byte
	if err := raw.QueryRow(`SELECT payload FROM outbox`).Scan(&queued); err != nil || len(queued) == 0 {
		t.Fatalf("read the queued payload: %d bytes, %v", len(queued), err)
	}
	var secret []byte
	if err := raw.QueryRow(`SELECT secret FROM notify_channels`).Scan(&secret); err != nil || bytes.Contains(secret, []byte(m.pass)) {
		t.Fatalf("the SMTP password is stored in the clear (%v)", err)
	}

	e.runOnce(1)
	text := parseMail(t, m.messages()[0].data).text
	tokens := tokenPattern.FindAllStringSubmatch(text, -1)
	if len(tokens) != 3 {
		t.Fatalf("found %d link tokens in the mail, want 3", len(tokens))
	}
	for _, tok := range tokens {
		if bytes.Contains(queued, []byte(tok[1])) || strings.Contains(string(queued), `"links"`) {
			t.Errorf("the queued payload holds a token in the clear")
		}
	}
	var after []byte
	if err := raw.QueryRow(`SELECT payload FROM outbox`).Scan(&after); err != nil || len(after) != 0 {
		t.Errorf("payload after sending: %d bytes, %v; want none", len(after), err)
	}
	// Only hashes of the tokens are stored with the links.
	for _, tok := range tokens {
		var n int
		raw.QueryRow(`SELECT COUNT(*) FROM links WHERE hash = ?`, tok[1]).Scan(&n)
		if n != 0 {
			t.Errorf("a link token is stored in the clear")
		}
	}
}
