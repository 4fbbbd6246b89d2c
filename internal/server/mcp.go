package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/limit"
)

// mcpHold is the longest an MCP request may stay open: a call held while a
// human decides waits at most the gateway's hold, far below this.
const mcpHold = 15 * time.Minute

// mcpEndpoint serves the MCP gateway at /mcp: streamable HTTP for agent
// keys and OAuth access tokens sent as bearer tokens. It checks Host and
// Origin as the pages do, applies the API's rate limit per client address
// to requests without a valid credential, and its JSON errors for bad
// credentials, and gives each request
// a write deadline of its own, since a call may wait for a human far longer
// than the server's write timeout.
func (s *Server) mcpEndpoint() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.MCP == nil {
			s.writeAPIError(w, r, countersign.Errorf(countersign.ENOTFOUND,
				"no MCP upstreams are configured on this server; start it with --mcp-config FILE"))
			return
		}
		// DNS rebinding: a page of another site, its name pointed at this
		// server, could otherwise talk to /mcp under its own name. A
		// browser page of another origin may not either; MCP clients that
		// are not browsers send no Origin.
		if err := s.checkHost(r); err != nil {
			s.writeAPIError(w, r, err)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && o != s.publicOrigin() {
			s.writeAPIError(w, r, countersign.Errorf(countersign.EFORBIDDEN,
				"MCP requests from a page of another origin (%s) are refused; /mcp answers MCP clients and pages of %s", o, s.publicOrigin()))
			return
		}
		// Calls of an agent key have the gateway's rate, answered as tool
		// errors that the model reads; the API's rate of this address
		// counts only requests without a valid key here, so that guessing
		// keys is slowed down and a busy agent's calls never get a 429,
		// which its client's transport would throw. (Opening sessions
		// faster than the key's rate does: the gateway's session limits.)
		addr := s.clientAddr(r)
		if limited, retry := s.limiter.Blocked(addr, time.Now()); limited {
			s.writeAPIError(w, r, &countersign.Error{Code: countersign.ELIMIT,
				Message: "too many requests without a valid agent key from this address; retry after the time in Retry-After", RetryAfter: retry})
			return
		}
		if limit := s.cfg.MCPMaxBody; limit > 0 && r.ContentLength > limit {
			s.writeAPIError(w, r, tooLarge(limit))
			return
		}
		// The gateway checks the key again, from the store's cache, but
		// answers a bad one in plain text: check it here first, for the
		// API's JSON errors.
		if _, err := s.mcpAgentOf(w, r); err != nil {
			s.limiter.Allow(addr, time.Now())
			s.writeAPIError(w, r, err)
			return
		}
		if r.Method == http.MethodPost && s.cfg.MCPMaxBody > 0 {
			if err := s.mcpDepth(w, r); err != nil {
				writeMCPError(w, err)
				return
			}
		}
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(mcpHold))
		s.cfg.MCP.ServeHTTP(w, r)
	})
}

// mcpDepth reads an MCP message, refuses one nested deeper than
// limit.MaxJSONDepth before the MCP library decodes it (it would decode
// up to a thousand levels), and gives the handler the body again.
func (s *Server) mcpDepth(w http.ResponseWriter, r *http.Request) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MCPMaxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return tooLarge(s.cfg.MCPMaxBody)
	} else if err != nil {
		return countersign.Errorf(countersign.EINVALID, "could not read the body")
	}
	if limit.CheckJSONDepth(data) != nil {
		return countersign.Errorf(countersign.EINVALID, "the message nests objects and arrays deeper than the limit of %d levels", limit.MaxJSONDepth)
	}
	r.Body = io.NopCloser(bytes.NewReader(data))
	return nil
}

// writeMCPError answers an MCP message that was refused before it was
// read as JSON-RPC does a message it cannot take: the HTTP status of the
// error, and a JSON-RPC error with no id (invalid params for a message
// nested too deep) that names the limit.
func writeMCPError(w http.ResponseWriter, err error) {
	code, status := -32602, http.StatusBadRequest
	if countersign.ErrorCode(err) == countersign.ETOOLARGE {
		code, status = -32600, http.StatusRequestEntityTooLarge
	}
	writeJSON(w, status, map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": countersign.ErrorMessage(err)}})
}
