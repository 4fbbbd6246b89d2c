// Package gateway is countersign's MCP gateway: an MCP server in front of
// other MCP servers (stdio commands and streamable HTTP URLs). It mirrors
// their tools, sorts each into a tier (read, write, commit, external) and
// lets a call through at once, or only once a human approved exactly that
// call: the same principal, tool, arguments and preview, once, within ten
// minutes.
//
// How the human is asked depends on what the client declared, per call:
//
//   - a 2026-07-28 client that can elicit gets an input_required result
//     with an elicitation and a sealed requestState;
//   - a client of 2025-11-25 or older that can elicit gets the same through
//     the SDK's legacy middleware, which sends elicitation/create;
//   - with URL elicitation, the elicitation is the inbox page of the
//     request (the browser proves the account; the URL is no capability);
//   - every other client gets a tool result "approval_pending" naming the
//     inbox URL, the reference and the expiry, and the model's retry of the
//     same call takes the approval.
//
// Where a countersign server is involved (the /mcp endpoint of countersign
// serve, or `countersign mcp` with COUNTERSIGN_URL), the decision is an
// approver's, in the inbox or any channel of the server; an elicitation
// shows the trusted preview and the way to the inbox, and holds the call
// while the human decides. By default an agent key never decides, so no
// MCP client answer approves anything there; countersign serve lets the
// operator mark keys whose client a person answers (elicitation_decides):
// their Accept approves the one call, unless it needs a passkey. Standalone (`countersign mcp` with no
// server) there is no approver: the user's answer to the elicitation is the
// decision, or ADR 0003's local page on 127.0.0.1 for clients without it.
package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/ratelimit"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Gateway is one MCP server in front of the configured upstreams.
type Gateway struct {
	cfg       *Config
	server    *mcp.Server
	approvals approvals
	states    *stateCodec
	log       *slog.Logger
	// fixed is the one principal of a stdio gateway; nil: each request's
	// bearer key (the /mcp endpoint).
	fixed     *Principal
	upstreams []*upstream
	progress  progressRoutes
	pass      passthrough
	levels    logLevels
	// initialized are the sessions whose client sent
	// notifications/initialized (quietUntilInitialized).
	initialized sessionSet
	// startOnce starts the upstreams of a stdio gateway (see Start); the
	// first request takes it, under startMu.
	startMu   sync.Mutex
	startOnce func(*mcp.ClientCapabilities)
	recent    recentAsks
	holding   holds
	limiter   *ratelimit.Keyed
	sessions  *sessionRegistry // of /mcp (sessions.go)
	now       func() time.Time
	// xfer is file transfer (upload.go); nil: off.
	xfer *transfer

	syncMu sync.Mutex // one resync at a time
	// annotated is the highest tier each tool's annotations have given it
	// ("upstream/tool"), under syncMu: an upstream that lowers a tool's
	// annotations later does not lower its tier while the gateway runs.
	annotated map[string]Tier
	mu        sync.Mutex
	tools     map[string]*toolEntry
	resources map[string]*resourceEntry // by exposed URI
	templates map[string]*resourceEntry // by exposed URI template
	prompts   map[string]*promptEntry   // by exposed name

	subMu sync.Mutex
	// subs are the sessions subscribed to each exposed URI: the upstream
	// is subscribed while there is one.
	subs map[string]map[*mcp.ServerSession]bool

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// maxQuietHold is the longest hold that still ends, with the round trips
// around it, before the 60 s request timeout of common MCP clients.
const maxQuietHold = 55 * time.Second

// options are what the constructors of each mode give the core.
type options struct {
	cfg       *Config
	approvals approvals
	stateKey  []byte
	fixed     *Principal
	log       *slog.Logger
	stderr    io.Writer // upstream commands' stderr; nil: the log
}

func newGateway(o options) (*Gateway, error) {
	if o.log == nil {
		o.log = slog.New(slog.DiscardHandler)
	}
	if err := o.cfg.Check(); err != nil {
		return nil, err
	}
	if len(o.cfg.Keys) > 0 && o.cfg.byKey == nil {
		// Fail closed: an unchecked entry could fall on a key of another
		// account, or on none.
		return nil, fmt.Errorf("the [keys] of the MCP gateway configuration were not checked against the store")
	}
	if o.cfg.Hold > maxQuietHold {
		o.log.Warn("the MCP hold is longer than the 60 s request timeout of common MCP clients (the TypeScript SDK's, Claude Code's): "+
			"their calls may time out while a human decides, unless they reset the timeout on progress; a hold of 45 s is safe",
			"hold", o.cfg.Hold.String())
	}
	states, err := newStateCodec(o.stateKey)
	if err != nil {
		return nil, err
	}
	clock := o.cfg.Clock
	if clock == nil {
		clock = countersign.SystemClock{}
	}
	g := &Gateway{cfg: o.cfg, approvals: o.approvals, states: states, log: o.log, fixed: o.fixed,
		now: clock.Now, tools: map[string]*toolEntry{}}
	g.limiter = ratelimit.New(o.cfg.Rate)
	g.sessions = newSessionRegistry(o.cfg.Sessions, g.now)
	g.recent.m = map[string]recentAsk{}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "countersign", Title: "countersign MCP gateway", Version: "1"},
		&mcp.ServerOptions{
			// Tools even before the first upstream is up: its tools follow
			// with list_changed. Logging, completions and subscriptions are
			// announced only where an upstream offers them (see advertise).
			Capabilities:       withLoggingCapability(&mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}),
			CompletionHandler:  g.complete,
			SubscribeHandler:   g.subscribe,
			UnsubscribeHandler: g.unsubscribe,
			// Passed on to the upstreams (passthrough.go). Roots are
			// deprecated from 2026-07-28 on, but clients and upstreams of
			// earlier revisions still use them.
			//lint:ignore SA1019 the gateway passes roots on for clients of earlier revisions
			RootsListChangedHandler: g.rootsChanged,
			Logger:                  quiet(o.log),
			// The tool list depends on the caller's key: no intermediary
			// may serve one key's list to another.
			SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" },
			Instructions: "Tools of commit or external tier run only after a human approves the exact call. " +
				"A result that starts with approval_pending has not run: pass its inbox link, reference and expiry on to the user, " +
				"and once they approved, call the same tool again with exactly the same arguments.",
		})
	g.server.AddSendingMiddleware(g.quietUntilInitialized)
	g.server.AddReceivingMiddleware(g.noteInitialized, g.startOnFirst, g.advertise, g.filterTools, g.limit, g.elicitFallback, g.operations)
	for _, uc := range o.cfg.Upstreams {
		g.upstreams = append(g.upstreams, newUpstream(uc, o.cfg.stopWait, o.log, o.stderr, upstreamHooks{
			progress: g.progress.deliver, changed: g.resync, updated: g.resourceUpdated, logged: g.upstreamLogged,
			stamp: g.pass.stamp, connected: g.upstreamConnected, requests: g.addPassthrough}))
	}
	return g, nil
}

