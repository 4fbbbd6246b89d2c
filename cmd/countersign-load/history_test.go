package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The pending list's figure is the list's own: the measurement reads each
// answer to its end, so that one connection serves every list.
func TestPendingListReusesItsConnection(t *testing.T) {
	var conns atomic.Int64
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Query().Get("status") != "pending" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"requests":[`+strings.Repeat(`{"id":"req_x"},`, 200)+`{"id":"req_y"}]}`)
	}))
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.Start()
	defer ts.Close()

	srv := &server{base: ts.URL, token: "tok", metricsC: &http.Client{Transport: newTransport(4), Timeout: 10 * time.Second}}
	got, err := measurePendingList(context.Background(), srv, 20)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.sorted()); n != 20 {
		t.Errorf("%d latencies, want 20", n)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("20 lists opened %d connections, want 1", n)
	}
}
