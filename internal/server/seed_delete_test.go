package server_test

// The seed's delete-request API (/api/delete-requests…): create, the
// one-time links, expiry and the approvers' list.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
)

func TestSeedDeleteCreate(t *testing.T) {
	t.Parallel()
	e := sdNew(t)
	const id = "del_1700000000_12345"
	payload := e.deletePayload(id, "rm -rf /var/www/data")
	body := sdPyJSON(payload)
	out := sdDecode(t, "create", e.post("/api/delete-requests", "X-SafeRM-Signature", body, sdSign(e.seed, body)), http.StatusCreated)
	if out["success"] != true || out["request_id"] != id {
		t.Errorf("create: %v", out)
	}
	// No one-time link goes back to the key's holder: approval_url is the
	// request's inbox page, where only a signed-in approver decides.
	r := e.stored("delete:" + id)
	if got, want := out["approval_url"], e.URL+"/approvals/"+r.ID; got != want || out["inbox_url"] != want {
		t.Errorf("approval_url %v and inbox_url %v, want both %s", got, out["inbox_url"], want)
	}
	for k, v := range out {
		if s, _ := v.(string); sdHex64.MatchString(lastSegment(s)) || strings.Contains(k, "deny") {
			t.Errorf("the answer carries a link: %s = %v", k, v)
		}
	}
	if got, want := sdUnix(t, "expires_at", out["expires_at"]), e.Clock.Now().Add(10*time.Minute).Unix(); got != want {
		t.Errorf("expires_at %d, want %d (ten minutes ahead)", got, want)
	}
	if !bytes.Equal(r.Seed, body) || r.KeyID != e.seedKeyID || r.Status != countersign.StatusPending ||
		r.Kind != countersign.KindRm || r.Action != "rm -rf /var/www/data" ||
		r.Context.User != "deploy" || r.Context.Host != "prod-01" || r.Context.Cwd != "/home/deploy" ||
		!slices.Equal(r.RiskReasons, []string{"recursive deletion (-r/-R)", "protected path: /var/www"}) {
		t.Errorf("stored request: %+v", r)
	}
	e.wantStatus("delete-requests", id, map[string]any{"status": "pending", "approved_by": nil})

	before := e.snapshot()

	t.Run("same body again", func(t *testing.T) {
		e := e.with(t)
		out := sdDecode(t, "again", e.post("/api/delete-requests", "X-SafeRM-Signature", body, sdSign(e.seed, body)), http.StatusOK)
		if out["success"] != true || out["request_id"] != id {
			t.Errorf("again: %v", out)
		}
		if out["approval_url"] != e.URL+"/approvals/"+r.ID {
			t.Errorf("again: approval_url %v", out["approval_url"])
		}
		e.unchanged("the same body again", before)
	})

	t.Run("different body same id", func(t *testing.T) {
		e := e.with(t)
		for name, change := range map[string]func(p map[string]any){
			"command":      func(p map[string]any) { p["command"] = "rm -rf /var/www" },
			"hostname":     func(p map[string]any) { p["hostname"] = "prod-02" },
			"user":         func(p map[string]any) { p["user"] = "root" },
			"risk_reasons": func(p map[string]any) { p["risk_reasons"] = []string{} },
			"timestamp":    func(p map[string]any) { p["timestamp"] = int64(1700000001) },
		} {
			p := e.deletePayload(id, "rm -rf /var/www/data")
			change(p)
			sdWantError(t, "other "+name+", same request_id", e.signed("/api/delete-requests", p), http.StatusConflict, countersign.ECONFLICT)
		}
		e.unchanged("a different body with the same request_id", before)
	})

	t.Run("unauthorized", func(t *testing.T) {
		e := e.with(t)
		const id2 = "del_1700000000_999"
		good := sdPyJSON(e.deletePayload(id2, "rm -rf /srv/x"))
		tampered := bytes.Replace(good, []byte("/srv/x"), []byte("/srv/y"), 1)
		for _, c := range []struct {
			name, header, sig string
			body              []byte
		}{
			{"bad signature", "X-SafeRM-Signature", sdSign("not the secret", good), good},
			{"missing signature", "X-SafeRM-Signature", "", good},
			{"malformed signature", "X-SafeRM-Signature", "zz" + sdSign(e.seed, good)[2:], good},
			{"short signature", "X-SafeRM-Signature", sdSign(e.seed, good)[:32], good},
			{"ordinary key's secret", "X-SafeRM-Signature", sdSign(e.plain, good), good},
			{"revoked designated key", "X-SafeRM-Signature", sdSign(e.oldSeed, good), good},
			{"tampered after signing", "X-SafeRM-Signature", sdSign(e.seed, good), tampered},
			{"signature in the Claude header", "X-Claude-Signature", sdSign(e.seed, good), good},
			{"the secret itself", "X-SafeRM-Signature", e.seed, good},
		} {
			sdWantError(t, c.name, e.post("/api/delete-requests", c.header, c.body, c.sig), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
		}
		if _, err := e.Store.RequestBySeedID(e.Ctx, "delete:"+id2); countersign.ErrorCode(err) != countersign.ENOTFOUND {
			t.Errorf("a refused request was stored: %v", err)
		}
		e.unchanged("unauthorized requests", before)
		sdWantError(t, "status of the refused", e.get("/api/delete-requests/"+id2+"/status", ""), http.StatusNotFound, countersign.ENOTFOUND)
	})

	t.Run("bad input", func(t *testing.T) {
		e := e.with(t)
		good := string(sdPyJSON(e.deletePayload("del_bad", "rm -rf /srv/x")))
		for name, b := range map[string]string{
			"malformed":            good[:len(good)-1],
			"not JSON":             "request_id=del_bad",
			"empty":                "",
			"an array":             "[]",
			"two objects":          good + good,
			"unknown field":        strings.Replace(good, `{"affected_paths"`, `{"admin":true,"affected_paths"`, 1),
			"file_count a string":  strings.Replace(good, `"file_count":47`, `"file_count":"47"`, 1),
			"file_count a float":   strings.Replace(good, `"file_count":47`, `"file_count":4.5`, 1),
			"risk_reasons string":  strings.Replace(good, `"risk_reasons":[`, `"risk_reasons":"x","x":[`, 1),
			"request_id a number":  strings.Replace(good, `"request_id":"del_bad"`, `"request_id":7`, 1),
			"request_id with '/'":  strings.Replace(good, `"request_id":"del_bad"`, `"request_id":"../del"`, 1),
			"request_id empty":     strings.Replace(good, `"request_id":"del_bad"`, `"request_id":""`, 1),
			"negative file_count":  strings.Replace(good, `"file_count":47`, `"file_count":-1`, 1),
			"empty command":        strings.Replace(good, `"command":"rm -rf /srv/x"`, `"command":""`, 1),
			"command not a string": strings.Replace(good, `"command":"rm -rf /srv/x"`, `"command":["rm"]`, 1),
		} {
			if b == good {
				t.Fatalf("%s: the replacement did not apply", name)
			}
			sdWantError(t, name, e.post("/api/delete-requests", "X-SafeRM-Signature", []byte(b), sdSign(e.seed, []byte(b))), http.StatusBadRequest, countersign.EINVALID)
		}
		e.unchanged("bad input", before)
	})

	t.Run("too large", func(t *testing.T) {
		e := e.with(t)
		base := sdPyJSON(e.deletePayload("del_big", "rm -rf /srv/big"))
		over := append(append([]byte{}, base...), bytes.Repeat([]byte(" "), sdMaxBody+1-len(base))...)
		sdWantError(t, "64 KiB + 1", e.post("/api/delete-requests", "X-SafeRM-Signature", over, sdSign(e.seed, over)), http.StatusRequestEntityTooLarge, countersign.ETOOLARGE)
		sdWantError(t, "64 KiB + 1 on the Claude route", e.post("/api/claude-events", "X-Claude-Signature", over, sdSign(e.seed, over)), http.StatusRequestEntityTooLarge, countersign.ETOOLARGE)
		e.unchanged("too large", before)
		exact := over[:sdMaxBody]
		sdDecode(t, "exactly 64 KiB", e.post("/api/delete-requests", "X-SafeRM-Signature", exact, sdSign(e.seed, exact)), http.StatusCreated)
	})
}

func TestSeedDeleteLinks(t *testing.T) {
	t.Parallel()
	e := sdNew(t)
	const id = "del_1700000000_1"
	e.createDelete(id, "rm -rf /var/www/data")
	approveURL, denyURL := e.link("delete-requests", approval.LinkApprove, id, ""), e.link("delete-requests", approval.LinkDeny, id, "")
	approveTok, denyTok := lastSegment(approveURL), lastSegment(denyURL)
	e.createDelete("del_1700000000_2", "rm -rf /var/www/other")
	otherTok := lastSegment(e.link("delete-requests", approval.LinkApprove, "del_1700000000_2", ""))
	otherDenyURL := e.link("delete-requests", approval.LinkDeny, "del_1700000000_2", "")

	e.wantStatus("delete-requests", id, map[string]any{"status": "pending", "approved_by": nil})
	sdWantError(t, "status of an unknown id", e.get("/api/delete-requests/del_nope/status", ""), http.StatusNotFound, countersign.ENOTFOUND)
	sdWantError(t, "delete status of a Claude id", e.get("/api/claude-events/"+id+"/status", ""), http.StatusNotFound, countersign.ENOTFOUND)

	before := e.snapshot()

	t.Run("GET changes nothing", func(t *testing.T) {
		e := e.with(t)
		for i := range 3 {
			page := sdPage(t, "GET approval_url", e.get(approveURL, ""), http.StatusOK)
			if i == 0 {
				for _, want := range []string{
					"rm -rf /var/www/data",
					`<form method="post" action="/api/delete-requests/approve/` + id + "/" + approveTok + `"`,
					"Approve ",
					"/var/www/data",
					"recursive deletion (-r/-R)",
					"deploy@prod-01",
				} {
					if !strings.Contains(page, want) {
						t.Errorf("confirm page lacks %q:\n%s", want, page)
					}
				}
			}
			page = sdPage(t, "GET deny_url", e.get(denyURL, ""), http.StatusOK)
			if !strings.Contains(page, `<form method="post" action="/api/delete-requests/deny/`+id+"/"+denyTok+`"`) {
				t.Errorf("deny page lacks its form:\n%s", page)
			}
			req, _ := http.NewRequestWithContext(e.Ctx, http.MethodHead, approveURL, nil)
			if r := e.do(req); r.status != http.StatusOK {
				t.Errorf("HEAD approval_url: %d", r.status)
			}
		}
		e.unchanged("GET of the links", before)
		e.wantStatus("delete-requests", id, map[string]any{"status": "pending", "approved_by": nil})
	})

	t.Run("foreign origin", func(t *testing.T) {
		e := e.with(t)
		for name, h := range map[string]map[string]string{
			"foreign Origin":               {"Origin": "https://evil.example"},
			"Origin null":                  {"Origin": "null"},
			"Origin of another port":       {"Origin": "http://127.0.0.1:1"},
			"no Origin, no Sec-Fetch-Site": {},
			"no Origin, cross-site":        {"Sec-Fetch-Site": "cross-site"},
			"foreign Origin, same-origin":  {"Origin": "https://evil.example", "Sec-Fetch-Site": "same-origin"},
		} {
			for _, u := range []string{approveURL, denyURL} {
				sdPage(t, name, e.form(u, h, url.Values{"reason": {"x"}}), http.StatusForbidden)
			}
		}
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			req, err := http.NewRequestWithContext(e.Ctx, method, approveURL, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "evil.example"
			req.Header.Set("Origin", "http://evil.example")
			sdPage(t, method+" under another Host", e.do(req), http.StatusMisdirectedRequest)
		}
		e.unchanged("POSTs from elsewhere", before)
		e.wantStatus("delete-requests", id, map[string]any{"status": "pending", "approved_by": nil})
	})

	t.Run("not found alike", func(t *testing.T) {
		e := e.with(t)
		base := e.URL + "/api/delete-requests/"
		var first []byte
		for name, u := range map[string]string{
			"another request's token":     base + "approve/" + id + "/" + otherTok,
			"a wrong token":               base + "approve/" + id + "/" + sdRandomHex(),
			"a short token":               base + "approve/" + id + "/" + approveTok[:20],
			"a long token":                base + "approve/" + id + "/" + approveTok + "00",
			"the approve token on deny":   base + "deny/" + id + "/" + approveTok,
			"the deny token on approve":   base + "approve/" + id + "/" + denyTok,
			"an unknown id":               base + "approve/del_nope/" + approveTok,
			"the token under another id":  base + "approve/del_1700000000_2/" + approveTok,
			"the Claude route":            e.URL + "/api/claude-events/approve/" + id + "/" + approveTok,
			"the Claude respond route":    e.URL + "/api/claude-events/respond/" + id + "/" + approveTok,
			"the auto-approve route":      e.URL + "/api/claude-events/auto-approve/" + id + "/" + approveTok + "/5",
			"a non-hex token of 64 chars": base + "approve/" + id + "/" + strings.Repeat("z", 64),
		} {
			for _, r := range []response{e.get(u, ""), e.press(u, nil)} {
				page := sdPage(t, name, r, http.StatusNotFound)
				if first == nil {
					first = []byte(page)
				} else if page != string(first) {
					t.Errorf("%s: the 404 differs from the others:\n%s\nvs\n%s", name, page, first)
				}
			}
		}
		e.unchanged("links that do not fit", before)
	})

	t.Run("POST decides once", func(t *testing.T) {
		e := e.with(t)
		page := sdPage(t, "POST approval_url", e.press(approveURL, nil), http.StatusOK)
		if !strings.Contains(page, "Done") || strings.Contains(page, `<form method="post"`) {
			t.Errorf("decided page:\n%s", page)
		}
		e.wantStatus("delete-requests", id, map[string]any{"status": "approved", "approved_by": "admin"})
		if r := e.stored("delete:" + id); r.Status != countersign.StatusApproved || r.DecidedBy != approval.DecidedByLink {
			t.Errorf("stored: %s by %q", r.Status, r.DecidedBy)
		}
		after := e.snapshot()

		page = sdPage(t, "POST approval_url again", e.press(approveURL, nil), http.StatusConflict)
		if !strings.Contains(page, `class="error"`) || strings.Contains(page, "Done") || strings.Contains(page, `<form method="post"`) {
			t.Errorf("second POST page:\n%s", page)
		}
		sdPage(t, "POST deny_url after approval", e.press(denyURL, url.Values{"reason": {"no"}}), http.StatusConflict)
		page = sdPage(t, "GET approval_url after approval", e.get(approveURL, ""), http.StatusOK)
		if strings.Contains(page, `<form method="post"`) {
			t.Errorf("a decided request still offers a form:\n%s", page)
		}
		e.unchanged("a used link", after)
		e.wantStatus("delete-requests", id, map[string]any{"status": "approved", "approved_by": "admin"})
	})

	t.Run("same-origin without Origin", func(t *testing.T) {
		e := e.with(t)
		sdPage(t, "deny with Sec-Fetch-Site", e.form(otherDenyURL, map[string]string{"Sec-Fetch-Site": "same-origin"}, url.Values{"reason": {"not today"}}), http.StatusOK)
		e.wantStatus("delete-requests", "del_1700000000_2", map[string]any{"status": "denied", "approved_by": "admin"})
		if r := e.stored("delete:del_1700000000_2"); r.Reason != "not today" {
			t.Errorf("deny reason %q", r.Reason)
		}
	})
}

func TestSeedDeleteLinkExpired(t *testing.T) {
	t.Parallel()
	e := sdNew(t)
	e.createDelete("del_old_1", "rm -rf /srv/a")
	e.createDelete("del_old_2", "rm -rf /srv/b")
	approveURL, denyURL := e.link("delete-requests", approval.LinkApprove, "del_old_1", ""), e.link("delete-requests", approval.LinkDeny, "del_old_1", "")

	e.Clock.Advance(10*time.Minute + time.Second)

	sdPage(t, "POST approval_url after expiry", e.press(approveURL, nil), http.StatusConflict)
	e.wantStatus("delete-requests", "del_old_1", map[string]any{"status": "expired", "approved_by": nil})
	sdPage(t, "POST deny_url after expiry", e.press(denyURL, nil), http.StatusConflict)
	page := sdPage(t, "GET approval_url after expiry", e.get(approveURL, ""), http.StatusOK)
	if strings.Contains(page, `<form method="post"`) || !strings.Contains(page, "expired") {
		t.Errorf("expired page:\n%s", page)
	}
	// A request nobody opened reads as expired on its status route too.
	e.wantStatus("delete-requests", "del_old_2", map[string]any{"status": "expired", "approved_by": nil})
	if r := e.stored("delete:del_old_1"); r.Status != countersign.StatusExpired || r.DecidedBy != "" {
		t.Errorf("stored: %s by %q", r.Status, r.DecidedBy)
	}
}

func TestSeedDeleteList(t *testing.T) {
	t.Parallel()
	e := sdNew(t)
	e.createDelete("del_a", "rm -rf /srv/a")
	e.createDelete("del_b", "rm -rf /srv/b")
	e.createDelete("del_c", "rm -rf /srv/c")
	sdPage(t, "approve del_b", e.press(e.link("delete-requests", approval.LinkApprove, "del_b", ""), nil), http.StatusOK)

	all := sdItems(t, "list", sdDecode(t, "list", e.get("/api/delete-requests", e.approver), http.StatusOK), "requests")
	if got := sdIDs(all); !slices.Equal(got, []string{"del_a", "del_b", "del_c"}) {
		t.Fatalf("list: %v", got)
	}
	seedFields := []string{"id", "command", "risk_reasons", "affected_paths", "file_count", "user", "hostname", "cwd",
		"status", "created_at", "expires_at", "approved_by", "approved_at"}
	now := e.Clock.Now().Unix()
	for _, it := range all {
		for _, f := range seedFields {
			if _, ok := it[f]; !ok {
				t.Errorf("%v lacks %q", it["id"], f)
			}
		}
		for _, k := range sdKeys(it) {
			if strings.Contains(k, "token") || strings.Contains(k, "seed") || strings.Contains(k, "hash") {
				t.Errorf("%v shows %q", it["id"], k)
			}
		}
		id := sdString(it["id"])
		if it["command"] != "rm -rf /srv/"+id[len(id)-1:] || it["user"] != "deploy" || it["hostname"] != "prod-01" ||
			it["cwd"] != "/home/deploy" || it["file_count"] != json.Number("47") ||
			!reflect.DeepEqual(it["risk_reasons"], []any{"recursive deletion (-r/-R)", "protected path: /var/www"}) ||
			!reflect.DeepEqual(it["affected_paths"], []any{"/var/www/data"}) {
			t.Errorf("item: %v", it)
		}
		if sdUnix(t, "created_at", it["created_at"]) != now || sdUnix(t, "expires_at", it["expires_at"]) != now+600 {
			t.Errorf("%s: created_at %v expires_at %v, want %d and %d", id, it["created_at"], it["expires_at"], now, now+600)
		}
		if id == "del_b" {
			if it["status"] != "approved" || it["approved_by"] != "email link" || sdUnix(t, "approved_at", it["approved_at"]) != now {
				t.Errorf("del_b: %v", it)
			}
		} else if it["status"] != "pending" || it["approved_by"] != nil || it["approved_at"] != nil {
			t.Errorf("%s: %v", id, it)
		}
	}

	for q, want := range map[string][]string{
		"?status=pending":          {"del_a", "del_c"},
		"?status=approved":         {"del_b"},
		"?status=denied":           {},
		"?status=pending&limit=50": {"del_a", "del_c"},
	} {
		items := sdItems(t, q, sdDecode(t, q, e.get("/api/delete-requests"+q, e.approver), http.StatusOK), "requests")
		if got := sdIDs(items); !slices.Equal(got, want) {
			t.Errorf("list%s: %v, want %v", q, got, want)
		}
	}
	if items := sdItems(t, "limit=1", sdDecode(t, "limit=1", e.get("/api/delete-requests?limit=1", e.approver), http.StatusOK), "requests"); len(items) != 1 {
		t.Errorf("limit=1: %d items", len(items))
	}
	sdWantError(t, "limit=0", e.get("/api/delete-requests?limit=0", e.approver), http.StatusBadRequest, countersign.EINVALID)
	if items := sdItems(t, "another account", sdDecode(t, "another account", e.get("/api/delete-requests", e.stranger), http.StatusOK), "requests"); len(items) != 0 {
		t.Errorf("an approver of another account sees %v", sdIDs(items))
	}
	sdWantError(t, "agent key", e.get("/api/delete-requests", e.plain), http.StatusForbidden, countersign.EFORBIDDEN)
	sdWantError(t, "designated key", e.get("/api/delete-requests", e.seed), http.StatusForbidden, countersign.EFORBIDDEN)
	sdWantError(t, "no credentials", e.get("/api/delete-requests", ""), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
	sdWantError(t, "unknown token", e.get("/api/delete-requests", "cst_nope"), http.StatusUnauthorized, countersign.EUNAUTHORIZED)
}
