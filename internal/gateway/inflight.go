//lint:file-ignore SA1019 logging, sampling and roots are deprecated as of MCP 2026-07-28, but upstreams and clients of 2025-11-25 use them; the gateway passes them through while they do.

package gateway

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What an upstream sends besides its answers (log messages, and the
// requests sampling/createMessage, elicitation/create and roots/list) goes
// to the client of the one operation it belongs to, or to nobody. Every
// client of /mcp, of every key and account, shares an upstream's session,
// so a message passed on by a guess could hand one account's data to
// another, and bring that account's answer back into the first's result.
//
// Every request the gateway forwards to an upstream counts (tools/call,
// resources/read, prompts/get, completion/complete, and its own, such as
// tools/list or logging/setLevel, which belong to no client): it is in
// flight from the moment it is written until the upstream answers it or
// its connection ends, also after its client cancelled it or was answered.
// What a message belongs to is read off the connection it came on:
//
//   - over HTTP, the stream tells: a message on the event stream of a POST
//     belongs to the request of that POST (also once resumed); one on the
//     stream the upstream opens for messages outside requests belongs to
//     none;
//   - over stdio, nothing on the wire names a request: a message read while
//     exactly one request is in flight belongs to it, one read while none
//     or several are belongs to none.
//
// A message is passed on only to the client of the operation it belongs
// to, and only while that operation runs for its client; everything else
// is dropped and counted (passthrough.dropped). An upstream that never
// answers a cancelled request (the protocol allows it) keeps it in flight
// until it restarts: over stdio, nothing it sends meanwhile is passed on.

// operationKey carries the operation a request to an upstream is sent for,
// from the gateway's handler to the upstream's connection.
type operationKey struct{}

// operation is what a request to an upstream keeps of the client
// operation it was sent for: the operation while it runs, nil once it
// ended, so that a request the upstream never answers holds nothing of
// its client.
type operation struct{ call atomic.Pointer[runningCall] }

// operationOf returns the operation ctx carries, or nil.
func operationOf(ctx context.Context) *operation {
	o, _ := ctx.Value(operationKey{}).(*operation)
	return o
}

// attribution is what a message that belongs to the request of o belongs
// to (o nil: a request of countersign's own).
func (o *operation) attribution() attribution {
	if o == nil {
		return attribution{why: whyOwn}
	}
	if c := o.call.Load(); c != nil {
		return attribution{call: c}
	}
	return attribution{why: whyEnded}
}

// forwarded are the methods of clients that the gateway forwards to an
// upstream, and whose messages go back to the client.
var forwarded = map[string]bool{"tools/call": true, "resources/read": true, "prompts/get": true, "completion/complete": true}

// operations makes every forwarded request of a client an operation that
// its upstream's messages can be passed on to (begin), and ends it once
// the handler answered, after the log messages queued for it reached the
// client.
func (g *Gateway) operations(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		ss, ok := req.GetSession().(*mcp.ServerSession)
		if !forwarded[method] || !ok || ss == nil {
			return next(ctx, method, req)
		}
		ctx, end := g.relay.pass.begin(ctx, ss, req.GetParams())
		defer end()
		return next(ctx, method, req)
	}
}

// begin starts a client operation: requests to upstreams sent on the
// returned context are sent for it. The returned function ends it, and
// returns once the log messages queued for it reached its client (or its
// context ended).
func (p *passthrough) begin(ctx context.Context, ss *mcp.ServerSession, params mcp.Params) (context.Context, func()) {
	c := &runningCall{ctx: ctx, ss: ss, metaLevel: hasLogLevel(params)}
	o := &operation{}
	o.call.Store(c)
	return context.WithValue(ctx, operationKey{}, o), func() {
		o.call.Store(nil)
		p.mu.Lock()
		c.ended = true
		if c.token != "" {
			delete(p.byToken, c.token)
		}
		if c.logs != nil {
			close(c.logs) // under mu: nothing is queued on it after this
		}
		p.mu.Unlock()
		if c.delivered != nil {
			<-c.delivered
		}
	}
}

// hasLogLevel reports whether a request carried a log level in its _meta
// (2026-07-28).
func hasLogLevel(params mcp.Params) bool {
	if params == nil || reflect.ValueOf(params).IsNil() {
		return false
	}
	_, ok := params.GetMeta()[mcp.MetaKeyLogLevel]
	return ok
}

