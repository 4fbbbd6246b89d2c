// Package gateway is countersign's MCP gateway, its mirror: an MCP server
// in front of other MCP servers (stdio commands and streamable HTTP URLs).
// It mirrors their tools, resources, prompts and completions, passes on
// their log messages, progress and requests to the one client they belong
// to, keeps /mcp sessions and resumable streams, and sorts each tool into a
// tier (read, write, commit, external) that the caller's policy sees, or
// not.
//
// It knows nothing of approvals: a call of a tier the caller's policy
// confirms goes to its Confirmer (package confirm, on top of this one),
// which lets it go on only once a human approved exactly that call.
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
	cfg    *Config
	server *mcp.Server
	// confirm decides the calls that need a human; nil: none goes on.
	confirm Confirmer
	log     *slog.Logger
	// fixed is the one principal of a stdio gateway; nil: each request's
	// bearer key (the /mcp endpoint).
	fixed     *Principal
	upstreams []*upstream
	relay     relay
	// initialized are the sessions whose client sent
	// notifications/initialized (quietUntilInitialized).
	initialized sessionSet
	life        lifecycle
	limiter     *ratelimit.Keyed
	sessions    *sessionRegistry // of /mcp (sessions.go)
	now         func() time.Time
	// xfer is file transfer (upload.go); nil: off.
	xfer    *transfer
	catalog catalog
	subs    subscriptions
}

// relay is what passes between a client and the upstreams outside of the
// calls' results: progress, upstreams' requests and log messages.
type relay struct {
	progress progressRoutes
	pass     passthrough
	levels   logLevels
}

// lifecycle starts and stops the upstreams.
type lifecycle struct {
	// startOnce starts the upstreams of a stdio gateway (see Start); the
	// first request takes it, under startMu.
	startMu   sync.Mutex
	startOnce func(*mcp.ClientCapabilities)
	stop      context.CancelFunc
	wg        sync.WaitGroup
}

// catalog is what the gateway exposes of the upstreams: tools, resources,
// resource templates and prompts, each with its tier.
type catalog struct {
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
}

// entry returns the exposed tool of that name.
func (c *catalog) entry(name string) (*toolEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.tools[name]
	return e, ok
}

// resource returns the exposed resource of that URI.
func (c *catalog) resource(uri string) (*resourceEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.resources[uri]
	return e, ok
}

// template returns the exposed resource template of that URI template.
func (c *catalog) template(uri string) (*resourceEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.templates[uri]
	return e, ok
}

// subscriptions are the sessions subscribed to each exposed URI: the
// upstream is subscribed while there is one.
type subscriptions struct {
	mu sync.Mutex
	m  map[string]map[*mcp.ServerSession]bool
}

// Options are the surroundings of a gateway.
type Options struct {
	// Fixed is the one principal of a stdio gateway; nil: each request's
	// bearer key (the /mcp endpoint).
	Fixed  *Principal
	Log    *slog.Logger
	Stderr io.Writer // upstream commands' stderr; nil: the log
}

// New returns the gateway of cfg's upstreams. Calls that need a human go
// to confirm.
func New(cfg *Config, confirm Confirmer, o Options) (*Gateway, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if len(cfg.Keys) > 0 && cfg.byKey == nil {
		// Fail closed: an unchecked entry could fall on a key of another
		// account, or on none.
		return nil, fmt.Errorf("the [keys] of the MCP gateway configuration were not checked against the store")
	}
	clock := cfg.Clock
	if clock == nil {
		clock = countersign.SystemClock{}
	}
	g := &Gateway{cfg: cfg, confirm: confirm, log: o.Log, fixed: o.Fixed, now: clock.Now}
	g.catalog.tools = map[string]*toolEntry{}
	g.limiter = ratelimit.New(cfg.Rate)
	g.sessions = newSessionRegistry(cfg.Sessions, g.now)
	g.server = mcp.NewServer(&mcp.Implementation{Name: "countersign", Title: "countersign MCP gateway", Version: "1"}, g.serverOptions())
	g.server.AddSendingMiddleware(g.quietUntilInitialized)
	confirmed := func(next mcp.MethodHandler) mcp.MethodHandler { return next }
	if confirm != nil {
		confirmed = confirm.Middleware
	}
	g.server.AddReceivingMiddleware(g.noteInitialized, g.startOnFirst, g.advertise, g.filterLists, g.limit, confirmed, g.operations)
	for _, uc := range cfg.Upstreams {
		g.upstreams = append(g.upstreams, newUpstream(uc, cfg.stopWait, o.Log, o.Stderr, upstreamHooks{
			progress: g.relay.progress.deliver, changed: g.resync, updated: g.resourceUpdated, logged: g.upstreamLogged,
			stamp: g.relay.pass.stamp, connected: g.upstreamConnected, requests: g.addPassthrough}))
	}
	return g, nil
}

