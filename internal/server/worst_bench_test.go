package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/testutil/testserver"
)

// worstEnv is the real handler on a real SQLite store, called in process,
// with an agent key, a key of the seed routes and a signed-in approver.
type worstEnv struct {
	b         *testing.B
	h         http.Handler
	host      string
	key, seed string
	cookie    *http.Cookie
	seqs      int
}

func newWorstEnv(b *testing.B) *worstEnv {
	s := testserver.New(b, testserver.Quiet(), testserver.WallClock(),
		testserver.Approval(func(_ *testserver.Server, c *approval.Config) { c.MaxPending = 1 << 30 }),
		testserver.Config(func(_ *testserver.Server, c *server.Config) {
			c.PublicURL = &url.URL{Scheme: "http", Host: "countersign.test"}
		}))
	e := &worstEnv{b: b, host: s.Public.Host, key: s.Key("acme", "agent"), h: s.Server.Handler(), cookie: s.SignIn(b, nil, "alice")}
	var err error
	if _, e.seed, err = s.Admin.CreateSeedKey(s.Ctx, "acme", "seed"); err != nil {
		b.Fatal(err)
	}
	return e
}

func (e *worstEnv) serve(method, path string, body *strings.Reader, contentType string, header map[string]string) *httptest.ResponseRecorder {
	var req *http.Request
	if body != nil {
		req = httptest.NewRequest(method, "http://"+e.host+path, body)
		req.Header.Set("Content-Type", contentType)
	} else {
		req = httptest.NewRequest(method, "http://"+e.host+path, nil)
	}
	req.Header.Set("Origin", "http://"+e.host)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if e.cookie != nil {
		req.AddCookie(e.cookie)
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// create sends one worst request and returns the answer and the id of the
// request it created ("" when refused). Each call has its own action or
// event id, so that every one is a new request.
func (e *worstEnv) create(kind string) (*httptest.ResponseRecorder, string) {
	e.seqs++
	var rec *httptest.ResponseRecorder
	deep := strings.Repeat("[", 9000) + strings.Repeat("]", 9000) // 18 KB
	switch kind {
	case "deep", "deep-own-preview", "wide", "wide-own-preview":
		args, preview := deep, ""
		if strings.HasPrefix(kind, "wide") {
			args = worstArguments()
		}
		if strings.HasSuffix(kind, "own-preview") {
			preview = `,"preview":"p"`
		}
		body := fmt.Sprintf(`{"kind":"tool","action":"x%d","arguments":%s%s}`, e.seqs, args, preview)
		rec = e.serve("POST", "/api/v1/requests", strings.NewReader(body), "application/json", map[string]string{"Authorization": "Bearer " + e.key})
	case "claude-deep":
		body := fmt.Sprintf(`{"event_id":"ev_%d","event_type":"tool_approval","session_id":"s","tool_name":"mcp__x__y","tool_input":{"a":%s},"timestamp":"t"}`, e.seqs, deep)
		rec = e.serve("POST", "/api/claude-events", strings.NewReader(body), "application/json", map[string]string{"X-Claude-Signature": sdSign(e.seed, []byte(body))})
	default:
		e.b.Fatalf("no such request %q", kind)
	}
	var out struct {
		ID       string `json:"id"`
		InboxURL string `json:"inbox_url"`
	}
	json.Unmarshal(rec.Body.Bytes(), &out)
	if rec.Code != http.StatusCreated {
		return rec, ""
	}
	return rec, out.InboxURL[strings.LastIndex(out.InboxURL, "/")+1:]
}

// BenchmarkWorstRequest creates and shows the requests that cost most to
// render, through the real handler: 18 KB of arrays nested 9,000 deep (the
// API and a Claude event's object tool_input), and 32 KiB of arguments at
// the deepest level the limit allows (see worstArguments). B/op is what
// one create or one page view allocates; body-bytes the size of the answer.
// A create that is refused shows the first accepted request of its kind,
// if any.
func BenchmarkWorstRequest(b *testing.B) {
	for _, kind := range []string{"deep", "deep-own-preview", "claude-deep", "wide", "wide-own-preview"} {
		e := newWorstEnv(b)
		var id string
		b.Run("create/"+kind, func(b *testing.B) {
			b.ReportAllocs()
			var rec *httptest.ResponseRecorder
			for b.Loop() {
				var got string
				rec, got = e.create(kind)
				if id == "" {
					id = got
				}
			}
			b.ReportMetric(float64(rec.Code), "status")
			b.ReportMetric(float64(rec.Body.Len()), "body-bytes")
		})
		if id == "" {
			continue
		}
		for _, page := range []string{"/approvals/" + id, "/approvals"} {
			name := "show/" + kind
			if page == "/approvals" {
				name = "inbox/" + kind
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				var rec *httptest.ResponseRecorder
				for b.Loop() {
					if rec = e.serve("GET", page, nil, "", nil); rec.Code != http.StatusOK {
						b.Fatalf("GET %s: %d", page, rec.Code)
					}
				}
				b.ReportMetric(float64(rec.Body.Len()), "body-bytes")
			})
		}
	}
}
