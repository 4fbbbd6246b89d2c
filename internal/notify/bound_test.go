package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// TestMailBounded: the e-mail of a request with the longest fields the
// limits allow shows each target's beginning with a mark of the rest, and
// stays small.
func TestMailBounded(t *testing.T) {
	long := "/" + strings.Repeat("d", 1500)
	targets := make([]string, 20)
	for i := range targets {
		targets[i] = long
	}
	args, _ := json.Marshal(map[string]any{"targets": targets})
	m := &Message{Event: countersign.EventCreated, Now: time.Now(), Request: &countersign.Request{
		Reference: "K7F2QX", Kind: countersign.KindRm, Action: strings.Repeat("'", 4096), Preview: strings.Repeat("'", 16<<10),
		Arguments: args, Status: countersign.StatusPending, ExpiresAt: time.Now().Add(time.Minute),
	}}
	text, html, err := renderMail(m)
	if err != nil {
		t.Fatal(err)
	}
	for name, part := range map[string]string{"text": text, "html": html} {
		if strings.Contains(part, long) || !strings.Contains(part, "(truncated, ") {
			t.Errorf("%s part shows a whole long target, or no mark of its cut", name)
		}
		if len(part) > 256<<10 {
			t.Errorf("%s part is %d bytes", name, len(part))
		}
	}
}
