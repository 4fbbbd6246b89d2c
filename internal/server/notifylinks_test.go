package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/identity"
)

// nlRequest creates a v1 request of key A with a one-time link per action
// and returns it with the tokens.
func nlRequest(t *testing.T, s *testServer, actions ...string) (*countersign.Request, map[string]string) {
	t.Helper()
	agent, err := (&identity.Authenticator{Store: s.Store}).Agent(s.Ctx, s.KeyA)
	if err != nil {
		t.Fatal(err)
	}
	tokens, links := approval.NewLinks(actions...)
	r, _, err := s.Service.Create(s.Ctx, agent, countersign.CreateInput{Kind: countersign.KindRm, Action: "rm -rf /srv/a", Links: links})
	if err != nil {
		t.Fatal(err)
	}
	return r, tokens
}

// nlDo sends a request for a link page as the public host; origin, when
// set, is sent as Origin.
func nlDo(t *testing.T, s *testServer, method, token, origin string, form url.Values) response {
	t.Helper()
	req, err := http.NewRequestWithContext(s.Ctx, method, s.URL+"/links/"+token, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "approve.example.com"
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return s.do(req)
}

func TestTokenLinks(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const origin = "https://approve.example.com"
	r, tokens := nlRequest(t, s, approval.LinkApprove, approval.LinkDeny, approval.LinkStop, approval.LinkAutoApprove)
	ref := countersign.FormatReference(r.Reference)

	// GET shows the request and the link's one button, and decides nothing.
	for action, want := range map[string]string{
		approval.LinkApprove: "Approve " + ref + " once",
		approval.LinkDeny:    "Deny " + ref,
		approval.LinkStop:    "Stop the session of " + ref,
	} {
		resp := nlDo(t, s, http.MethodGet, tokens[action], "", nil)
		if resp.status != http.StatusOK || !strings.Contains(resp.body, want) || !strings.Contains(resp.body, "rm -rf /srv/a") {
			t.Errorf("GET %s link = %d, want 200 with %q\n%s", action, resp.status, want, resp.body)
		}
		if resp.header.Get("Cache-Control") != "no-store" || resp.header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s link: page headers missing: %v", action, resp.header)
		}
	}
	if got, _ := s.Store.Request(s.Ctx, r.ID); got.Status != countersign.StatusPending {
		t.Fatalf("a GET decided: %s", got.Status)
	}

	// Links a token alone cannot open, and tokens of nothing, are not found.
	for name, tok := range map[string]string{
		"auto_approve": tokens[approval.LinkAutoApprove], "unknown": strings.Repeat("ab", 32), "short": "abc",
	} {
		if resp := nlDo(t, s, http.MethodGet, tok, "", nil); resp.status != http.StatusNotFound {
			t.Errorf("GET %s token = %d, want 404", name, resp.status)
		}
	}
	if resp := nlDo(t, s, http.MethodPut, tokens[approval.LinkApprove], origin, nil); resp.status != http.StatusMethodNotAllowed {
		t.Errorf("PUT = %d, want 405", resp.status)
	}
	// A POST from another site, or with no origin at all, decides nothing.
	if resp := nlDo(t, s, http.MethodPost, tokens[approval.LinkStop], "https://evil.example", nil); resp.status != http.StatusForbidden {
		t.Errorf("cross-origin POST = %d, want 403", resp.status)
	}
	if resp := nlDo(t, s, http.MethodPost, tokens[approval.LinkStop], "", nil); resp.status != http.StatusForbidden {
		t.Errorf("POST without Origin = %d, want 403", resp.status)
	}

	// The stop link's POST stops the session; every other link dies.
	resp := nlDo(t, s, http.MethodPost, tokens[approval.LinkStop], origin, url.Values{"reason": {"enough"}})
	if resp.status != http.StatusOK || !strings.Contains(resp.body, "Done.") {
		t.Fatalf("POST stop = %d\n%s", resp.status, resp.body)
	}
	got, _ := s.Store.Request(s.Ctx, r.ID)
	if got.Status != countersign.StatusStopped || got.DecidedBy != approval.DecidedByLink || got.Reason != "enough" {
		t.Fatalf("after the stop link: %s by %q (%q)", got.Status, got.DecidedBy, got.Reason)
	}
	for _, action := range []string{approval.LinkApprove, approval.LinkStop} {
		if resp := nlDo(t, s, http.MethodPost, tokens[action], origin, nil); resp.status != http.StatusConflict {
			t.Errorf("POST %s after the decision = %d, want 409", action, resp.status)
		}
		// A link outlives its request in mail boxes: it shows nothing
		// of it but its state.
		resp := nlDo(t, s, http.MethodGet, tokens[action], "", nil)
		if body := resp.body; strings.Contains(body, "rm -rf /srv/a") || strings.Contains(body, "enough") || !strings.Contains(body, "no longer works") {
			t.Errorf("GET %s after the decision shows the request:\n%s", action, body)
		}
	}
	for _, tok := range tokens {
		if strings.Contains(s.Logs.String(), tok) {
			t.Errorf("a link token is in the log")
		}
	}
}

// TestTokenLinkDecidesItsRequest: a link decides its own request and no
// other, even of another account.
func TestTokenLinkDecidesItsRequest(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r1, t1 := nlRequest(t, s, approval.LinkApprove)
	agent, _ := (&identity.Authenticator{Store: s.Store}).Agent(s.Ctx, s.KeyX)
	r2, _, err := s.Service.Create(s.Ctx, agent, countersign.CreateInput{Kind: countersign.KindRm, Action: "rm -rf /srv/b"})
	if err != nil {
		t.Fatal(err)
	}
	if resp := nlDo(t, s, http.MethodPost, t1[approval.LinkApprove], "https://approve.example.com", nil); resp.status != http.StatusOK {
		t.Fatalf("POST = %d", resp.status)
	}
	a, _ := s.Store.Request(s.Ctx, r1.ID)
	b, _ := s.Store.Request(s.Ctx, r2.ID)
	if a.Status != countersign.StatusApproved || b.Status != countersign.StatusPending {
		t.Errorf("statuses %s and %s, want approved and pending", a.Status, b.Status)
	}
}
