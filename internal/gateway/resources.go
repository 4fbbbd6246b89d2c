package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/yosida95/uritemplate/v3"
)

// resourceEntry is one resource or resource template the gateway exposes:
// an upstream's, under its own URI, or, when another upstream has the same
// one, under "countersign:<upstream>/<URI>" (prefix), which is taken off
// again on the way up.
type resourceEntry struct {
	exposed string // the URI, or the URI template, as the gateway lists it
	prefix  string // "" or "countersign:<upstream>/"
	up      *upstream
	res     *mcp.Resource         // a resource, or
	tmpl    *mcp.ResourceTemplate // a template
	match   *uritemplate.Template // of the exposed template
	tier    Tier
}

// ResourceTierRule sets the tier of every resource (and template) whose
// URI matches: "upstream/URI" or the URI as exposed, with the wildcards of
// path.Match, or a prefix when the pattern ends in "**" ("…/**" covers the
// folder itself too). A URI read through a template is matched as itself.
// A resource no rule matches is of the read tier; of several, the highest
// tier wins.
type ResourceTierRule struct {
	Match string `toml:"match"`
	Tier  Tier   `toml:"tier"`
}

func (r ResourceTierRule) matches(name string) bool {
	if p, ok := strings.CutSuffix(r.Match, "**"); ok {
		// Reading a folder lists what is under it.
		folder, ok := strings.CutSuffix(p, "/")
		return strings.HasPrefix(name, p) || ok && name == folder
	}
	ok, _ := path.Match(r.Match, name)
	return ok
}

// resourceTier is the tier the rules give a resource or template: the
// highest of those that match, else read. Highest, not first: a broad
// rule listed before a narrow one must not lower what the narrow one
// protects.
func (g *Gateway) resourceTier(u *upstream, uri, exposed string) Tier {
	t := TierRead
	for _, r := range g.cfg.ResourceRules {
		if r.Tier <= t {
			continue
		}
		// A rule also covers its spellings in other case: an upstream on
		// a file system that ignores case reads them as the same file.
		lower := ResourceTierRule{Match: strings.ToLower(r.Match)}
		for _, name := range []string{u.cfg.Name + "/" + uri, exposed} {
			if r.matches(name) || lower.matches(strings.ToLower(name)) {
				t = r.Tier
			}
		}
	}
	return t
}

// resourcePrefix is what a colliding URI of u is exposed under.
func resourcePrefix(u *upstream) string { return "countersign:" + u.cfg.Name + "/" }

// syncResources rebuilds the exposed resources and templates from every
// upstream's last lists, as resync does for tools. g.catalog.syncMu must be
// held.
func (g *Gateway) syncResources(lists []upstreamLists) {
	nextRes, nextTmpl := g.exposedResources(lists)
	g.catalog.mu.Lock()
	oldRes, oldTmpl := g.catalog.resources, g.catalog.templates
	g.catalog.resources, g.catalog.templates = nextRes, nextTmpl
	g.catalog.mu.Unlock()

	if gone := removed(oldRes, nextRes); len(gone) > 0 {
		g.server.RemoveResources(gone...)
	}
	if gone := removed(oldTmpl, nextTmpl); len(gone) > 0 {
		g.server.RemoveResourceTemplates(gone...)
	}
	for uri, e := range nextRes {
		if o, ok := oldRes[uri]; !ok || o.up != e.up || o.tier != e.tier || !reflect.DeepEqual(o.res, e.res) {
			g.server.AddResource(e.mirrorResource(), g.readResource(e))
		}
	}
	for t, e := range nextTmpl {
		if o, ok := oldTmpl[t]; !ok || o.up != e.up || o.tier != e.tier || !reflect.DeepEqual(o.tmpl, e.tmpl) {
			g.server.AddResourceTemplate(e.mirrorTemplate(), g.readResource(e))
		}
	}
}

