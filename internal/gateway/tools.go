package gateway

import (
	"encoding/json"
	"reflect"

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

// info is what the preview shows of the tool's definition.
func (e *toolEntry) info() *ToolInfo {
	title := e.tool.Title
	if title == "" && e.tool.Annotations != nil {
		title = e.tool.Annotations.Title
	}
	return &ToolInfo{Title: title, Description: e.tool.Description}
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
	g.syncMu.Lock()
	defer g.syncMu.Unlock()

	counts := map[string]int{}
	lists := make([][]*mcp.Tool, len(g.upstreams))
	for i, u := range g.upstreams {
		lists[i] = u.snapshot()
		for _, t := range lists[i] {
			counts[t.Name]++
		}
	}
	next := map[string]*toolEntry{}
	for i, u := range g.upstreams {
		for _, t := range lists[i] {
			name := t.Name
			if counts[name] > 1 || u.cfg.Prefix {
				name = u.cfg.Name + "_" + t.Name
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

	g.mu.Lock()
	old := g.tools
	g.tools = next
	g.mu.Unlock()
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

// tierOf is a tool's tier: the first matching rule of the configuration,
// else what its annotations say (unless the upstream's are ignored).
func (g *Gateway) tierOf(u *upstream, t *mcp.Tool, exposed string) Tier {
	for _, r := range g.cfg.Rules {
		if r.matches(exposed, u.cfg.Name, t.Name) {
			return r.Tier
		}
	}
	if u.cfg.IgnoreAnnotations {
		return AnnotationTier(nil)
	}
	return AnnotationTier(t.Annotations)
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

// entry returns the exposed tool of that name.
func (g *Gateway) entry(name string) (*toolEntry, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.tools[name]
	return e, ok
}
