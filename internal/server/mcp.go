package server

import (
	"net/http"
	"time"

	"github.com/countersign/countersign"
)

// mcpHold is the longest an MCP request may stay open: a call held while a
// human decides waits at most the gateway's hold, far below this.
const mcpHold = 15 * time.Minute

// mcpEndpoint serves the MCP gateway at /mcp: streamable HTTP for agent
// keys sent as bearer tokens. It applies the API's rate limit per client
// address and its JSON errors for bad credentials, and gives each request
// a write deadline of its own, since a call may wait for a human far longer
// than the server's write timeout.
func (s *Server) mcpEndpoint() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.MCP == nil {
			s.writeAPIError(w, r, countersign.Errorf(countersign.ENOTFOUND,
				"no MCP upstreams are configured on this server; start it with --mcp-config FILE"))
			return
		}
		if ok, retry := s.limiter.allow(s.clientAddr(r), time.Now()); !ok {
			s.writeAPIError(w, r, &countersign.Error{Code: countersign.ELIMIT,
				Message: "too many requests from this address; slow down and retry after the time in Retry-After", RetryAfter: retry})
			return
		}
		if limit := s.cfg.MCPMaxBody; limit > 0 && r.ContentLength > limit {
			s.writeAPIError(w, r, tooLarge(limit))
			return
		}
		// The gateway checks the key again, from the store's cache, but
		// answers a bad one in plain text: check it here first, for the
		// API's JSON errors.
		if _, err := s.agentOf(r); err != nil {
			s.writeAPIError(w, r, err)
			return
		}
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(mcpHold))
		s.cfg.MCP.ServeHTTP(w, r)
	})
}
