package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/countersign/countersign/client"
	"github.com/countersign/countersign/internal/testutil"
)

// requestBody is a request as the server answers it, with the fields the
// raw client skips.
func requestBody(id, status string) string {
	return fmt.Sprintf(`{"id":%q,"reference":"K7Q-2MX","kind":"generic","action":"load.cycle",`+
		`"arguments":{"agent":3,"iteration":7},"args_hash":"9f86d081884c7d65","preview":"load.cycle {\"agent\":3}",`+
		`"preview_hash":"e3b0c44298fc1c14","risk_reasons":[],"context":{},"key":"default","status":%q,`+
		`"created_at":"2026-01-02T03:04:05.123456Z","expires_at":"2026-01-02T03:19:05.123456Z","decided_at":null,`+
		`"auto_approved":false,"inbox_url":"http://127.0.0.1:8080/approvals/%s"}`+"\n", id, status, id)
}

// fakeAPI answers the four calls of the cycles like the server, for one
// request req_a, and records every request it gets.
type fakeAPI struct {
	mu   sync.Mutex
	seen []string // each request as "METHOD URI headers body"
	// wait, when set, runs before a long poll is answered.
	wait func(r *http.Request)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, fmt.Sprintf("%s %s host=%s auth=%q accept=%q type=%q length=%q te=%q body=%s",
		r.Method, r.RequestURI, r.Host, r.Header.Get("Authorization"), r.Header.Get("Accept"), r.Header.Get("Content-Type"),
		r.Header["Content-Length"], r.TransferEncoding, body))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	switch r.Method + " " + r.URL.Path {
	case "POST /api/v1/requests":
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, requestBody("req_a", "pending"))
	case "GET /api/v1/requests/req_a":
		if f.wait != nil {
			f.wait(r)
		}
		io.WriteString(w, requestBody("req_a", "approved"))
	case "POST /api/v1/requests/req_a/decision":
		io.WriteString(w, requestBody("req_a", "approved"))
	case "POST /api/v1/requests/req_a/consume":
		io.WriteString(w, requestBody("req_a", "consumed"))
	default:
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":"not_found","message":"no such route"}}`)
	}
}

// cycle runs create, wait, approve and consume of one request and returns
// what they answered.
func cycle(ctx context.Context, agent agentCalls, decider deciderCalls) (string, error) {
	id, status, created, err := agent.create(ctx, 3, 7)
	if err != nil {
		return "", err
	}
	w, err := agent.wait(ctx, id, func() {})
	if err != nil {
		return "", err
	}
	if err := decider.approve(ctx, 0, id); err != nil {
		return "", err
	}
	c, err := agent.consume(ctx, id)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s %v %s %s", id, status, created, w, c), nil
}

// TestRawSendsWhatClientSends: the raw client sends the same requests as
// ./client (route, method, query, credential, content headers, body) and
// reads the answers the same.
func TestRawSendsWhatClientSends(t *testing.T) {
	var f fakeAPI
	srv := httptest.NewServer(&f)
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	agentC := &client.Client{BaseURL: srv.URL, Credential: "csk_agent", HTTP: &http.Client{Transport: newTransport(4)}}
	approverC := &client.Client{BaseURL: srv.URL, Credential: "cst_approver", HTTP: &http.Client{Transport: newTransport(4)}}
	goGot, err := cycle(t.Context(), goAgent{agentC}, goDecider{approverC})
	if err != nil {
		t.Fatalf("through ./client: %v", err)
	}
	goSeen := f.seen
	f.seen = nil

	agent, decider := dialPair(t, addr)
	rawGot, err := cycle(t.Context(), agent, decider)
	if err != nil {
		t.Fatalf("raw: %v", err)
	}
	if want := "req_a pending true approved consumed"; goGot != want || rawGot != want {
		t.Errorf("answers: ./client %q, raw %q; want %q", goGot, rawGot, want)
	}
	if len(goSeen) != 4 || len(f.seen) != 4 {
		t.Fatalf("requests: ./client %d, raw %d; want 4 each", len(goSeen), len(f.seen))
	}
	for i := range goSeen {
		if goSeen[i] != f.seen[i] {
			t.Errorf("request %d:\n./client %s\nraw      %s", i, goSeen[i], f.seen[i])
		}
	}
	if !strings.Contains(f.seen[1], "GET /api/v1/requests/req_a?wait=30s ") {
		t.Errorf("the long poll is %s", f.seen[1])
	}
}