// attribution is what a message of an upstream belongs to, as its
// connection tells: the client operation, or nil and why none.
type attribution struct {
	call *runningCall
	why  string
}

// Why a message of an upstream belongs to no client operation.
const (
	whyOutside = "it came outside any operation of a client"
	whySeveral = "several operations run on it, and what it sent cannot be told apart by operation"
	whyOwn     = "it came during a request of countersign's own"
	whyEnded   = "the operation it came during has ended for its client"
	whyStream  = "it came on the stream for messages outside requests"
)

// flights are the requests written on a connection to a stdio upstream
// that it has not answered, each with the operation it was sent for (nil:
// countersign's own).
type flights struct {
	mu sync.Mutex
	m  map[jsonrpc.ID]*operation
}

// sent records a request written to the upstream.
func (f *flights) sent(id jsonrpc.ID, o *operation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[jsonrpc.ID]*operation{}
	}
	f.m[id] = o
}

// answered forgets a request the upstream answered, or that was never
// written.
func (f *flights) answered(id jsonrpc.ID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, id)
}

// closed forgets every request: the connection ended, and none of them
// will be answered on it.
func (f *flights) closed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m = nil
}

// attribution returns what a message read now belongs to: the one request
// in flight, if there is exactly one.
func (f *flights) attribution() attribution {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch len(f.m) {
	case 0:
		return attribution{why: whyOutside}
	case 1:
		for _, o := range f.m {
			return o.attribution()
		}
	}
	return attribution{why: whySeveral}
}

// stampKey is the _meta key under which the gateway marks a request of an
// upstream, as its connection reads it, with what it belongs to: the SDK
// hands the request to the gateway's handler later, on another goroutine,
// without its JSON-RPC id. The value is "op:" and a random token of the
// operation, known only in this process, or "why:" and why none; the key
// is taken off before the request goes on to a client.
const stampKey = "countersign/operation"

// stamped are the methods of upstreams' requests that the gateway passes
// on, and so stamps.
var stamped = map[string]bool{"sampling/createMessage": true, "elicitation/create": true, "roots/list": true}

// stamp marks a request of an upstream, in its params' _meta, with what it
// belongs to, replacing any value the upstream put there. A request whose
// params cannot be stamped is left as it is: it holds no token of the
// gateway's, and is passed on to nobody.
func (p *passthrough) stamp(req *jsonrpc.Request, a attribution) {
	if !req.IsCall() || !stamped[req.Method] {
		return
	}
	value := "why:" + a.why
	if c := a.call; c != nil {
		p.mu.Lock()
		if c.ended {
			value = "why:" + whyEnded
		} else {
			if c.token == "" {
				c.token = rand.Text()
				if p.byToken == nil {
					p.byToken = map[string]*runningCall{}
				}
				p.byToken[c.token] = c
			}
			value = "op:" + c.token
		}
		p.mu.Unlock()
	}
	if params, ok := withMeta(req.Params, stampKey, value); ok {
		req.Params = params
	}
}

// withMeta returns params with _meta[key] set to value; false when params
// or its _meta is not an object (the SDK refuses such a request).
func withMeta(params json.RawMessage, key, value string) (json.RawMessage, bool) {
	m := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if json.Unmarshal(params, &m) != nil || m == nil {
			return nil, false
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &meta) != nil || meta == nil {
			return nil, false
		}
	}
	v, _ := json.Marshal(value)
	meta[key] = v
	var err error
	if m["_meta"], err = json.Marshal(meta); err != nil {
		return nil, false
	}
	out, err := json.Marshal(m)
	return out, err == nil
}

// claim returns what a request of an upstream was stamped as belonging to
// (whyOutside when it was not stamped), and takes the stamp off its _meta.
func (p *passthrough) claim(meta mcp.Meta) attribution {
	v, _ := meta[stampKey].(string)
	delete(meta, stampKey)
	if token, ok := strings.CutPrefix(v, "op:"); ok {
		p.mu.Lock()
		c := p.byToken[token]
		p.mu.Unlock()
		if c == nil {
			return attribution{why: whyEnded}
		}
		return attribution{call: c}
	}
	if why, ok := strings.CutPrefix(v, "why:"); ok && whys[why] {
		return attribution{why: why}
	}
	return attribution{why: whyOutside}
}

// whys are the reasons a stamp may give.
var whys = map[string]bool{whyOutside: true, whySeveral: true, whyOwn: true, whyEnded: true, whyStream: true}
