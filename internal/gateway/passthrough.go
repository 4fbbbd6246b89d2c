//lint:file-ignore SA1019 sampling and roots are deprecated as of MCP 2026-07-28, but upstreams and clients of 2025-11-25 use them; the gateway passes them through while they do.

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Requests from upstreams (sampling/createMessage, elicitation/create,
// roots/list) go to the client of the one operation they belong to
// (inflight.go), on that operation's stream, and only while it runs; the
// client's answer goes back. Anything else, and a client that did not
// declare the capability or cannot take a request from the server
// (2026-07-28, stateless), gets an MCP error: a request is never sent to
// another key's or account's client on a guess. Log messages of the
// upstreams go by the same rule (logging.go).
//
// The stdio gateway has exactly one client: roots/list, which upstreams
// ask outside calls (after initialize or roots/list_changed), goes to it
// whether or not a call runs, bound to none.
type passthrough struct {
	mu sync.Mutex
	// byToken are the running operations that a request of an upstream was
	// stamped with, by their token (inflight.go).
	byToken map[string]*runningCall
	// dropped counts the log messages and requests of upstreams that went
	// to no client.
	dropped atomic.Uint64
}

// runningCall is one operation of a client that the gateway forwards to an
// upstream (inflight.go): its client's session and the context of the
// client's request, which ends with it.
type runningCall struct {
	ctx context.Context
	ss  *mcp.ServerSession
	// metaLevel: the request carried a log level in its _meta
	// (2026-07-28).
	metaLevel bool
	// ended: the client has its answer, or cancelled; under
	// passthrough.mu. Nothing of the upstream is passed on to it after.
	ended bool
	// token is what requests of the upstream that belong to the operation
	// are stamped with; "" until the first. Under passthrough.mu.
	token string
	// logs queues the upstream's log messages for the client (see
	// logging.go), under passthrough.mu; nil until the first. delivered
	// is closed once they are.
	logs      chan *mcp.LoggingMessageParams
	delivered chan struct{}
}

// upstreamCapabilities are what the gateway of /mcp declares to an
// upstream, whose session its clients share: the requests it can pass on.
// It passes each on only to a client that declared it (see attribute). The
// stdio gateway declares what its client declared (declaredBy). Elicitation is form only: a URL from an
// upstream would send the human to a page countersign does not vouch for.
func upstreamCapabilities() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{
		Sampling:    &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}},
		RootsV2:     &mcp.RootCapabilities{ListChanged: true},
	}
}

// declaredBy returns what the gateway declares to the upstreams for a
// client: what the client declared of what the gateway passes on. A client
// of 2026-07-28 takes no requests from the server.
func declaredBy(p *mcp.InitializeParams) *mcp.ClientCapabilities {
	out := &mcp.ClientCapabilities{}
	if p == nil || p.Capabilities == nil || p.ProtocolVersion >= newProtocolVersion {
		return out
	}
	k := p.Capabilities
	if k.Sampling != nil {
		out.Sampling = &mcp.SamplingCapabilities{}
	}
	if formElicitation(k) {
		out.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
	}
	if k.RootsV2 != nil {
		out.RootsV2 = &mcp.RootCapabilities{ListChanged: k.RootsV2.ListChanged}
	}
	return out
}

// startOnFirst starts the upstreams of a stdio gateway on its client's
// first request, declaring to them what the client declared in its
// initialize (nothing, for a client of 2026-07-28, which sends none). The
// request waits for them as Start would have, so that the answer to
// initialize and the first tools/list already know their servers.
func (g *Gateway) startOnFirst(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		g.life.startMu.Lock()
		start := g.life.startOnce
		g.life.startOnce = nil
		if start != nil {
			p, _ := req.GetParams().(*mcp.InitializeParams) // nil for another method
			start(declaredBy(p))
		}
		g.life.startMu.Unlock()
		return next(ctx, method, req)
	}
}

// quietUntilInitialized drops the list_changed notifications the SDK
// sends to a session before its client said it is initialized
// (notifications/initialized): the stdio gateway's upstreams connect while
// its client's initialize waits, and their tools would be announced before
// the answer to it, or between the answer and the client's initialized,
// which the protocol does not allow. The client lists them after it
// anyway. Sessions of 2026-07-28, which have no initialized, take them on
// the streams they opened for them.
func (g *Gateway) quietUntilInitialized(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "notifications/tools/list_changed", "notifications/resources/list_changed", "notifications/prompts/list_changed":
			ss, ok := req.GetSession().(*mcp.ServerSession)
			if !ok {
				break
			}
			p := ss.InitializeParams()
			if p == nil || p.ProtocolVersion < newProtocolVersion && !g.initialized.has(ss) {
				return nil, nil
			}
		}
		return next(ctx, method, req)
	}
}

