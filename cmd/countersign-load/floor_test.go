package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// TestFloorCycle: the floor answers a cycle as countersign does for the
// cycles scenario (create, a long poll woken by the decision, consume once)
// and refuses the wrong credential and a second use.
func TestFloorCycle(t *testing.T) {
	f := &floor{reqs: map[string]*floorRequest{}}
	ts := httptest.NewServer(f.routes())
	defer ts.Close()
	call := func(method, path, credential, body string) (int, answer) {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+credential)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var a answer
		json.Unmarshal(bytes.TrimSpace(b), &a)
		return resp.StatusCode, a
	}
	if st, _ := call("POST", "/api/v1/requests", floorToken, `{"kind":"generic","action":"x"}`); st != http.StatusUnauthorized {
		t.Errorf("create with an approver token: %d, want 401", st)
	}
	st, created := call("POST", "/api/v1/requests", floorKey, `{"kind":"generic","action":"load.cycle","arguments":{"a":1}}`)
	if st != http.StatusCreated || created.Status != "pending" || !strings.HasPrefix(created.ID, "req_") {
		t.Fatalf("create: %d %+v", st, created)
	}
	woke := make(chan answer, 1)
	go func() {
		_, a := call("GET", "/api/v1/requests/"+created.ID+"?wait=25s", floorKey, "")
		woke <- a
	}()
	// The decision comes while the poll is parked, which only the gauge
	// tells.
	testutil.Eventually(t, func() bool { return f.waiters.Load() == 1 }, "the long poll never parked")
	if st, a := call("POST", "/api/v1/requests/"+created.ID+"/decision", floorToken, `{"decision":"approve"}`); st != http.StatusOK || a.Status != "approved" {
		t.Fatalf("approve: %d %+v", st, a)
	}
	if a := <-woke; a.Status != "approved" {
		t.Errorf("the poll woke with %+v, want approved", a)
	}
	if st, a := call("POST", "/api/v1/requests/"+created.ID+"/consume", floorKey, ""); st != http.StatusOK || a.Status != "consumed" {
		t.Errorf("consume: %d %+v", st, a)
	}
	if st, _ := call("POST", "/api/v1/requests/"+created.ID+"/consume", floorKey, ""); st == http.StatusOK {
		t.Error("a second consume succeeded")
	}
}
