package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/countersign/countersign"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxBody bounds the body of an MCP request over HTTP. It is larger than
// the API's: a tool call's arguments may carry a document or a file's
// contents, which the human is shown before the call goes on.
const MaxBody = 4 << 20

// principalKey holds the Principal in a bearer token's TokenInfo.
const principalKey = "countersign_principal"

// AgentVerifier authenticates an agent key.
type AgentVerifier func(ctx context.Context, secret string) (countersign.Agent, error)

// HTTPHandler serves the gateway over streamable HTTP, for agent keys sent
// as bearer tokens. Clients of 2026-07-28 are served statelessly, as that
// protocol has it; older clients get sessions (Mcp-Session-Id), the only
// way to send them elicitation/create. A session is bound to the key that
// opened it, and sessions are bounded per key and in all (sessions.go).
func (g *Gateway) HTTPHandler(verify AgentVerifier) http.Handler {
	dispatch := g.streamable()
	verifier := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		a, err := verify(ctx, token)
		if code := countersign.ErrorCode(err); code == countersign.EUNAUTHORIZED || code == countersign.EFORBIDDEN {
			return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, countersign.ErrorMessage(err))
		} else if err != nil {
			return nil, errors.New("internal error")
		}
		return &auth.TokenInfo{UserID: a.KeyID, Extra: map[string]any{principalKey: PrincipalOf(a)}}, nil
	}
	// Agent keys do not expire; a revoked one no longer verifies.
	return auth.RequireBearerToken(verifier, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(dispatch)
}

// streamable serves an authenticated request: statelessly for clients of
// 2026-07-28, in a session for older ones.
func (g *Gateway) streamable() http.Handler {
	getServer := func(*http.Request) *mcp.Server { return g.server }
	common := mcp.StreamableHTTPOptions{
		Logger: quiet(g.log),
		// The server checks Host and Origin of /mcp against its public
		// URL, which the SDK's check (localhost only) does not know.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        MaxBody,
	}
	stateless := common
	stateless.Stateless = true
	stateless.PropagateRequestCancellation = true
	stateful := common
	stateful.SessionTimeout = sessionIdle
	// Events carry ids, and a client resumes a stream it lost (resume.go).
	// The end of a session, which the event store hears of, frees its
	// place under the session limits (sessions.go).
	events := newEventStore()
	events.closed = g.sessions.closed
	stateful.EventStore = events
	statelessH := mcp.NewStreamableHTTPHandler(getServer, &stateless)
	statefulH := mcp.NewStreamableHTTPHandler(getServer, &stateful)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= newProtocolVersion {
			statelessH.ServeHTTP(w, r)
			return
		}
		if !resumeCheck(events, w, r) {
			return
		}
		var sw http.ResponseWriter = &foreignSession{ResponseWriter: w}
		switch id := r.Header.Get("Mcp-Session-Id"); {
		case r.Method == http.MethodPost && id == "":
			// A new session: within the key's rate and the limits.
			release := g.openSession(w, r)
			if release == nil {
				return
			}
			defer release()
			held := &heldPrime{ResponseWriter: sw}
			defer held.release()
			sw = held
		case r.Method == http.MethodPost:
			// A session with a request in flight is not closed for
			// another one.
			defer g.sessions.begin(id, keyOf(r.Context()))()
		}
		statefulH.ServeHTTP(sw, r)
	})
}

// foreignSession answers a session opened by another key as the SDK
// answers an unknown one, 404 "session not found", so that a key learns
// nothing of the sessions of other keys; the SDK itself answers 403. With
// the SDK's localhost and cross-origin checks off (see HTTPHandler), that
// is the only 403 the stateful handler writes.
type foreignSession struct {
	http.ResponseWriter
	hidden bool // the 403 was turned into the 404; its body is dropped
}

func (w *foreignSession) WriteHeader(code int) {
	if code != http.StatusForbidden || w.hidden {
		w.ResponseWriter.WriteHeader(code)
		return
	}
	w.hidden = true
	http.Error(w.ResponseWriter, "session not found", http.StatusNotFound)
}

func (w *foreignSession) Write(b []byte) (int, error) {
	if w.hidden {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection, for the SDK's
// flushes and deadlines.
func (w *foreignSession) Unwrap() http.ResponseWriter { return w.ResponseWriter }
