package notify_test

import (
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/notify"
)

// hiddenAction holds characters that display as nothing or reorder the
// text (a soft hyphen, a zero-width space, a word joiner, a byte order
// mark, a right-to-left override and a tag character); hiddenShown is how
// every surface must show it.
const (
	hiddenAction = "rm -rf /srv/\u00adlogs\u200b\u2060\ufeff \u202etxt.exe\U000e0041"
	hiddenShown  = `rm -rf /srv/\u00adlogs\u200b\u2060\ufeff \u202etxt.exe\U000e0041`
)

// wantShown fails unless text shows hiddenAction escaped and holds none of
// its hidden characters raw.
func wantShown(t *testing.T, what, text string) {
	t.Helper()
	if strings.ContainsAny(text, "\u00ad\u200b\u2060\ufeff\u202e\U000e0041") {
		t.Errorf("%s holds a hidden character raw: %q", what, text)
	}
	if !strings.Contains(text, hiddenShown) {
		t.Errorf("%s does not show %s:\n%s", what, hiddenShown, text)
	}
}

// hiddenRequest is a request of the action hiddenAction, which the service
// refuses now; one stored before it did is still told about.
func hiddenRequest(e *env) *countersign.Request {
	in := countersign.CreateInput{Kind: countersign.KindRm, Action: hiddenAction, RiskReasons: []string{"recursive deletion (-r/-R)"}}
	e.wantRefused(in)
	return e.askOld(in)
}

// TestEmailShowsHiddenCharacters: both parts of an e-mail show every
// hidden character of the action as an escape.
func TestEmailShowsHiddenCharacters(t *testing.T) {
	e := newEnv(t)
	m := newMailServer(t, notify.TLSStartTLS)
	addEmail(t, e, m, notify.TLSStartTLS)
	hiddenRequest(e)
	e.runOnce(1)
	p := parseMail(t, m.messages()[0].data)
	wantShown(t, "the text part", p.text)
	wantShown(t, "the HTML part", p.html)
	wantShown(t, "the subject", p.subject)
}

// TestNtfyShowsHiddenCharacters: a push message shows every hidden
// character of the action as an escape.
func TestNtfyShowsHiddenCharacters(t *testing.T) {
	e := newEnv(t)
	ntfy := &ntfyServer{topic: "countersign-x8k2", token: "tk_abcdefghijklmnop"}
	rcv := newReceiver(t, ntfy)
	addNtfy(t, e, rcv.URL(), ntfy.topic, ntfy.token)
	r := hiddenRequest(e)
	e.runOnce(1)
	published, _ := ntfy.messages()
	if len(published) != 1 {
		t.Fatalf("published %d messages, want 1", len(published))
	}
	wantShown(t, "the ntfy message", published[0].Body)
	if want := "Approve? " + countersign.FormatReference(r.Reference) + " (rm)"; published[0].Title != want {
		t.Errorf("title = %q, want %q", published[0].Title, want)
	}
}
