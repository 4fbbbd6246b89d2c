package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/identity"
	"github.com/countersign/countersign/internal/server"
)

// principal is alice as the service sees her.
func (s *testServer) principal() countersign.ApproverPrincipal {
	s.t.Helper()
	p, err := (&identity.Authenticator{Store: s.Store}).Approver(s.Ctx, s.alice)
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	resp := s.call("GET", "/healthz", "", "")
	var body struct {
		Status string   `json:"status"`
		Uptime *float64 `json:"uptime_seconds"`
	}
	if resp.status != http.StatusOK || json.Unmarshal([]byte(resp.body), &body) != nil || body.Status != "ok" || body.Uptime == nil {
		t.Errorf("healthz: %d %s", resp.status, resp.body)
	}
	if ct := resp.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("healthz Content-Type %q", ct)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	s.Clock.Advance(30 * time.Second)
	s.decide(r.ID, "approve")
	s.create(s.KeyA)
	s.Clock.Advance(11 * time.Minute)
	if n, err := s.Service.Sweep(s.Ctx); n != 2 || err != nil {
		t.Fatalf("Sweep: %d, %v; want the approved and the pending request expired", n, err)
	}
	s.call("GET", "/healthz", "", "")

	resp := s.call("GET", "/metrics", "", "")
	if resp.status != http.StatusOK || !strings.HasPrefix(resp.header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("metrics: %d %q", resp.status, resp.header.Get("Content-Type"))
	}
	body := resp.body
	for _, line := range []string{
		"# TYPE countersign_requests_total counter",
		`countersign_requests_total{kind="tool",status="pending"} 2`,
		`countersign_requests_total{kind="tool",status="approved"} 1`,
		`countersign_requests_total{kind="tool",status="expired"} 2`,
		"# TYPE countersign_decision_seconds histogram",
		`countersign_decision_seconds_bucket{le="15"} 0`,
		`countersign_decision_seconds_bucket{le="30"} 1`,
		"countersign_decision_seconds_count 1",
		"# TYPE countersign_waiters gauge",
		"countersign_waiters 0",
		"# TYPE countersign_http_requests_total counter",
		`countersign_http_requests_total{route="POST /api/v1/requests",code="201"} 2`,
		`countersign_http_requests_total{route="POST /api/v1/requests/{id}/decision",code="200"} 1`,
		`countersign_http_requests_total{route="GET /healthz",code="200"} 1`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	// Routes are counted by pattern, never by path: no id shows up.
	if strings.Contains(body, r.ID) {
		t.Error("metrics show a request id")
	}
}

// TestRuntimeAndStoreMetrics: /metrics carries the Go runtime's and the
// process's metrics as Prometheus' own collectors name them, and the
// store's: failed writes by cause, whether it writes, its log and
// checkpoints, and the age of the oldest undelivered notification.
func TestRuntimeAndStoreMetrics(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.create(s.KeyA)
	body := string(s.call("GET", "/metrics", "", "").body)
	for _, re := range []string{
		`(?m)^# TYPE go_goroutines gauge\ngo_goroutines [1-9][0-9]*$`,
		`(?m)^go_memstats_heap_alloc_bytes [0-9.e+]+$`,
		`(?m)^# TYPE go_gc_duration_seconds summary$`,
		`(?m)^go_gc_duration_seconds_count [0-9]+$`,
		`(?m)^process_open_fds [1-9][0-9]*$`,
		`(?m)^process_resident_memory_bytes [0-9.e+]+$`,
		`(?m)^# TYPE countersign_store_write_failures_total counter\ncountersign_store_write_failures_total\{cause="disk_full"\} 0$`,
		`(?m)^countersign_store_writable 1$`,
		`(?m)^countersign_store_log_bytes [0-9.e+]+$`,
		`(?m)^countersign_store_log_max_bytes 3.3554432e\+07$`,
		`(?m)^countersign_store_checkpoints_total [0-9.e+]+$`,
		`(?m)^countersign_store_checkpoint_seconds_total [0-9.e+-]+$`,
		`(?m)^countersign_outbox_oldest_undelivered_seconds 0$`,
	} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("metrics lack %s", re)
		}
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(c *server.Config) { c.RatePerMinute = 1 })
	s.call("GET", "/api/v1/requests", s.alice, "").request(t, http.StatusOK)
	before := s.snapshot()

	resp := s.call("POST", "/api/v1/requests", s.KeyA, s.toolBody("s1"))
	resp.wantError(t, "second call in the minute", http.StatusTooManyRequests, countersign.ELIMIT)
	// One call a minute: the next token comes within 60 s (less by the
	// time the calls took).
	if n, err := strconv.Atoi(resp.header.Get("Retry-After")); err != nil || n < 1 || n > 60 {
		t.Errorf("Retry-After %q, want 1 to 60 seconds", resp.header.Get("Retry-After"))
	}
	s.unchanged("a limited create", before)
	// Health and metrics are not API calls and are not limited.
	if got := s.call("GET", "/healthz", "", "").status; got != http.StatusOK {
		t.Errorf("healthz while limited: %d", got)
	}
}