// exposedResources are the resources and templates of every upstream's
// last lists under their exposed URIs, with their tiers: a URI that more
// than one upstream uses is prefixed with the upstream's name.
func (g *Gateway) exposedResources(lists []upstreamLists) (nextRes, nextTmpl map[string]*resourceEntry) {
	uris, templates := map[string]int{}, map[string]int{}
	for _, l := range lists {
		for _, r := range l.resources {
			uris[r.URI]++
		}
		for _, t := range l.templates {
			templates[t.URITemplate]++
		}
	}
	nextRes, nextTmpl = map[string]*resourceEntry{}, map[string]*resourceEntry{}
	for i, u := range g.upstreams {
		for _, r := range lists[i].resources {
			e := &resourceEntry{exposed: r.URI, up: u, res: r}
			if uris[r.URI] > 1 || u.cfg.Prefix {
				e.prefix = resourcePrefix(u)
				e.exposed = e.prefix + r.URI
			}
			if !g.addable(e, nextRes) {
				continue
			}
			nextRes[e.exposed] = e
		}
		for _, t := range lists[i].templates {
			e := &resourceEntry{exposed: t.URITemplate, up: u, tmpl: t}
			if templates[t.URITemplate] > 1 || u.cfg.Prefix {
				e.prefix = resourcePrefix(u)
				e.exposed = e.prefix + t.URITemplate
			}
			if !g.addable(e, nextTmpl) {
				continue
			}
			e.tier = g.resourceTier(u, t.URITemplate, e.exposed)
			nextTmpl[e.exposed] = e
		}
	}
	// A resource a template reaches too is of the higher tier of the two,
	// as a read of its URI through the template would be.
	for _, e := range nextRes {
		e.tier = g.uriTier(e.up, e.res.URI, e.exposed, nextTmpl)
	}
	return nextRes, nextTmpl
}

// addable checks what the SDK would panic on (a URI or template it cannot
// parse) and a name taken twice; it leaves such a resource out.
func (g *Gateway) addable(e *resourceEntry, taken map[string]*resourceEntry) bool {
	if _, dup := taken[e.exposed]; dup {
		g.log.Warn("two resources would have the same URI; the later one is left out", "upstream", e.up.cfg.Name)
		return false
	}
	if e.tmpl != nil {
		t, err := uritemplate.New(e.exposed)
		if err != nil || !strings.Contains(e.exposed, ":") {
			g.log.Warn("resource template left out: not a valid absolute URI template", "upstream", e.up.cfg.Name)
			return false
		}
		e.match = t
		return true
	}
	// AddResource panics on a URI url.Parse refuses (such as one with a
	// bad escape): an upstream must not be able to end the gateway.
	if u, err := url.Parse(e.exposed); err != nil || u.Scheme == "" || strings.ContainsAny(e.exposed, " \n\r\t") {
		g.log.Warn("resource left out: not an absolute URI", "upstream", e.up.cfg.Name)
		return false
	}
	return true
}

func removed(old, next map[string]*resourceEntry) []string {
	var out []string
	for k, e := range old {
		if n, ok := next[k]; !ok || n.up != e.up {
			out = append(out, k)
		}
	}
	return out
}

// mirrorResource is the resource as the gateway lists it: the upstream's,
// under the exposed URI (and the name prefixed when the URI is), without
// its _meta.
func (e *resourceEntry) mirrorResource() *mcp.Resource {
	r := *e.res
	r.URI, r.Meta = e.exposed, nil
	if e.prefix != "" {
		r.Name = e.up.cfg.Name + "_" + r.Name
	}
	return &r
}

func (e *resourceEntry) mirrorTemplate() *mcp.ResourceTemplate {
	t := *e.tmpl
	t.URITemplate, t.Meta = e.exposed, nil
	if e.prefix != "" {
		t.Name = e.up.cfg.Name + "_" + t.Name
	}
	return &t
}

// upstreamURI is the URI the upstream knows for an exposed one.
func (e *resourceEntry) upstreamURI(exposed string) (string, bool) {
	if e.prefix == "" {
		return exposed, true
	}
	return strings.CutPrefix(exposed, e.prefix)
}

// readResource reads a resource of the entry from its upstream, if the
// key may (readable): reading a resource of a tier it confirms would hand
// its contents over before a human said yes.
func (g *Gateway) readResource(e *resourceEntry) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		uri, err := g.readable(req, e, req.Params.URI, "read")
		if err != nil {
			return nil, err
		}
		cs, err := e.up.current()
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error() + "; it is being restarted, try again in a few seconds"}
		}
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if err != nil {
			return nil, upstreamError(e.up, err)
		}
		out := *res
		out.Meta = withoutServerInfo(res.Meta)
		out.Contents = make([]*mcp.ResourceContents, len(res.Contents))
		for i, c := range res.Contents {
			cc := *c
			if cc.URI != "" {
				cc.URI = e.prefix + cc.URI
			}
			out.Contents[i] = &cc
		}
		return &out, nil
	}
}

// upstreamError passes an upstream's JSON-RPC error on and turns a broken
// connection into one that says so.
func upstreamError(u *upstream, err error) error {
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return rpcErr
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the MCP server %q failed: %v", u.cfg.Name, err)}
}

