package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/countersign/countersign/client"
)

// TestGarbageAnswers: a 2xx answer that is not the request asked about is
// refused as garbage, never taken for a state; above all, a consume that
// does not say "consumed" is no approval to act on.
func TestGarbageAnswers(t *testing.T) {
	for _, body := range []string{`null`, `{}`, `{"id":"req_other","status":"consumed"}`, `{"id":"req_a","status":"approved"}`, `{"id":"req_a"}`} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(body))
		}))
		c := client.New(srv.URL, "csk_x")
		if r, err := c.Consume(t.Context(), "req_a"); !errors.Is(err, client.ErrUnreachable) {
			t.Errorf("Consume answered %s: %+v, %v; want ErrUnreachable", body, r, err)
		}
		if body != `{"id":"req_a","status":"approved"}` {
			if r, err := c.Wait(t.Context(), "req_a", time.Second); !errors.Is(err, client.ErrUnreachable) {
				t.Errorf("Wait answered %s: %+v, %v; want ErrUnreachable", body, r, err)
			}
		}
		srv.Close()
	}
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"id":"req_a","status":"consumed"}`))
	}))
	defer ok.Close()
	if r, err := client.New(ok.URL, "csk_x").Consume(t.Context(), "req_a"); err != nil || r.Status != "consumed" {
		t.Fatalf("a real consume: %+v, %v", r, err)
	}
}
