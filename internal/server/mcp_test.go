package server_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/countersign/countersign/internal/server"
)

func TestMCPNotConfigured(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	msg := s.call(http.MethodPost, "/mcp", s.KeyA, `{}`).wantError(t, "POST /mcp", http.StatusNotFound, "not_found")
	if msg != "no MCP upstreams are configured on this server; start it with --mcp-config FILE" {
		t.Errorf("message %q", msg)
	}
}

// TestMCPEndpoint: /mcp reaches the gateway's handler; the API's rate of
// an address counts only its requests without a valid key (the gateway
// limits the calls of keys, as tool errors), and once it is spent, nothing
// from that address gets through.
func TestMCPEndpoint(t *testing.T) {
	t.Parallel()
	s := newServer(t, func(c *server.Config) {
		c.RatePerMinute = 12 // a burst of 2
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Write(body)
		})
	})
	for range 5 {
		if r := s.do(s.mcpRequest(s.KeyA, "")); r.status != http.StatusOK || r.body != `{"jsonrpc":"2.0"}` {
			t.Fatalf("POST /mcp: %d %s", r.status, r.body)
		}
	}
	for range 2 {
		s.do(s.mcpRequest("csk_wrong", "")).wantError(t, "POST /mcp with a bad key", http.StatusUnauthorized, "unauthorized")
	}
	s.do(s.mcpRequest("csk_wrong", "")).wantError(t, "third POST /mcp with a bad key", http.StatusTooManyRequests, "limited")
	s.do(s.mcpRequest(s.KeyA, "")).wantError(t, "POST /mcp after the bad keys", http.StatusTooManyRequests, "limited")
}

// mcpRequest is a POST to /mcp for the public host, from an origin or none.
func (s *testServer) mcpRequest(key, origin string) *http.Request {
	req := s.newRequest(http.MethodPost, "/mcp", key, `{"jsonrpc":"2.0"}`)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	return req
}

// TestMCPRebinding: /mcp answers only under the public URL's host and to
// no page of another origin, as the pages do, so that a DNS-rebinding
// page cannot reach it under its own name.
func TestMCPRebinding(t *testing.T) {
	t.Parallel()
	reached := 0
	s := newServer(t, func(c *server.Config) {
		c.MCP = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ })
	})
	evil := s.mcpRequest(s.KeyA, "http://evil.example.com")
	evil.Host = "evil.example.com"
	s.do(evil).wantError(t, "POST /mcp for another host", http.StatusMisdirectedRequest, "misdirected")
	s.do(s.mcpRequest(s.KeyA, "http://evil.example.com")).wantError(t, "POST /mcp from another origin", http.StatusForbidden, "forbidden")
	s.do(s.mcpRequest(s.KeyA, "null")).wantError(t, "POST /mcp from origin null", http.StatusForbidden, "forbidden")
	if reached != 0 {
		t.Fatalf("the gateway was reached %d times", reached)
	}
	for _, origin := range []string{"", "https://approve.example.com"} {
		if r := s.do(s.mcpRequest(s.KeyA, origin)); r.status != http.StatusOK {
			t.Errorf("POST /mcp from %q: %d %s", origin, r.status, r.body)
		}
	}
	if reached != 2 {
		t.Errorf("the gateway was reached %d times, want 2", reached)
	}
}