func withoutServerInfo(m mcp.Meta) mcp.Meta {
	if m == nil {
		return nil
	}
	out := maps.Clone(m)
	delete(out, mcp.MetaKeyServerInfo)
	return out
}

// resourceFor finds the entry of an exposed URI: a resource, or the
// template it matches.
func (g *Gateway) resourceFor(uri string) (*resourceEntry, bool) {
	g.catalog.mu.Lock()
	defer g.catalog.mu.Unlock()
	if e, ok := g.catalog.resources[uri]; ok {
		return e, true
	}
	for _, e := range g.catalog.templates {
		if e.match.Match(uri) != nil {
			if _, ok := e.upstreamURI(uri); ok {
				return e, true
			}
		}
	}
	return nil, false
}

// subscribe passes a client's subscription on to the upstream of the
// resource, once per exposed URI however many clients subscribe.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	e, uri, err := g.subscribable(req, req.Params.URI)
	if err != nil {
		return err
	}
	g.subs.mu.Lock()
	defer g.subs.mu.Unlock()
	if g.subs.m == nil {
		g.subs.m = map[string]map[*mcp.ServerSession]bool{}
	}
	g.pruneSubs(ctx)
	if len(g.subs.m[req.Params.URI]) == 0 {
		cs, err := e.up.current()
		if err != nil {
			return err
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			return upstreamError(e.up, err)
		}
		g.subs.m[req.Params.URI] = map[*mcp.ServerSession]bool{}
	}
	g.subs.m[req.Params.URI][req.Session] = true
	return nil
}

// pruneSubs forgets the subscriptions of sessions that ended without
// unsubscribing, and ends the upstream's where none is left, so that
// neither the sessions nor the upstreams' subscriptions pile up.
// g.subs.mu must be held.
func (g *Gateway) pruneSubs(ctx context.Context) {
	live := map[*mcp.ServerSession]bool{}
	for ss := range g.server.Sessions() {
		live[ss] = true
	}
	for uri, sessions := range g.subs.m {
		for ss := range sessions {
			if !live[ss] {
				delete(sessions, ss)
			}
		}
		if len(sessions) > 0 {
			continue
		}
		delete(g.subs.m, uri)
		if e, ok := g.resourceFor(uri); ok {
			if up, ok := e.upstreamURI(uri); ok {
				if cs, err := e.up.current(); err == nil {
					_ = cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: up})
				}
			}
		}
	}
}

// unsubscribe ends a client's subscription, and the upstream's once no
// client is subscribed.
func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	e, uri, err := g.subscribable(req, req.Params.URI)
	if err != nil {
		return err
	}
	g.subs.mu.Lock()
	defer g.subs.mu.Unlock()
	sessions := g.subs.m[req.Params.URI]
	if !sessions[req.Session] {
		return nil
	}
	delete(sessions, req.Session)
	if len(sessions) > 0 {
		return nil
	}
	delete(g.subs.m, req.Params.URI)
	if cs, err := e.up.current(); err == nil {
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			return upstreamError(e.up, err)
		}
	}
	return nil
}

// subscribable finds the resource of a subscription that the caller may
// read (readable), and its upstream's URI.
func (g *Gateway) subscribable(req mcp.Request, exposed string) (*resourceEntry, string, error) {
	e, ok := g.resourceFor(exposed)
	if !ok {
		if _, err := g.principal(req); err != nil {
			return nil, "", err
		}
		return nil, "", mcp.ResourceNotFoundError(exposed)
	}
	uri, err := g.readable(req, e, exposed, "subscribed to")
	if err != nil {
		return nil, "", err
	}
	if e.up.snapshot().caps.Resources == nil || !e.up.snapshot().caps.Resources.Subscribe {
		return nil, "", &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("the MCP server %q offers no subscriptions", e.up.cfg.Name)}
	}
	return e, uri, nil
}

// resourceUpdated passes an upstream's resources/updated on to the clients
// subscribed to it, under the URI they know.
func (g *Gateway) resourceUpdated(u *upstream, uri string) {
	exposed := uri
	g.catalog.mu.Lock()
	for _, e := range g.catalog.resources {
		if e.up == u && e.res.URI == uri {
			exposed = e.exposed
		}
	}
	if exposed == uri {
		for _, e := range g.catalog.templates {
			if e.up == u && e.prefix != "" && e.match.Match(e.prefix+uri) != nil {
				exposed = e.prefix + uri
			}
		}
	}
	g.catalog.mu.Unlock()
	// Not on the upstream's read loop: sending may wait for a client.
	go g.server.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: exposed})
}
