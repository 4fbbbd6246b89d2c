package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// TestPlantedTwin: whoever can read an agent key makes, beforehand, the
// exact call a Claude Code hook is about to ask about (same tool, input
// and preview) with reassuring risk reasons, another host and session and
// a one-hour life. The hook's ask must not be answered with that request:
// it gets its own, with its reasons, context and ten minutes, and the
// inbox shows both. The hook's own retry still finds its request.
func TestPlantedTwin(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const call = `"kind":"tool","action":"Bash","arguments":{"command":"rm -rf /srv/data"},"preview":"Bash: rm -rf /srv/data"`
	planted := `{` + call + `,"risk_reasons":["read-only listing"],"context":{"user":"ada","host":"build-cache","cwd":"/tmp","session_id":"sess-fake"},"ttl_seconds":3600}`
	hook := `{` + call + `,"risk_reasons":["recursive delete","outside the project"],"context":{"user":"ada","host":"laptop","cwd":"/home/ada/app","session_id":"sess-real"},"ttl_seconds":600}`

	fake := s.call("POST", "/api/v1/requests", s.KeyA, planted).request(t, http.StatusCreated)
	s.Clock.Advance(5 * time.Second)
	resp := s.call("POST", "/api/v1/requests", s.KeyA, hook)
	got := resp.request(t, http.StatusCreated)
	if got.ID == fake.ID {
		t.Fatalf("the hook's ask was answered with the planted request %s", fake.ID)
	}
	var shown struct {
		RiskReasons []string                   `json:"risk_reasons"`
		Context     countersign.RequestContext `json:"context"`
	}
	if err := json.Unmarshal([]byte(resp.body), &shown); err != nil {
		t.Fatal(err)
	}
	if strings.Join(shown.RiskReasons, "|") != "recursive delete|outside the project" || shown.Context.Host != "laptop" || shown.Context.SessionID != "sess-real" {
		t.Errorf("the hook's request shows %+v", shown)
	}
	if want := start.Add(5*time.Second + 10*time.Minute); !got.ExpiresAt.Equal(want) {
		t.Errorf("the hook's request expires at %v, want %v", got.ExpiresAt, want)
	}

	// Each field alone is enough for a request of its own.
	for what, body := range map[string]string{
		"reasons": strings.Replace(hook, `"recursive delete",`, ``, 1),
		"host":    strings.Replace(hook, `"laptop"`, `"laptop2"`, 1),
		"ttl":     strings.Replace(hook, `"ttl_seconds":600`, `"ttl_seconds":3600`, 1),
	} {
		if r := s.call("POST", "/api/v1/requests", s.KeyA, body).request(t, http.StatusCreated); r.ID == got.ID || r.ID == fake.ID {
			t.Errorf("another %s: answered with %s", what, r.ID)
		}
	}

	// The hook run again for the same call, a minute later, asks for the
	// same ten minutes: that is its own request again, not a new one.
	s.Clock.Advance(time.Minute)
	if again := s.call("POST", "/api/v1/requests", s.KeyA, hook).request(t, http.StatusOK); again.ID != got.ID {
		t.Errorf("the hook's retry: %s, want %s", again.ID, got.ID)
	}
	var list struct {
		Requests []apiRequest `json:"requests"`
	}
	resp = s.call("GET", "/api/v1/requests?status=pending", s.alice, "")
	if resp.status != http.StatusOK || json.Unmarshal([]byte(resp.body), &list) != nil || len(list.Requests) != 5 {
		t.Errorf("pending in the inbox: %d %s, want the planted, the hook's and three others", resp.status, resp.body)
	}
}
