package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// httpClient has no overall timeout: each call sets its own through ctx.
var httpClient = &http.Client{}

// call sends one HTTP request as curl would and returns the status and
// body. cred, when set, goes as a bearer token; body, when set, as JSON.
func call(t *testing.T, method, url, cred, body string) (int, []byte) {
	t.Helper()
	return callTimeout(t, 20*time.Second, method, url, cred, body)
}

func callTimeout(t *testing.T, timeout time.Duration, method, url, cred, body string) (int, []byte) {
	t.Helper()
	code, data, err := fetch(timeout, method, url, cred, body)
	if err != nil {
		t.Fatal(err)
	}
	return code, data
}

// fetch is call for goroutines other than the test's: it returns its error
// instead of failing the test.
func fetch(timeout time.Duration, method, url, cred, body string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, fmt.Errorf("build %s %s: %w", method, url, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cred != "" {
		req.Header.Set("Authorization", "Bearer "+cred)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read the body: %w", method, url, err)
	}
	return resp.StatusCode, data, nil
}

// polled is the answer to a long poll made in a goroutine.
type polled struct {
	code int
	body []byte
	err  error
}

// longPoll starts GET url in a goroutine and returns where its answer
// arrives.
func longPoll(url, cred string, timeout time.Duration) <-chan polled {
	ch := make(chan polled, 1)
	go func() {
		code, body, err := fetch(timeout, "GET", url, cred, "")
		ch <- polled{code, body, err}
	}()
	return ch
}

// apiRequest is the part of a request's JSON the tests look at.
type apiRequest struct {
	ID        string `json:"id"`
	Reference string `json:"reference"`
	Kind      string `json:"kind"`
	Action    string `json:"action"`
	Key       string `json:"key"`
	Status    string `json:"status"`
	Text      string `json:"text"`
	InboxURL  string `json:"inbox_url"`
	DecidedBy string `json:"decided_by"`
}

// apiError is an error answer of the API.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// expectRequest calls the API and decodes a request, failing unless the
// status is want.
func expectRequest(t *testing.T, want int, method, url, cred, body string) apiRequest {
	t.Helper()
	code, data := call(t, method, url, cred, body)
	if code != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, url, code, want, data)
	}
	var r apiRequest
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s %s: the body is not a request: %v; %s", method, url, err, data)
	}
	return r
}

// expectError calls the API and fails unless it answers status with the
// error code.
func expectError(t *testing.T, status int, code, method, url, cred, body string) apiError {
	t.Helper()
	got, data := call(t, method, url, cred, body)
	var e apiError
	if err := json.Unmarshal(data, &e); err != nil || got != status || e.Error.Code != code {
		t.Fatalf("%s %s: status %d body %s, want %d with code %q", method, url, got, data, status, code)
	}
	return e
}

// createRequest asks as the agent and returns the new request.
func (s *server) createRequest(key, action string) apiRequest {
	s.t.Helper()
	body := fmt.Sprintf(`{"kind":"generic","action":%q,"context":{"user":"test","host":"ci"}}`, action)
	r := expectRequest(s.t, http.StatusCreated, "POST", s.URL+"/api/v1/requests", key, body)
	if r.Status != "pending" || !referenceRE.MatchString(r.Reference) || !strings.HasPrefix(r.ID, "req_") {
		s.t.Fatalf("created request %+v: want pending with an id and a reference", r)
	}
	return r
}

// jsonObject decodes one JSON object of strings and checks its keys.
func jsonObject(t *testing.T, out string, keys ...string) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not a JSON object of strings: %v\n%s", err, out)
	}
	got := make([]string, 0, len(m))
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(keys)
	if !slices.Equal(got, keys) {
		t.Fatalf("JSON keys %q, want %q", got, keys)
	}
	return m
}