// noteInitialized records the sessions whose client sent
// notifications/initialized, for quietUntilInitialized.
func (g *Gateway) noteInitialized(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/initialized" {
			if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
				g.initialized.add(ss)
			}
		}
		return next(ctx, method, req)
	}
}

// sessionSet is a set of sessions that holds none of them: an entry goes
// when its session is collected, so that the set of a long-running /mcp
// endpoint does not grow with every session it ever had.
type sessionSet struct{ m sync.Map } // weak.Pointer[mcp.ServerSession] → struct{}

func (s *sessionSet) add(ss *mcp.ServerSession) {
	k := weak.Make(ss)
	if _, loaded := s.m.LoadOrStore(k, struct{}{}); !loaded {
		runtime.AddCleanup(ss, func(k weak.Pointer[mcp.ServerSession]) { s.m.Delete(k) }, k)
	}
}

func (s *sessionSet) has(ss *mcp.ServerSession) bool {
	_, ok := s.m.Load(weak.Make(ss))
	return ok
}

func (s *sessionSet) len() int {
	n := 0
	s.m.Range(func(any, any) bool { n++; return true })
	return n
}

// notPassed counts a request of an upstream that the gateway does not
// pass on, and returns the MCP error to answer it with. The request itself
// is not logged: it may be any key's.
func (g *Gateway) notPassed(u *upstream, method, why string) error {
	n := g.relay.pass.dropped.Add(1)
	u.log.Debug("upstream request passed on to no client", "method", method, "why", why, "dropped", n)
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("countersign does not pass %s of the MCP server %q on: %s", method, u.cfg.Name, why)}
}

// attribute returns the running operation whose client is to answer
// method, a request of u stamped with meta (the stamp is taken off), or
// the error to answer the upstream with; a request not passed on is
// counted. declared reports whether the client declared the capability.
func (g *Gateway) attribute(u *upstream, method string, meta mcp.Meta, declared func(*mcp.ClientCapabilities) bool, outsideCalls bool) (*runningCall, error) {
	a := g.relay.pass.claim(meta)
	c := a.call
	if outsideCalls && g.fixed != nil {
		// Roots are the client's, not a call's: not bound to a call that
		// happens to run, which may end before the client answers.
		c = nil
		for ss := range g.server.Sessions() {
			if c != nil {
				return nil, g.notPassed(u, method, "it has several clients")
			}
			c = &runningCall{ctx: context.Background(), ss: ss}
		}
		if c == nil {
			return nil, g.notPassed(u, method, "no client is connected")
		}
	} else if c == nil {
		return nil, g.notPassed(u, method, a.why)
	}
	ip := c.ss.InitializeParams()
	if ip == nil || ip.ProtocolVersion >= newProtocolVersion {
		return nil, g.notPassed(u, method, "the client's protocol has no requests from the server")
	}
	if ip.Capabilities == nil || !declared(ip.Capabilities) {
		return nil, g.notPassed(u, method, "the client did not declare the capability")
	}
	return c, nil
}

// within returns the context to send a request of an upstream on: the
// call's (so that it goes on the call's stream, and ends with the call),
// ended also when the upstream withdraws its request.
func (c *runningCall) within(upstreamCtx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(c.ctx)
	stop := context.AfterFunc(upstreamCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

// addPassthrough returns the middleware of an upstream's client that
// passes the requests of its server on to the gateway's clients. It takes
// them in place of the SDK's client handlers, which, once set, would make
// the client declare sampling and elicitation whatever the gateway's
// client declared.
func (g *Gateway) addPassthrough(u *upstream, _ *mcp.ClientOptions) mcp.Middleware {
	return g.requestsMiddleware(u)
}

// sampleFor passes an upstream's sampling/createMessage on to the client
// of the operation it belongs to.
func (g *Gateway) sampleFor(ctx context.Context, u *upstream, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
	if req == nil || req.Params == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "sampling/createMessage needs params"}
	}
	c, err := g.attribute(u, "sampling/createMessage", req.Params.Meta, func(k *mcp.ClientCapabilities) bool { return k.Sampling != nil }, false)
	if err != nil {
		return nil, err
	}
	ctx, done := c.within(ctx)
	defer done()
	return c.ss.CreateMessageWithTools(ctx, req.Params)
}

