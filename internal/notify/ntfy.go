package notify

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/countersign/countersign"
)

// maxNtfyBody keeps a message under ntfy's limit of 4096 bytes, beyond
// which it turns the message into an attachment.
const maxNtfyBody = 3800

// sequencePattern is what ntfy accepts as a sequence id.
var sequencePattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[-_A-Za-z0-9]{1,64}$`) }) // compiled on first use: every role starts with this package

// sendNtfy publishes m to the channel's topic (POST /<topic>, the message
// as the body, the rest in headers). A request's messages share its id as
// their sequence id, so that ntfy 2.16 and later replace the first message
// with its follow-up; older servers show both. The message carries no
// link token: its one action opens the request in the inbox, behind the
// approver's sign-in.
func (d *Delivery) sendNtfy(ctx context.Context, set Settings, token string, m *Message) error {
	var body bytes.Buffer
	if err := ntfyBody().Execute(&body, m); err != nil {
		return permanent(err)
	}
	text := body.String()
	if len(text) > maxNtfyBody {
		text = truncateUTF8(text, maxNtfyBody-3) + "…"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, set.Server+"/"+set.Topic, strings.NewReader(text))
	if err != nil {
		return permanent(err)
	}
	h := req.Header
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("User-Agent", "countersign")
	h.Set("Title", ntfyTitle(m))
	h.Set("Priority", ntfyPriority(m))
	h.Set("Tags", ntfyTag(m))
	h.Set("Click", m.InboxURL)
	// The label is fixed and the URL is ours: neither holds a comma or a
	// semicolon, which would split the action.
	h.Set("Actions", "view, Open in inbox, "+m.InboxURL+", clear=true")
	if m.Request != nil && sequencePattern().MatchString(m.Request.ID) {
		h.Set("X-Sequence-ID", m.Request.ID)
	}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return d.do(req, "publish to ntfy")
}

// ntfyTitle is the title of a message: ASCII only (reference, kind and
// status), so that no header encoding is needed.
func ntfyTitle(m *Message) string {
	r := m.Request
	switch {
	case r == nil:
		return "countersign test"
	case r.Status == countersign.StatusPending:
		return "Approve? " + m.Ref() + " (" + string(r.Kind) + ")"
	}
	return m.Ref() + " " + string(r.Status)
}

// ntfyPriority rings for a request that waits and stays quiet for the
// follow-up that replaces it.
func ntfyPriority(m *Message) string {
	if m.Request != nil && m.Request.Status == countersign.StatusPending {
		return "high"
	}
	return "low"
}

func ntfyTag(m *Message) string {
	if m.Request == nil {
		return "bell"
	}
	switch m.Request.Status {
	case countersign.StatusPending:
		return "warning"
	case countersign.StatusApproved, countersign.StatusConsumed:
		return "white_check_mark"
	case countersign.StatusDenied:
		return "x"
	case countersign.StatusStopped:
		return "stop_sign"
	case countersign.StatusResponded:
		return "speech_balloon"
	}
	return "hourglass"
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