// dialPair returns a raw agent and a raw decider of the server at addr.
func dialPair(t *testing.T, addr string) (*rawAgent, rawDecider) {
	t.Helper()
	ac, err := dialRaw(t.Context(), addr, "csk_agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ac.close)
	dc, err := dialRaw(t.Context(), addr, "cst_approver")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dc.close)
	return &rawAgent{c: ac}, rawDecider{dc}
}

// TestRawKeepsConnection: an agent's calls all go over its one connection.
func TestRawKeepsConnection(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(&fakeAPI{})
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	agent, decider := dialPair(t, strings.TrimPrefix(srv.URL, "http://"))
	for i := range 3 {
		if _, err := cycle(t.Context(), agent, decider); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("the server saw %d connections for 3 cycles of an agent and a decider, want 2", n)
	}
}

// TestRawSignalsWrittenWait: wrote is called once the long poll is written
// and before its answer is read; the fake server answers only after it,
// so that without it the answer never comes.
func TestRawSignalsWrittenWait(t *testing.T) {
	wrote := make(chan struct{})
	f := &fakeAPI{wait: func(r *http.Request) {
		select {
		case <-wrote:
		case <-r.Context().Done(): // the client gave up
		}
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	agent, _ := dialPair(t, strings.TrimPrefix(srv.URL, "http://"))
	type answer struct {
		status string
		err    error
	}
	done := make(chan answer, 1)
	go func() {
		status, err := agent.wait(t.Context(), "req_a", func() { close(wrote) })
		done <- answer{status, err}
	}()
	// On timeout, closing the connection ends the fake's wait, so that
	// srv.Close does not wait for it.
	got := testutil.ReceiveOr(t, done, "the answer (wrote called before it was read)", agent.c.close)
	if got.err != nil || got.status != "approved" {
		t.Fatalf("wait: %q, %v", got.status, got.err)
	}
}

// TestRawClosesOnCancel: the end of the run closes the connections, so that
// a blocked long poll returns.
func TestRawClosesOnCancel(t *testing.T) {
	// The long poll is answered only when the client goes away.
	srv := httptest.NewServer(&fakeAPI{wait: func(r *http.Request) { <-r.Context().Done() }})
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	c, err := dialRaw(ctx, strings.TrimPrefix(srv.URL, "http://"), "csk_agent")
	if err != nil {
		t.Fatal(err)
	}
	agent := &rawAgent{c: c}
	done := make(chan error, 1)
	go func() {
		_, err := agent.wait(ctx, "req_a", cancel)
		done <- err
	}()
	// On timeout, closing the connection ends the fake's wait.
	if err := testutil.ReceiveOr(t, done, "the return of wait after the context ended", c.close); !errors.Is(err, context.Canceled) {
		t.Errorf("wait returned %v, want context.Canceled", err)
	}
}

// answering is a server that answers every request with the raw bytes.
func answering(t *testing.T, raw string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		buf.WriteString(raw)
		buf.Flush()
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestRawRefusesBadAnswers: every answer the cycles can't trust fails the
// call with an error that names the request and the fault.
func TestRawRefusesBadAnswers(t *testing.T) {
	ok := requestBody("req_a", "consumed")
	head := func(status string, headers ...string) string {
		return "HTTP/1.1 " + status + "\r\n" + strings.Join(headers, "\r\n") + "\r\n\r\n"
	}
	length := func(body string) string { return fmt.Sprintf("Content-Length: %d", len(body)) }
	errBody := `{"error":{"code":"conflict","message":"the request was already consumed"}}`
	for _, c := range []struct {
		name, answer, want string
		broken             bool // the connection can't carry another call
	}{
		{"error status", head("409 Conflict", length(errBody)) + errBody, "server answered 409 conflict: the request was already consumed", false},
		{"bare status", head("502 Bad Gateway", "Content-Length: 0"), "server answered 502 without an error body", false},
		{"created", head("201 Created", length(ok)) + ok, "server answered 201 without an error body", false},
		{"no Content-Length", head("200 OK", "Content-Type: application/json") + ok, "the answer (status 200) has no Content-Length", true},
		{"chunked", head("200 OK", "Transfer-Encoding: chunked") + "5\r\nhello\r\n0\r\n\r\n", `Transfer-Encoding "chunked"`, true},
		{"truncated body", head("200 OK", "Content-Length: 2000") + ok, fmt.Sprintf("the body ends after %d of its 2000 bytes", len(ok)), true},
		{"extra bytes", head("200 OK", length(ok)) + ok + "xyz", "3 bytes more than the Content-Length", true},
		{"bad Content-Length", head("200 OK", "Content-Length: 12a") + ok, `bad Content-Length "12a"`, true},
		{"two lengths", head("200 OK", length(ok), "Content-Length: 7") + ok, `bad Content-Length "7"`, true},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\n" + length(ok) + "\r\n\r\n" + ok, `malformed status line "HTTP/1.0 200 OK"`, true},
		{"garbage", "hello\r\n\r\n", `malformed status line "hello"`, true},
		{"bare LF", "HTTP/1.1 200 OK\n", "does not end in CRLF", true},
		{"no header colon", head("200 OK", "Content-Length 10") + ok, `malformed header line "Content-Length 10"`, true},
		{"closed", "", "the server closed the connection", true},
		{"not JSON", head("200 OK", "Content-Length: 5") + "hello", "the answer (status 200) is not the expected JSON", false},
		{"null", head("200 OK", "Content-Length: 4") + "null", "is not the expected JSON: not a JSON object", false},
		{"empty object", head("200 OK", "Content-Length: 2") + "{}", `the answer is not the request asked about (id "", status "")`, false},
		{"other request", head("200 OK", length(requestBody("req_b", "consumed"))) + requestBody("req_b", "consumed"), `the answer is not the request asked about (id "req_b", status "consumed")`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			agent, _ := dialPair(t, answering(t, c.answer))
			status, err := agent.consume(t.Context(), "req_a")
			if err == nil {
				t.Fatalf("consume answered %q, want an error", status)
			}
			if want := "POST /api/v1/requests/req_a/consume: "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("the error %q does not start with %q", err, want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("the error %q does not say %q", err, c.want)
			}
			// A connection whose framing failed is not used again.
			if !c.broken {
				return
			}
			if _, err := agent.consume(t.Context(), "req_a"); err == nil || !strings.Contains(err.Error(), "the connection broke earlier: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("the next call: %v", err)
			}
		})
	}
}

// TestRawChecksEachCall: each call wants its own status code and state.
func TestRawChecksEachCall(t *testing.T) {
	answer := func(status, body string) string {
		return fmt.Sprintf("HTTP/1.1 %s\r\nContent-Length: %d\r\n\r\n%s", status, len(body), body)
	}
	t.Run("create of an existing request", func(t *testing.T) {
		agent, _ := dialPair(t, answering(t, answer("200 OK", requestBody("req_a", "pending"))))
		id, status, created, err := agent.create(t.Context(), 1, 2)
		if err != nil || id != "req_a" || status != "pending" || created {
			t.Errorf("create: %q %q %v %v; want req_a pending false", id, status, created, err)
		}
	})
	t.Run("decision not approved", func(t *testing.T) {
		_, decider := dialPair(t, answering(t, answer("200 OK", requestBody("req_a", "denied"))))
		err := decider.approve(t.Context(), 0, "req_a")
		if want := `POST /api/v1/requests/req_a/decision: the answer says "denied", not approved`; err == nil || err.Error() != want {
			t.Errorf("approve: %v; want %s", err, want)
		}
	})
	t.Run("long poll of another request", func(t *testing.T) {
		agent, _ := dialPair(t, answering(t, answer("200 OK", requestBody("req_b", "approved"))))
		_, err := agent.wait(t.Context(), "req_a", func() {})
		if err == nil || !strings.Contains(err.Error(), "GET /api/v1/requests/req_a?wait=30s: the answer is not the request asked about") {
			t.Errorf("wait: %v", err)
		}
	})
	t.Run("Connection: close", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Connection", "close")
			io.WriteString(w, requestBody("req_a", "consumed"))
		}))
		defer srv.Close()
		agent, _ := dialPair(t, strings.TrimPrefix(srv.URL, "http://"))
		if s, err := agent.consume(t.Context(), "req_a"); err != nil || s != "consumed" {
			t.Fatalf("the first consume: %q, %v", s, err)
		}
		if _, err := agent.consume(t.Context(), "req_a"); err == nil || !strings.Contains(err.Error(), "(Connection: close)") {
			t.Errorf("the second consume: %v", err)
		}
	})
}
