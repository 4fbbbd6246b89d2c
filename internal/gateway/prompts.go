package gateway

import (
	"context"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// promptEntry is one prompt the gateway exposes: an upstream's, under its
// own name or, when another upstream has one of that name, under
// "<upstream>_<name>". Prompts are of the read tier: getting one runs
// nothing but text.
type promptEntry struct {
	name   string // exposed
	up     *upstream
	prompt *mcp.Prompt
}

// syncPrompts rebuilds the exposed prompts from every upstream's last
// lists. g.catalog.syncMu must be held.
func (g *Gateway) syncPrompts(lists []upstreamLists) {
	counts := map[string]int{}
	for _, l := range lists {
		for _, p := range l.prompts {
			counts[p.Name]++
		}
	}
	next := map[string]*promptEntry{}
	for i, u := range g.upstreams {
		for _, p := range lists[i].prompts {
			name := p.Name
			if counts[name] > 1 || u.cfg.Prefix {
				name = u.cfg.Name + "_" + p.Name
			}
			if _, taken := next[name]; taken || name == "" {
				g.log.Warn("two prompts would have the same name; the later one is left out", "upstream", u.cfg.Name)
				continue
			}
			next[name] = &promptEntry{name: name, up: u, prompt: p}
		}
	}
	g.catalog.mu.Lock()
	old := g.catalog.prompts
	g.catalog.prompts = next
	g.catalog.mu.Unlock()
	var gone []string
	for name, e := range old {
		if n, ok := next[name]; !ok || n.up != e.up {
			gone = append(gone, name)
		}
	}
	if len(gone) > 0 {
		g.server.RemovePrompts(gone...)
	}
	for name, e := range next {
		if o, ok := old[name]; ok && o.up == e.up && reflect.DeepEqual(o.prompt, e.prompt) {
			continue
		}
		p := *e.prompt
		p.Name, p.Meta = name, nil
		g.server.AddPrompt(&p, g.getPrompt(e))
	}
}

// unknownPrompt is the answer for a prompt that does not exist for a key.
func unknownPrompt() error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "unknown prompt"}
}

// promptsFor reports whether a key with the policy gets prompts: they are
// of the read tier, and a prompt has no result that could wait for a
// human.
func promptsFor(pol Policy) bool { return pol.Sees(TierRead) && !pol.Confirms(TierRead) }

// getPrompt gets the prompt from its upstream, for a key that may read.
func (g *Gateway) getPrompt(e *promptEntry) mcp.PromptHandler {
	return func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		p, err := g.principal(req)
		if err != nil {
			return nil, err
		}
		if !promptsFor(g.policy(p)) {
			return nil, unknownPrompt()
		}
		cs, err := e.up.current()
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error() + "; it is being restarted, try again in a few seconds"}
		}
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: e.prompt.Name, Arguments: req.Params.Arguments})
		if err != nil {
			return nil, upstreamError(e.up, err)
		}
		out := *res
		out.Meta = withoutServerInfo(res.Meta)
		return &out, nil
	}
}

// complete routes completion/complete to the upstream that owns the prompt
// or the resource template; one that offers no completions completes
// nothing. A completion is refused where getting the prompt or reading
// through the template would be (completable): what it suggests is what
// exists there.
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	p, err := g.principal(req)
	if err != nil {
		return nil, err
	}
	ref := *req.Params.Ref
	var up *upstream
	switch ref.Type {
	case "ref/prompt":
		g.catalog.mu.Lock()
		e, ok := g.catalog.prompts[ref.Name]
		g.catalog.mu.Unlock()
		if !ok || !promptsFor(g.policy(p)) {
			return nil, unknownPrompt()
		}
		up, ref.Name = e.up, e.prompt.Name
	case "ref/resource":
		g.catalog.mu.Lock()
		e, ok := g.catalog.templates[ref.URI]
		g.catalog.mu.Unlock()
		if !ok {
			return nil, mcp.ResourceNotFoundError(ref.URI)
		}
		if err := g.completable(g.policy(p), e); err != nil {
			return nil, err
		}
		up, ref.URI = e.up, e.tmpl.URITemplate
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "ref.type must be ref/prompt or ref/resource"}
	}
	if up.snapshot().caps.Completions == nil {
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{}}}, nil
	}
	cs, err := up.current()
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &ref, Argument: req.Params.Argument, Context: req.Params.Context})
	if err != nil {
		return nil, upstreamError(up, err)
	}
	out := *res
	out.Meta = withoutServerInfo(res.Meta)
	return &out, nil
}

// advertise adjusts the capabilities the gateway announces (initialize,
// server/discover) to what it passes through: logging, completions and
// resource subscriptions only where an upstream offers them. Tools,
// resources and prompts the SDK announces by what is registered.
func (g *Gateway) advertise(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		switch r := res.(type) {
		case *mcp.InitializeResult:
			out := *r
			out.Capabilities = g.passedThrough(r.Capabilities)
			return &out, nil
		case *mcp.DiscoverResult:
			out := *r
			out.Capabilities = g.passedThrough(r.Capabilities)
			return &out, nil
		}
		return res, nil
	}
}

func (g *Gateway) passedThrough(in *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	if in == nil {
		return nil
	}
	var logging, completions, subscribe bool
	for _, u := range g.upstreams {
		c := u.snapshot().caps
		if c == nil {
			continue
		}
		logging = logging || logs(c)
		completions = completions || c.Completions != nil
		subscribe = subscribe || (c.Resources != nil && c.Resources.Subscribe)
	}
	caps := *in
	if !logging {
		withoutLogging(&caps)
	}
	if !completions {
		caps.Completions = nil
	}
	if caps.Resources != nil {
		r := *caps.Resources
		r.Subscribe = subscribe
		caps.Resources = &r
	}
	return &caps
}
