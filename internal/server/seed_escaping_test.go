package server_test

// What a seed client sends is escaped on every page that shows it.

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/approval"
)

// Every value a seed client sends is escaped on the pages.
func TestSeedEscaping(t *testing.T) {
	t.Parallel()
	e := sdNew(t)
	const script, img = `<script>alert(1)</script>`, `"><img src=x onerror=alert(1)>`
	command := `rm -rf "/tmp/` + script + `" "/tmp/` + img + `"`
	p := e.deletePayload("del_xss", command)
	p["risk_reasons"] = []string{"protected path: " + script, img}
	p["affected_paths"] = []string{"/tmp/" + script, "/tmp/" + img}
	p["user"], p["hostname"], p["cwd"] = script, img, "/home/"+script
	out := sdDecode(t, "create", e.signed("/api/delete-requests", p), http.StatusCreated)
	approveURL := e.link("delete-requests", approval.LinkApprove, sdString(out["request_id"]), "")
	denyURL := e.link("delete-requests", approval.LinkDeny, sdString(out["request_id"]), "")

	check := func(what, page string) {
		t.Helper()
		for _, raw := range []string{script, "<img", "<script>alert", "onerror=alert(1)>"} {
			if strings.Contains(page, raw) {
				t.Errorf("%s holds %q unescaped:\n%s", what, raw, page)
			}
		}
		for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s lacks the escaped %q:\n%s", what, want, page)
			}
		}
	}
	check("approve page", sdPage(t, "GET approve link", e.get(approveURL, ""), http.StatusOK))
	check("deny page", sdPage(t, "GET deny link", e.get(denyURL, ""), http.StatusOK))
	page := sdPage(t, "POST deny link", e.press(denyURL, url.Values{"reason": {script + img}}), http.StatusOK)
	check("decided page", page)
	// A used link shows nothing of its request but its state.
	if page := sdPage(t, "POST deny link again", e.press(denyURL, nil), http.StatusConflict); strings.Contains(page, "alert(1)") || !strings.Contains(page, "no longer works") {
		t.Errorf("the used link's page shows the request:\n%s", page)
	}

	sdDecode(t, "create event", e.signed("/api/claude-events", e.eventPayload("evt_xss", img, script, "echo "+script+img)), http.StatusCreated)
	respondURL := e.link("claude-events", approval.LinkRespond, "evt_xss", "")
	check("respond page", sdPage(t, "GET respond link", e.get(respondURL, ""), http.StatusOK))
	check("auto-approve page", sdPage(t, "GET auto-approve link", e.get(e.link("claude-events", approval.LinkAutoApprove, "evt_xss", "15"), ""), http.StatusOK))
	check("responded page", sdPage(t, "POST respond link", e.press(respondURL, url.Values{"response": {script + img}}), http.StatusOK))

	// The JSON answers carry the text as JSON strings, never as markup.
	list := e.get("/api/delete-requests", e.approver)
	if strings.Contains(list.body, "<script>") || strings.Contains(list.body, "<img") {
		t.Errorf("list holds raw markup: %s", list.body)
	}
	items := sdItems(t, "list", sdDecode(t, "list", list, http.StatusOK), "requests")
	if len(items) != 1 || items[0]["command"] != command || items[0]["user"] != script {
		t.Errorf("list: %v", items)
	}
}
