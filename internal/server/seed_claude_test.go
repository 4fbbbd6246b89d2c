package server_test

// The seed's Claude Code event API (/api/claude-events…).

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

func TestSeedClaudeEvents(t *testing.T) {
	t.Parallel()
	e := sdNew(t)
	out := e.createEvent("evt_1", "s-1", "Bash")
	if out["success"] != true || out["event_id"] != "evt_1" {
		t.Errorf("create: %v", out)
	}
	if got, want := sdUnix(t, "expires_at", out["expires_at"]), e.Clock.Now().Add(10*time.Minute).Unix(); got != want {
		t.Errorf("expires_at %d, want %d", got, want)
	}
	// No one-time link goes back to the key's holder, as none does in the
	// seed's answer; the inbox page is where an approver decides.
	if want := e.URL + "/approvals/" + e.stored("claude:evt_1").ID; out["inbox_url"] != want {
		t.Errorf("inbox_url %v, want %s", out["inbox_url"], want)
	}
	for k, v := range out {
		if s, _ := v.(string); sdHex64.MatchString(lastSegment(s)) || strings.HasSuffix(k, "_url") && k != "inbox_url" {
			t.Errorf("the answer carries a link: %s = %v", k, v)
		}
	}
	respondURL := e.link("claude-events", approval.LinkRespond, "evt_1", "")
	respondTok := lastSegment(respondURL)
	e.wantStatus("claude-events", "evt_1", map[string]any{"status": "pending", "response_text": nil, "resolved_by": nil})
	sdWantError(t, "status of an unknown event", e.get("/api/claude-events/evt_nope/status", ""), http.StatusNotFound, countersign.ENOTFOUND)
	if r := e.stored("claude:evt_1"); r.Kind != countersign.KindTool || r.Action != "Bash" || r.Context.SessionID != "s-1" {
		t.Errorf("stored: %+v", r)
	}

	t.Run("signature", func(t *testing.T) {
		e := e.with(t)
		before := e.snapshot()
		body := sdPyJSON(e.eventPayload("evt_x", "s-1", "Bash", "ls"))
		for name, sig := range map[string][2]string{
			"missing":               {"X-Claude-Signature", ""},
			"wrong secret":          {"X-Claude-Signature", sdSign("nope", body)},
			"ordinary key":          {"X-Claude-Signature", sdSign(e.plain, body)},
			"revoked key":           {"X-Claude-Signature", sdSign(e.oldSeed, body)},
			"the SafeRM header":     {"X-SafeRM-Signature", sdSign(e.seed, body)},
			"over another body":     {"X-Claude-Signature", sdSign(e.seed, append(body, ' '))},
			"not hex":               {"X-Claude-Signature", "sha256=xyz"},
			"the secret, not a MAC": {"X-Claude-Signature", e.seed},
		} {
			sdWantError(t, name, e.post("/api/claude-events", sig[0], body, sig[1]), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
		}
		bad := []byte(strings.Replace(string(body), `"tool_input":"ls"`, `"tool_input":1`, 1))
		sdWantError(t, "tool_input a number", e.post("/api/claude-events", "X-Claude-Signature", bad, sdSign(e.seed, bad)), http.StatusBadRequest, countersign.EINVALID)
		unknown := []byte(strings.Replace(string(body), `{"event_id"`, `{"approved":true,"event_id"`, 1))
		sdWantError(t, "unknown field", e.post("/api/claude-events", "X-Claude-Signature", unknown, sdSign(e.seed, unknown)), http.StatusBadRequest, countersign.EINVALID)
		e.unchanged("refused events", before)
	})

	t.Run("same event again", func(t *testing.T) {
		e := e.with(t)
		before := e.snapshot()
		again := sdDecode(t, "again", e.signed("/api/claude-events", e.eventPayload("evt_1", "s-1", "Bash", "run evt_1")), http.StatusOK)
		if again["event_id"] != "evt_1" || again["approve_url"] != nil || again["respond_url"] != nil || again["auto_approve_url"] != nil || again["inbox_url"] != out["inbox_url"] {
			t.Errorf("again: %v", again)
		}
		sdWantError(t, "another body, same event_id", e.signed("/api/claude-events", e.eventPayload("evt_1", "s-1", "Bash", "rm -rf /")), http.StatusConflict, countersign.ECONFLICT)
		sdWantError(t, "another session, same event_id", e.signed("/api/claude-events", e.eventPayload("evt_1", "s-2", "Bash", "run evt_1")), http.StatusConflict, countersign.ECONFLICT)
		e.unchanged("the same event again", before)
	})

	t.Run("respond", func(t *testing.T) {
		e := e.with(t)
		before := e.snapshot()
		page := sdPage(t, "GET respond_url", e.get(respondURL, ""), http.StatusOK)
		for _, want := range []string{
			`<form method="post" action="/api/claude-events/respond/evt_1/` + respondTok + `"`,
			`name="response"`,
			"run evt_1",
		} {
			if !strings.Contains(page, want) {
				t.Errorf("respond page lacks %q:\n%s", want, page)
			}
		}
		sdPage(t, "respond from elsewhere", e.form(respondURL, map[string]string{"Origin": "https://evil.example"}, url.Values{"response": {"hi"}}), http.StatusForbidden)
		sdPage(t, "empty response", e.press(respondURL, url.Values{"response": {""}}), http.StatusBadRequest)
		e.unchanged("GET and refused POSTs of respond", before)

		const text = "Use /tmp/build2 instead — merci & <thanks>"
		page = sdPage(t, "POST respond_url", e.press(respondURL, url.Values{"response": {text}}), http.StatusOK)
		if !strings.Contains(page, "Done") {
			t.Errorf("respond page:\n%s", page)
		}
		e.wantStatus("claude-events", "evt_1", map[string]any{"status": "responded", "response_text": text, "resolved_by": "email"})
		sdPage(t, "approve after respond", e.press(e.link("claude-events", approval.LinkApprove, "evt_1", ""), nil), http.StatusConflict)
		e.wantStatus("claude-events", "evt_1", map[string]any{"status": "responded", "response_text": text, "resolved_by": "email"})
	})

	t.Run("approve link", func(t *testing.T) {
		e := e.with(t)
		e.createEvent("evt_2", "s-2", "Read")
		sdPage(t, "approve", e.press(e.link("claude-events", approval.LinkApprove, "evt_2", ""), nil), http.StatusOK)
		e.wantStatus("claude-events", "evt_2", map[string]any{"status": "approved", "response_text": nil, "resolved_by": "email"})
		e.createEvent("evt_2d", "s-2", "Read")
		sdPage(t, "deny", e.press(e.link("claude-events", approval.LinkDeny, "evt_2d", ""), url.Values{"reason": {"no"}}), http.StatusOK)
		e.wantStatus("claude-events", "evt_2d", map[string]any{"status": "denied", "response_text": nil, "resolved_by": "email"})
	})

	autoLink := func(e *sdEnv, id, minutes string) string {
		return e.link("claude-events", approval.LinkAutoApprove, id, "") + "/" + minutes
	}
	window := func(e *sdEnv, id string) time.Duration {
		r := e.stored("claude:" + id)
		if r.AutoApproveUntil.IsZero() {
			e.t.Fatalf("%s opened no window", id)
		}
		return r.AutoApproveUntil.Sub(r.DecidedAt)
	}

	t.Run("auto-approve clamped", func(t *testing.T) {
		e := e.with(t)
		e.createEvent("evt_3", "s-3", "WebFetch")
		e.createEvent("evt_4", "s-4", "WebFetch")
		before := e.snapshot()
		for _, m := range []string{"abc", "", "1.5"} {
			u := autoLink(e, "evt_3", m)
			if m == "" {
				u = strings.TrimSuffix(u, "/")
			}
			r := e.get(u, "")
			if r.status != http.StatusNotFound {
				t.Errorf("minutes %q: %d", m, r.status)
			}
		}
		page := sdPage(t, "GET auto-approve 0", e.get(autoLink(e, "evt_3", "0"), ""), http.StatusOK)
		if !strings.Contains(page, "Approve for 1 minutes") {
			t.Errorf("minutes 0 not shown as 1:\n%s", page)
		}
		page = sdPage(t, "GET auto-approve 999", e.get(autoLink(e, "evt_4", "999"), ""), http.StatusOK)
		if !strings.Contains(page, "Approve for 60 minutes") {
			t.Errorf("minutes 999 not shown as 60:\n%s", page)
		}
		e.unchanged("GET of auto-approve links", before)

		sdPage(t, "POST auto-approve 0", e.press(autoLink(e, "evt_3", "0"), nil), http.StatusOK)
		sdPage(t, "POST auto-approve 999", e.press(autoLink(e, "evt_4", "999"), nil), http.StatusOK)
		if w := window(e, "evt_3"); w != time.Minute {
			t.Errorf("minutes 0: window %s, want 1m", w)
		}
		if w := window(e, "evt_4"); w != time.Hour {
			t.Errorf("minutes 999: window %s, want 1h", w)
		}
		e.wantStatus("claude-events", "evt_3", map[string]any{"status": "approved", "response_text": nil, "resolved_by": "email"})
		sdPage(t, "auto-approve link again", e.press(autoLink(e, "evt_3", "5"), nil), http.StatusConflict)

		// The window approves the same key, session and tool at once, for a
		// tool that has no shape beyond its name.
		auto := sdDecode(t, "in the window", e.signed("/api/claude-events", e.eventPayload("evt_5", "s-3", "WebFetch", "another command")), http.StatusOK)
		for k, v := range map[string]any{"success": true, "event_id": "evt_5", "status": "auto_approved", "auto_approved": true} {
			if auto[k] != v {
				t.Errorf("in the window: %s = %v, want %v (%v)", k, auto[k], v, auto)
			}
		}
		if _, ok := auto["approve_url"]; ok {
			t.Errorf("an auto-approved event got links: %v", auto)
		}
		e.wantStatus("claude-events", "evt_5", map[string]any{"status": "approved", "response_text": nil, "resolved_by": "auto_approve"})
		e.createEvent("evt_6", "s-3", "Write")        // another tool
		e.createEvent("evt_7", "s-other", "WebFetch") // another session
		// A shell command's shape is not known to the seed's events: no
		// window covers one.
		e.createEvent("evt_6b", "s-3", "Bash")

		// After the clamped minute the window is closed; the hour is not.
		e.Clock.Advance(time.Minute + time.Second)
		e.createEvent("evt_8", "s-3", "WebFetch")
		sdDecode(t, "in the hour window", e.signed("/api/claude-events", e.eventPayload("evt_9", "s-4", "WebFetch", "x")), http.StatusOK)
	})

	t.Run("list", func(t *testing.T) {
		e := e.with(t)
		list := sdItems(t, "list s-3", sdDecode(t, "list", e.get("/api/claude-events?session_id=s-3", e.approver), http.StatusOK), "events")
		if got := sdIDs(list); !slices.Equal(got, []string{"evt_3", "evt_5", "evt_6", "evt_6b", "evt_8"}) {
			t.Errorf("session s-3: %v", got)
		}
		for _, it := range list {
			for _, f := range []string{"id", "event_type", "session_id", "tool_name", "tool_input", "status", "created_at", "expires_at", "response_text", "resolved_by", "resolved_at"} {
				if _, ok := it[f]; !ok {
					t.Errorf("%v lacks %q", it["id"], f)
				}
			}
			for _, k := range sdKeys(it) {
				if strings.Contains(k, "token") {
					t.Errorf("%v shows %q", it["id"], k)
				}
			}
			if it["session_id"] != "s-3" || it["event_type"] != "tool_approval" {
				t.Errorf("item: %v", it)
			}
		}
		pending := sdItems(t, "pending s-3", sdDecode(t, "list", e.get("/api/claude-events?session_id=s-3&status=pending", e.approver), http.StatusOK), "events")
		if got := sdIDs(pending); !slices.Equal(got, []string{"evt_6", "evt_6b", "evt_8"}) {
			t.Errorf("pending in s-3: %v", got)
		}
		responded := sdItems(t, "responded", sdDecode(t, "list", e.get("/api/claude-events?status=responded", e.approver), http.StatusOK), "events")
		if len(responded) != 1 || responded[0]["id"] != "evt_1" || responded[0]["response_text"] == nil || responded[0]["resolved_by"] != "email" {
			t.Errorf("responded: %v", responded)
		}
		sdWantError(t, "agent key", e.get("/api/claude-events", e.plain), http.StatusForbidden, countersign.EFORBIDDEN)
		sdWantError(t, "no credentials", e.get("/api/claude-events", ""), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
	})
}
