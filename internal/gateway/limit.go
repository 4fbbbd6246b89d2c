package gateway

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
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

// callLimiter keeps one token bucket per principal and forgets those that
// stayed quiet.
type callLimiter struct {
	perMinute int
	mu        sync.Mutex
	buckets   map[string]*callBucket
	lastSweep time.Time
}

type callBucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// allow takes a token for the principal and, when there is none, says how
// long until there is.
func (l *callLimiter) allow(principal string, now time.Time) (bool, time.Duration) {
	if l.perMinute <= 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*callBucket{}
	}
	if now.Sub(l.lastSweep) > time.Minute {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > 10*time.Minute {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[principal]
	if b == nil {
		// A burst of a sixth of the minute's allowance, as the API's.
		b = &callBucket{lim: rate.NewLimiter(rate.Limit(float64(l.perMinute)/60), max(l.perMinute/6, 1))}
		l.buckets[principal] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
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
		ok, wait := g.limiter.allow(p.ID, now)
		if ok {
			return next(ctx, method, req)
		}
		secs := int(math.Ceil(wait.Seconds()))
		msg := fmt.Sprintf("countersign: this agent key made more than %d calls in a minute; the call did not run. "+
			"Retry after %d s (at %s UTC).", g.limiter.perMinute, secs, now.Add(wait).UTC().Format("15:04:05"))
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