// elicitFor passes an upstream's form elicitation on to the client of the
// operation it belongs to, marked as the upstream's. It runs in place of the SDK's
// client handler, whose check of the schema refuses titled multi-select
// enums with "type": "string" on their items, which the specification
// allows; the client's session checks the answer against the schema.
func (g *Gateway) elicitFor(ctx context.Context, u *upstream, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	if req == nil || req.Params == nil || (req.Params.Mode != "" && req.Params.Mode != "form") || req.Params.URL != "" {
		return nil, g.notPassed(u, "elicitation/create", "only form elicitation is passed on")
	}
	c, err := g.attribute(u, "elicitation/create", req.Params.Meta, formElicitation, false)
	if err != nil {
		return nil, err
	}
	ctx, done := c.within(ctx)
	defer done()
	params := *req.Params
	params.Message = upstreamQuestion(u, params.Message)
	if params.RequestedSchema, err = titledItems(params.RequestedSchema); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestedSchema: " + err.Error()}
	}
	// The answer goes back to the upstream only: countersign's own
	// approvals are asked by elicitations of their own, and nothing of
	// this one's answer decides them.
	return c.ss.Elicit(ctx, &params)
}

// titledItems returns a copy of an elicitation schema in which the items
// of a titled multi-select enum (anyOf) carry no "type", which says
// nothing more there (every choice is a string const), so that the SDK's
// check of the schema takes it.
func titledItems(schema any) (any, error) {
	if schema == nil {
		return nil, nil
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	props, _ := s["properties"].(map[string]any)
	for _, p := range props {
		prop, _ := p.(map[string]any)
		items, _ := prop["items"].(map[string]any)
		if _, titled := items["anyOf"]; titled && prop["type"] == "array" && items["type"] == "string" {
			delete(items, "type")
		}
	}
	return s, nil
}

// formElicitation reports whether a client declared form elicitation (an
// empty elicitation capability means form, as the specification has it).
func formElicitation(k *mcp.ClientCapabilities) bool {
	e := k.Elicitation
	return e != nil && (e.Form != nil || e.URL == nil)
}

// upstreamQuestion marks an upstream's elicitation as the upstream's, so
// that the human never takes it for a countersign approval.
func upstreamQuestion(u *upstream, msg string) string {
	return fmt.Sprintf("Question from the MCP server %q (not a countersign approval; your answer goes to that server and approves nothing): %s",
		u.cfg.Name, msg)
}

// requestsMiddleware answers an upstream's roots/list with the client's
// (the SDK's client would answer with a list of its own), and its
// elicitation/create with the client's answer (see elicitFor).
func (g *Gateway) requestsMiddleware(u *upstream) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "sampling/createMessage":
				r, _ := req.(*mcp.CreateMessageWithToolsRequest)
				return g.sampleFor(ctx, u, r)
			case "elicitation/create":
				r, _ := req.(*mcp.ElicitRequest)
				return g.elicitFor(ctx, u, r)
			case "roots/list":
			default:
				return next(ctx, method, req)
			}
			var params *mcp.ListRootsParams
			var meta mcp.Meta
			if r, ok := req.(*mcp.ListRootsRequest); ok && r.Params != nil {
				params, meta = r.Params, r.Params.Meta
			}
			c, err := g.attribute(u, method, meta, func(k *mcp.ClientCapabilities) bool { return k.RootsV2 != nil }, true)
			if err != nil {
				return nil, err
			}
			ctx, done := c.within(ctx)
			defer done()
			return c.ss.ListRoots(ctx, params)
		}
	}
}

// rootsChanged passes a client's notifications/roots/list_changed on to
// the upstreams; an upstream that wants the new roots asks roots/list.
func (g *Gateway) rootsChanged(context.Context, *mcp.RootsListChangedRequest) {
	for _, u := range g.upstreams {
		// The client's own roots are never read (requestsMiddleware answers
		// roots/list): adding one only notifies the upstream's session.
		u.client.AddRoots(&mcp.Root{URI: "countersign:roots-changed"})
	}
}