// Server returns the MCP server, for a transport to run.
func (g *Gateway) Server() *mcp.Server { return g.server }

// Start connects the upstreams and keeps them connected until Close. It
// waits up to wait for each upstream's first attempt to connect, so that the
// first tools/list already holds their tools; one that is slower or broken
// joins later.
func (g *Gateway) Start(ctx context.Context, wait time.Duration) {
	ctx, g.stop = context.WithCancel(context.WithoutCancel(ctx))
	if g.fixed != nil {
		// The stdio gateway's one client says first what it can answer:
		// the upstreams start on its first request (passthrough.go).
		g.startOnce = func(caps *mcp.ClientCapabilities) { g.startUpstreams(ctx, wait, caps) }
		return
	}
	g.startUpstreams(ctx, wait, upstreamCapabilities())
}

// startUpstreams runs the upstreams, declaring caps to each, and waits as
// Start says.
func (g *Gateway) startUpstreams(ctx context.Context, wait time.Duration, caps *mcp.ClientCapabilities) {
	for _, u := range g.upstreams {
		u.declare(caps)
		g.wg.Go(func() { u.run(ctx) })
	}
	deadline := time.After(wait)
	for _, u := range g.upstreams {
		select {
		case <-u.settled:
		case <-deadline:
			return
		}
	}
}

// Close stops the upstreams: commands get their stdin closed, then a
// signal.
func (g *Gateway) Close() {
	if g.stop != nil {
		g.stop()
	}
	g.wg.Wait()
}

// ServeStdio serves one client over in and out until it hangs up or ctx is
// done.
func (g *Gateway) ServeStdio(ctx context.Context, in io.ReadCloser, out io.WriteCloser) error {
	err := g.server.Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// principal returns who makes a request: the stdio gateway's own, or the
// agent key the /mcp endpoint authenticated.
func (g *Gateway) principal(req mcp.Request) (Principal, error) {
	if g.fixed != nil {
		return *g.fixed, nil
	}
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		if p, ok := extra.TokenInfo.Extra[principalKey].(Principal); ok {
			return p, nil
		}
	}
	return Principal{}, fmt.Errorf("no agent key: send Authorization: Bearer <agent key>")
}

// policy returns what the principal may do.
func (g *Gateway) policy(p Principal) Policy {
	if p.agent.GrantID != "" {
		// A grant's key is named after what the client declared, so it
		// never takes the policy of a configured key of that name: the
		// general policy, narrowed to the grant's tiers.
		return grantPolicy(g.cfg.Policy, p.agent.GrantTiers)
	}
	return g.cfg.PolicyFor(p)
}