func TestPendingLimitOverAPI(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for range 5 {
		s.create(s.KeyA)
	}
	before := s.snapshot()
	resp := s.call("POST", "/api/v1/requests", s.keyB, s.toolBody("s1"))
	msg := resp.wantError(t, "6th pending request", http.StatusTooManyRequests, countersign.ELIMIT)
	// The message says what to do.
	if want := "this account already has 5 requests waiting for a decision; decide or cancel one, or wait for one to expire, then ask again"; msg != want {
		t.Errorf("message %q, want %q", msg, want)
	}
	if got := resp.header.Get("Retry-After"); got != "600" {
		t.Errorf("Retry-After %q, want 600 (the oldest expires in 10 minutes)", got)
	}
	s.unchanged("a limited create", before)
	s.create(s.KeyX)
}

func TestExpiredOverAPI(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	pending := s.create(s.KeyA)
	approved := s.create(s.KeyA)
	s.decide(approved.ID, "approve")
	s.Clock.Advance(10 * time.Minute)

	s.call("POST", "/api/v1/requests/"+pending.ID+"/decision", s.alice, `{"decision":"approve"}`).wantError(t, "decide expired", http.StatusConflict, countersign.ECONFLICT)
	s.call("POST", "/api/v1/requests/"+approved.ID+"/consume", s.KeyA, "").wantError(t, "consume expired approval", http.StatusConflict, countersign.ECONFLICT)
	for _, id := range []string{pending.ID, approved.ID} {
		if got := s.call("GET", "/api/v1/requests/"+id, s.KeyA, "").request(t, http.StatusOK); got.Status != "expired" {
			t.Errorf("%s: %s, want expired", id, got.Status)
		}
	}
	before := s.snapshot()
	s.call("POST", "/api/v1/requests/"+pending.ID+"/decision", s.alice, `{"decision":"deny"}`).wantError(t, "decide expired again", http.StatusConflict, countersign.ECONFLICT)
	s.call("POST", "/api/v1/requests/"+approved.ID+"/consume", s.KeyA, "").wantError(t, "consume expired again", http.StatusConflict, countersign.ECONFLICT)
	s.call("POST", "/api/v1/requests/"+pending.ID+"/cancel", s.KeyA, "").wantError(t, "cancel expired", http.StatusConflict, countersign.ECONFLICT)
	s.unchanged("calls on expired requests", before)
}

// TestInternalError: a fault of ours answers 500 with an id to quote and
// nothing of the fault; the log has the fault under that id.
func TestInternalError(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	r := s.create(s.KeyA)
	s.Store.Close()

	for _, c := range []struct{ method, path, cred, body string }{
		{"GET", "/api/v1/requests/" + r.ID, s.KeyA, ""},
		{"POST", "/api/v1/requests", s.KeyA, s.toolBody("s1")},
		{"GET", "/api/v1/requests", s.alice, ""},
	} {
		resp := s.call(c.method, c.path, c.cred, c.body)
		msg := resp.wantError(t, c.method+" "+c.path, http.StatusInternalServerError, countersign.EINTERNAL)
		m := regexp.MustCompile(`^Internal error; the server log has the details under id ([a-z0-9]+)\.$`).FindStringSubmatch(msg)
		if m == nil {
			t.Errorf("%s %s: message %q", c.method, c.path, msg)
			continue
		}
		for _, leak := range []string{"sql", "database", "closed", "sqlite"} {
			if strings.Contains(strings.ToLower(resp.body), leak) {
				t.Errorf("%s %s: answer shows %q: %s", c.method, c.path, leak, resp.body)
			}
		}
		if logs := s.Logs.String(); !strings.Contains(logs, "error_id="+m[1]) || !strings.Contains(logs, "closed") {
			t.Errorf("the log lacks error %s with its cause:\n%s", m[1], logs)
		}
	}
	if got := s.call("GET", "/healthz", "", "").status; got != http.StatusOK {
		t.Errorf("healthz: %d", got)
	}
}

// TestPageClientGone: a page whose browser has gone away mid-request (here
// a sign-in, which may queue for its password check) is no internal error:
// 503, and nothing logged above debug.
func TestPageClientGone(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	form := url.Values{"username": {"alice"}, "password": {"a long test password"}}
	req := httptest.NewRequestWithContext(ctx, "POST", "https://approve.example.com/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://approve.example.com")
	rec := httptest.NewRecorder()
	s.Server.Server.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("sign-in of a browser gone: %d, want 503\n%s", rec.Code, rec.Body)
	}
	if logs := s.Logs.String(); strings.Contains(logs, "level=ERROR") || !strings.Contains(logs, "client gone") {
		t.Errorf("the log of a browser gone:\n%s", logs)
	}
}
