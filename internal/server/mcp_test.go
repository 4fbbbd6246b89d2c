package server_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/server"
)

func TestMCPNotConfigured(t *testing.T) {
	s := newServer(t)
	msg := s.call(http.MethodPost, "/mcp", s.keyA, `{}`).wantError(t, "POST /mcp", http.StatusNotFound, "not_found")
	if msg != "no MCP upstreams are configured on this server; start it with --mcp-config FILE" {
		t.Errorf("message %q", msg)
	}
}

// TestMCPEndpoint: /mcp reaches the gateway's handler, and the API's rate
// limit applies to it.
func TestMCPEndpoint(t *testing.T) {
	s := newServer(t, func(c *server.Config, _ *approval.Config) {
		c.RatePerMinute = 12 // a burst of 2
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		})
	})
	for range 2 {
		if r := s.call(http.MethodPost, "/mcp", s.keyA, `{"jsonrpc":"2.0"}`); r.status != http.StatusOK || string(r.body) != `{"jsonrpc":"2.0"}` {
			t.Fatalf("POST /mcp: %d %s", r.status, r.body)
		}
	}
	s.call(http.MethodPost, "/mcp", s.keyA, `{}`).wantError(t, "third POST /mcp", http.StatusTooManyRequests, "limited")
}