// grantPolicy narrows a policy to the tiers an approver allowed a grant on
// the consent page. Commit and external always still need a human per
// call, whatever the configuration says.
func grantPolicy(pol Policy, tiers []string) Policy {
	var allowed TierSet
	for _, name := range tiers {
		if t, err := ParseTier(name); err == nil {
			allowed |= Tiers(t)
		}
	}
	pol.Tiers &= allowed
	pol.Confirm |= Tiers(TierCommit, TierExternal)
	return pol
}

// filterTools hides from tools/list every tool, from the resource lists
// every resource and template, and from prompts/list every prompt, whose
// tier the caller's policy does not have; it passes logging/setLevel on to
// the upstreams.
func (g *Gateway) filterTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		if method == "logging/setLevel" {
			// After next: within the key's rate (limit), and a level the
			// SDK took.
			g.setLevel(ctx, req)
		}
		var pol Policy
		switch res.(type) {
		case *mcp.ListToolsResult, *mcp.ListResourcesResult, *mcp.ListResourceTemplatesResult, *mcp.ListPromptsResult:
			p, err := g.principal(req)
			if err != nil {
				return nil, err
			}
			pol = g.policy(p)
		default:
			return res, nil
		}
		switch list := res.(type) {
		case *mcp.ListToolsResult:
			out := *list
			out.Tools = make([]*mcp.Tool, 0, len(list.Tools))
			for _, t := range list.Tools {
				if e, ok := g.entry(t.Name); ok && pol.Sees(e.tier) {
					out.Tools = append(out.Tools, t)
				} else if tier, own := g.ownTool(t.Name); own && pol.Sees(tier) {
					out.Tools = append(out.Tools, t)
				}
			}
			return &out, nil
		case *mcp.ListResourcesResult:
			out := *list
			out.Resources = make([]*mcp.Resource, 0, len(list.Resources))
			for _, r := range list.Resources {
				g.mu.Lock()
				e, ok := g.resources[r.URI]
				g.mu.Unlock()
				if ok && pol.Sees(e.tier) {
					out.Resources = append(out.Resources, r)
				}
			}
			return &out, nil
		case *mcp.ListPromptsResult:
			if pol.Sees(TierRead) && !pol.Confirms(TierRead) { // prompts are read tier
				return res, nil
			}
			out := *list
			out.Prompts = []*mcp.Prompt{}
			return &out, nil
		case *mcp.ListResourceTemplatesResult:
			out := *list
			out.ResourceTemplates = make([]*mcp.ResourceTemplate, 0, len(list.ResourceTemplates))
			for _, t := range list.ResourceTemplates {
				g.mu.Lock()
				e, ok := g.templates[t.URITemplate]
				g.mu.Unlock()
				if ok && pol.Sees(e.tier) {
					out.ResourceTemplates = append(out.ResourceTemplates, t)
				}
			}
			return &out, nil
		}
		return res, nil
	}
}

// recentAsks remembers the request last asked for each principal and call,
// so that a retry learns of a denial once, and the API backend finds the
// approval to take. It is a hint: losing it (a restart) only means asking
// again.
type recentAsks struct {
	mu sync.Mutex
	m  map[string]recentAsk
}

type recentAsk struct {
	id      string
	expires time.Time
}

func recentKey(p Principal, c *pendingCall) string {
	return p.ID + "\x00" + c.Tool + "\x00" + c.ArgsHash + "\x00" + c.PreviewHash
}

func (r *recentAsks) get(p Principal, c *pendingCall, now time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.m[recentKey(p, c)]
	if !ok || now.After(a.expires) {
		return ""
	}
	return a.id
}

func (r *recentAsks) put(p Principal, c *pendingCall, id string, expires time.Time, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.m) > 10000 { // bounded: drop what has expired
		for k, a := range r.m {
			if now.After(a.expires) {
				delete(r.m, k)
			}
		}
	}
	// Kept a while past the expiry, to tell a late retry what happened.
	r.m[recentKey(p, c)] = recentAsk{id: id, expires: expires.Add(approvalTTL)}
}

func (r *recentAsks) forget(p Principal, c *pendingCall) {
	r.mu.Lock()
	delete(r.m, recentKey(p, c))
	r.mu.Unlock()
}

// quiet passes on the SDK's warnings and errors, but not its chatter about
// every session, unless debugging.
func quiet(log *slog.Logger) *slog.Logger {
	if log.Enabled(context.Background(), slog.LevelDebug) {
		return log
	}
	return slog.New(minLevel{log.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(a), h.min}
}

func (h minLevel) WithGroup(n string) slog.Handler { return minLevel{h.Handler.WithGroup(n), h.min} }