// serverOptions are the options of the gateway's MCP server.
func (g *Gateway) serverOptions() *mcp.ServerOptions {
	return &mcp.ServerOptions{
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
		Logger:                  quiet(g.log),
		// The tool list depends on the caller's key: no intermediary
		// may serve one key's list to another.
		SetCacheable: func(_ context.Context, _ mcp.Request, c *mcp.Cacheable) { c.CacheScope = "private" },
		Instructions: "Tools of commit or external tier run only after a human approves the exact call. " +
			"A result that starts with approval_pending has not run: pass its inbox link, reference and expiry on to the user, " +
			"and once they approved, call the same tool again with exactly the same arguments.",
	}
}

// Server returns the MCP server, for a transport to run.
func (g *Gateway) Server() *mcp.Server { return g.server }

// Start connects the upstreams and keeps them connected until Close. It
// waits up to wait for each upstream's first attempt to connect, so that the
// first tools/list already holds their tools; one that is slower or broken
// joins later.
func (g *Gateway) Start(ctx context.Context, wait time.Duration) {
	ctx, g.life.stop = context.WithCancel(context.WithoutCancel(ctx))
	if g.fixed != nil {
		// The stdio gateway's one client says first what it can answer:
		// the upstreams start on its first request (passthrough.go).
		g.life.startOnce = func(caps *mcp.ClientCapabilities) { g.startUpstreams(ctx, wait, caps) }
		return
	}
	g.startUpstreams(ctx, wait, upstreamCapabilities())
}

// startUpstreams runs the upstreams, declaring caps to each, and waits as
// Start says.
func (g *Gateway) startUpstreams(ctx context.Context, wait time.Duration, caps *mcp.ClientCapabilities) {
	for _, u := range g.upstreams {
		u.declare(caps)
		g.life.wg.Go(func() { u.run(ctx) })
	}
	deadline := time.After(wait)
	for _, u := range g.upstreams {
		select {
		case <-u.settled.wait():
		case <-deadline:
			return
		}
	}
}

// Close stops the upstreams: commands get their stdin closed, then a
// signal.
func (g *Gateway) Close() {
	if g.life.stop != nil {
		g.life.stop()
	}
	g.life.wg.Wait()
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

// filterLists hides from tools/list every tool, from the resource lists
// every resource and template, and from prompts/list every prompt, whose
// tier the caller's policy does not have; it passes logging/setLevel on to
// the upstreams.
func (g *Gateway) filterLists(next mcp.MethodHandler) mcp.MethodHandler {
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
		switch res.(type) {
		case *mcp.ListToolsResult, *mcp.ListResourcesResult, *mcp.ListResourceTemplatesResult, *mcp.ListPromptsResult:
		default:
			return res, nil
		}
		p, err := g.principal(req)
		if err != nil {
			return nil, err
		}
		return g.filtered(res, g.policy(p)), nil
	}
}

// filtered is a list result without what pol does not see.
func (g *Gateway) filtered(res mcp.Result, pol Policy) mcp.Result {
	switch list := res.(type) {
	case *mcp.ListToolsResult:
		out := *list
		out.Tools = seen(list.Tools, pol, func(t *mcp.Tool) (Tier, bool) {
			if e, ok := g.catalog.entry(t.Name); ok {
				return e.tier, true
			}
			return g.ownTool(t.Name)
		})
		return &out
	case *mcp.ListResourcesResult:
		out := *list
		out.Resources = seen(list.Resources, pol, func(r *mcp.Resource) (Tier, bool) {
			if e, ok := g.catalog.resource(r.URI); ok {
				return e.tier, true
			}
			return 0, false
		})
		return &out
	case *mcp.ListPromptsResult:
		if pol.Sees(TierRead) && !pol.Confirms(TierRead) { // prompts are read tier
			return res
		}
		out := *list
		out.Prompts = []*mcp.Prompt{}
		return &out
	case *mcp.ListResourceTemplatesResult:
		out := *list
		out.ResourceTemplates = seen(list.ResourceTemplates, pol, func(t *mcp.ResourceTemplate) (Tier, bool) {
			if e, ok := g.catalog.template(t.URITemplate); ok {
				return e.tier, true
			}
			return 0, false
		})
		return &out
	}
	return res
}

// seen keeps the items of a list whose tier pol sees; an item without a
// tier (not exposed) is dropped.
func seen[T any](items []T, pol Policy, tier func(T) (Tier, bool)) []T {
	out := make([]T, 0, len(items))
	for _, it := range items {
		if t, ok := tier(it); ok && pol.Sees(t) {
			out = append(out, it)
		}
	}
	return out
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
