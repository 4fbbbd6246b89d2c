package gateway

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolEntry is one tool the gateway exposes: an upstream's tool under its
// exposed name, with its tier.
type toolEntry struct {
	name string // exposed
	up   *upstream
	tool *mcp.Tool // as the upstream defines it
	tier Tier
}

// called is what the confirmation shows and binds of the tool.
func (e *toolEntry) called() CalledTool {
	title := e.tool.Title
	if title == "" && e.tool.Annotations != nil {
		title = e.tool.Annotations.Title
	}
	return CalledTool{Name: e.name, Upstream: e.up.cfg.Name, Tool: e.tool.Name, Title: title, Description: e.tool.Description, Tier: e.tier}
}

// mirror is the tool as the gateway lists it: the upstream's definition
// (schemas, annotations, title, description, icons) under the exposed name,
// without the upstream's _meta.
func (e *toolEntry) mirror() *mcp.Tool {
	t := *e.tool
	t.Name = e.name
	t.Meta = nil
	return &t
}

// resync rebuilds the exposed tools from every upstream's last list and
// changes the server's tools where they differ, so that clients get one
// list_changed per real change. A name that more than one upstream uses
// is prefixed with the upstream's name for all of them.
func (g *Gateway) resync() {
	g.catalog.syncMu.Lock()
	defer g.catalog.syncMu.Unlock()

	all := make([]upstreamLists, len(g.upstreams))
	for i, u := range g.upstreams {
		all[i] = u.snapshot()
	}
	g.syncTools(all)
	g.syncResources(all)
	g.syncPrompts(all)
}

// syncTools rebuilds the exposed tools and changes the server's where
// they differ. g.catalog.syncMu must be held.
func (g *Gateway) syncTools(all []upstreamLists) {
	next := g.exposedTools(all)
	g.catalog.mu.Lock()
	old := g.catalog.tools
	g.catalog.tools = next
	g.catalog.mu.Unlock()
	var removed []string
	for name, e := range old {
		if n, ok := next[name]; !ok || n.up != e.up {
			removed = append(removed, name)
		}
	}
	if len(removed) > 0 {
		g.server.RemoveTools(removed...)
	}
	for name, e := range next {
		if o, ok := old[name]; ok && o.up == e.up && o.tier == e.tier && reflect.DeepEqual(o.tool, e.tool) {
			continue
		}
		g.server.AddTool(e.mirror(), g.handler(e))
	}
}

// exposedTools are the tools of every upstream's last list under their
// exposed names, with their tiers; a tool whose name could pass for
// another's, or that the SDK could not serve, is left out.
func (g *Gateway) exposedTools(all []upstreamLists) map[string]*toolEntry {
	counts := map[string]int{}
	lists := make([][]*mcp.Tool, len(g.upstreams))
	for i := range g.upstreams {
		lists[i] = all[i].tools
		for _, t := range lists[i] {
			counts[t.Name]++
		}
	}
	next := map[string]*toolEntry{}
	for i, u := range g.upstreams {
		for _, t := range lists[i] {
			if !toolName.MatchString(t.Name) {
				// The name is shown to the human as the gateway's own
				// text: one with a line break could forge lines there.
				g.log.Warn("tool left out: its name is not 1 to 128 letters, digits, '_', '-' or '.'", "upstream", u.cfg.Name)
				continue
			}
			name := t.Name
			if counts[name] > 1 || u.cfg.Prefix {
				name = u.cfg.Name + "_" + t.Name
			} else if v := g.prefixOf(name, u); v != "" {
				// Unprefixed, it would pass for a tool of upstream v,
				// and take v's rules.
				g.log.Warn("tool left out: its name starts with another upstream's prefix", "tool", name, "upstream", u.cfg.Name, "other", v)
				continue
			}
			if _, own := g.ownTool(name); own {
				g.log.Warn("tool left out: its name is the gateway's own", "tool", name, "upstream", u.cfg.Name)
				continue
			}
			if _, taken := next[name]; taken {
				g.log.Warn("two tools would have the same name; the later one is left out", "tool", name, "upstream", u.cfg.Name)
				continue
			}
			if !objectSchema(t.InputSchema) {
				g.log.Warn("tool left out: its input schema is not an object", "tool", t.Name, "upstream", u.cfg.Name)
				continue
			}
			next[name] = &toolEntry{name: name, up: u, tool: t, tier: g.tierOf(u, t, name)}
		}
	}
	return next
}

// tierOf is a tool's tier: the first matching rule of the configuration,
// else what its annotations say (unless the upstream's are ignored).
//
// A rule matches the tool's names that no other upstream can change: its
// qualified name, its prefixed name, and its own name when it is exposed
// as it is. A rule on a bare name that another upstream's tool of the same
// name has since made ambiguous still applies, but can no longer lower the
// tier below the annotations' (another upstream, listing a tool of that
// name, must not take a tool's confirmation away).
//
// Annotations only ever raise a tool's tier while the gateway runs: an
// upstream that lists a tool as external, then, with list_changed, as
// read-only, keeps it external until a restart. g.catalog.syncMu must be held.
func (g *Gateway) tierOf(u *upstream, t *mcp.Tool, exposed string) Tier {
	annotated := AnnotationTier(t.Annotations)
	if u.cfg.IgnoreAnnotations {
		annotated = AnnotationTier(nil)
	}
	if g.catalog.annotated == nil {
		g.catalog.annotated = map[string]Tier{}
	}
	key := u.cfg.Name + "/" + t.Name
	if seen, ok := g.catalog.annotated[key]; ok && seen > annotated {
		g.log.Warn("an upstream lowered a tool's annotations; its tier stays until a restart", "upstream", u.cfg.Name, "tool", t.Name, "tier", seen)
		annotated = seen
	}
	g.catalog.annotated[key] = annotated
	floor, ambiguous := Tier(0), false
	for _, r := range g.cfg.Rules {
		switch {
		case r.matches(u.cfg.Name+"_"+t.Name, u.cfg.Name, t.Name), exposed == t.Name && r.matches(exposed, u.cfg.Name, t.Name):
			if ambiguous {
				return max(r.Tier, floor)
			}
			return r.Tier
		case !ambiguous && !u.cfg.Prefix && exposed != t.Name && r.matchesName(t.Name):
			floor, ambiguous = max(r.Tier, annotated), true
		}
	}
	if ambiguous {
		return floor
	}
	return annotated
}

// toolName is what a tool's name may be (the MCP specification's
// characters and length).
var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// prefixOf returns the name of an upstream other than u whose prefix
// ("name_") begins name, or "".
func (g *Gateway) prefixOf(name string, u *upstream) string {
	for _, v := range g.upstreams {
		if v != u && strings.HasPrefix(name, v.cfg.Name+"_") {
			return v.cfg.Name
		}
	}
	return ""
}

// objectSchema reports whether an input schema is a JSON object schema,
// which the SDK requires of every tool it serves (AddTool panics on any
// other).
func objectSchema(s any) bool {
	b, err := json.Marshal(s)
	if err != nil {
		return false
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return false
	}
	return m["type"] == "object"
}
