package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultRate is how many calls one agent key may make in a minute when
// the configuration sets no rate.
const DefaultRate = 600

// limitedMethods are the calls the rate counts: those that reach an
// upstream (logging/setLevel is passed on to every upstream that logs).
// Listing and ping stay free, so that a client over its rate still learns
// what there is and keeps its session. Opening a /mcp session is counted
// too, before the session is made (openSession).
var limitedMethods = map[string]bool{
	"tools/call": true, "resources/read": true, "prompts/get": true, "completion/complete": true,
	"logging/setLevel": true,
}

// limit refuses a call beyond the caller's rate before any work is done on
// it. A tool call over it is a tool error that says when to retry, which
// the model reads; an HTTP 429 would be an exception in most clients'
// transports, and the model would learn nothing. Opening a /mcp session
// takes a token too, before the SDK makes the session (openSession); the
// sessions themselves are counted here (trackSessions).
func (g *Gateway) limit(next mcp.MethodHandler) mcp.MethodHandler {
	return g.trackSessions(func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if !limitedMethods[method] {
			return next(ctx, method, req)
		}
		p, err := g.principal(req)
		if err != nil {
			return nil, err
		}
		now := g.now()
		ok, wait := g.limiter.Allow(p.ID, now)
		if ok {
			return next(ctx, method, req)
		}
		secs := int(math.Ceil(wait.Seconds()))
		msg := fmt.Sprintf("countersign: this agent key made more than %d calls in a minute; the call did not run. "+
			"Retry after %d s (at %s UTC).", g.limiter.PerMinute(), secs, now.Add(wait).UTC().Format("15:04:05"))
		if method == "tools/call" {
			res := ToolError("%s", msg)
			res.Meta = mcp.Meta{"countersign/status": "rate_limited", "countersign/retry_after_ms": wait.Milliseconds()}
			return res, nil
		}
		return nil, &jsonrpc.Error{Code: codeRateLimited, Message: msg}
	})
}

// codeRateLimited is the JSON-RPC error of a call over the rate that is not
// a tool call (a server-defined code).
const codeRateLimited = -32029

// openSession admits a new /mcp session of the request's key: it takes a
// token of the key's rate, so that a key that only opens sessions is
// slowed down as one that only calls, and makes room under the session
// limits (sessions.go). It answers a refusal itself and returns nil;
// otherwise the function that ends the opening's request.
func (g *Gateway) openSession(w http.ResponseWriter, r *http.Request) (release func()) {
	key, now := keyOf(r.Context()), g.now()
	if ok, wait := g.limiter.Allow(key, now); !ok {
		writeRefusal(w, codeRateLimited, &refusal{status: http.StatusTooManyRequests, retry: wait, msg: fmt.Sprintf(
			"countersign: this agent key made more than %d calls or new sessions in a minute; no session was opened. "+
				"Retry after %d s (at %s UTC).", g.limiter.PerMinute(), seconds(wait), now.Add(wait).UTC().Format("15:04:05"))})
		return nil
	}
	release, no := g.sessions.admit(key)
	if no != nil {
		writeRefusal(w, codeTooManySessions, no)
		return nil
	}
	return release
}

// writeRefusal answers an initialize that opened no session: the HTTP
// status (429: this key's doing; 503: the server is full), Retry-After,
// and a JSON-RPC error with no id (the message is not read) whose message
// says which limit, and whose data says when to retry. Clients' transports
// show the status, and most of them the message.
func writeRefusal(w http.ResponseWriter, code int64, no *refusal) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", strconv.Itoa(seconds(no.retry)))
	w.WriteHeader(no.status)
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
		"code": code, "message": no.msg, "data": map[string]any{"retry_after_ms": no.retry.Milliseconds()}}})
}
