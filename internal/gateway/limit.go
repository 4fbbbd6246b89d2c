package gateway

import (
	"context"
	"fmt"
	"math"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultRate is how many calls one agent key may make in a minute when
// the configuration sets no rate.
const DefaultRate = 600

// limitedMethods are the calls the rate counts: those that reach an
// upstream (logging/setLevel is passed on to every upstream that logs).
// Listing, initialize and ping stay free, so that a client over its rate
// still learns what there is and keeps its session.
var limitedMethods = map[string]bool{
	"tools/call": true, "resources/read": true, "prompts/get": true, "completion/complete": true,
	"logging/setLevel": true,
}

// limit refuses a call beyond the caller's rate before any work is done on
// it. A tool call over it is a tool error that says when to retry, which
// the model reads; an HTTP 429 would be an exception in most clients'
// transports, and the model would learn nothing.
func (g *Gateway) limit(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
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
			res := toolError("%s", msg)
			res.Meta = mcp.Meta{"countersign/status": "rate_limited", "countersign/retry_after_ms": wait.Milliseconds()}
			return res, nil
		}
		return nil, &jsonrpc.Error{Code: codeRateLimited, Message: msg}
	}
}

// codeRateLimited is the JSON-RPC error of a call over the rate that is not
// a tool call (a server-defined code).
const codeRateLimited = -32029
