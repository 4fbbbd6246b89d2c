package gateway

import (
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A read's tier is decided from the concrete URI it reads, not only from
// the resource or template that took it: a template such as
// file:///{+path} reaches every file, protected ones included. Tier rules
// are matched against the URI's text, so a URI is read only in normal
// form; any other spelling of a protected URI (file:///srv//secret,
// file:///srv/./secret, file:///srv/%73ecret) is refused rather than
// normalised, since the gateway cannot know how an upstream resolves
// dot segments, doubled slashes or escapes, and a normal form it sent
// on would be a guess at what the upstream reads.

// uriTier is the tier of reading uri (as the upstream u knows it, exposed
// as exposed): the highest that any rule matching it, or any template
// matching it, gives.
//
// The tier is the highest of every spelling an upstream may read as the
// same thing (uriForms): a read of file:///srv/secret?x, …#x or …;x is a
// read of file:///srv/secret to a server that resolves only the path,
// and so is /srv/Secret to one on a file system that ignores case.
func (g *Gateway) uriTier(u *upstream, uri, exposed string, templates map[string]*resourceEntry) Tier {
	prefix := strings.TrimSuffix(exposed, uri)
	if prefix == exposed && uri != "" {
		prefix = ""
	}
	t := TierRead
	for _, form := range uriForms(uri) {
		t = max(t, g.resourceTier(u, form, prefix+form))
		for _, e := range templates {
			if e.tier > t && e.match.Match(prefix+form) != nil {
				t = e.tier
			}
		}
	}
	return t
}

// uriForms are the spellings of uri whose tiers a read of it takes: the
// URI itself; without its query and fragment; without the ;parameters of
// its path segments as well; and each of those in lower case.
func uriForms(uri string) []string {
	bare := uri
	if i := strings.IndexAny(bare, "?#"); i >= 0 {
		bare = bare[:i]
	}
	noParams := bare
	if strings.Contains(noParams, ";") {
		segs := strings.Split(noParams, "/")
		for i, seg := range segs {
			if j := strings.IndexByte(seg, ';'); j >= 0 && i > 0 {
				segs[i] = seg[:j]
			}
		}
		noParams = strings.Join(segs, "/")
	}
	var forms []string
	for _, f := range []string{uri, bare, noParams} {
		for _, v := range []string{f, strings.ToLower(f)} {
			if !slices.Contains(forms, v) {
				forms = append(forms, v)
			}
		}
	}
	return forms
}

// readable decides whether the principal of req may read (or subscribe
// to) the exposed URI through e, and returns the URI its upstream knows.
// A URI of a tier the key lacks gets the answer of an unknown resource;
// one of a tier the key's policy confirms is refused, since a read has no
// result that could wait for a human.
func (g *Gateway) readable(req mcp.Request, e *resourceEntry, exposed, verb string) (string, error) {
	p, err := g.principal(req)
	if err != nil {
		return "", err
	}
	pol := g.policy(p)
	uri, ok := e.upstreamURI(exposed)
	if !ok || !pol.Sees(e.tier) {
		return "", mcp.ResourceNotFoundError(exposed)
	}
	if exposed != e.exposed { // through a template: the client spelled it
		if why := notNormal(uri); why != "" {
			return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
				"the URI %s is not in normal form (it has %s); countersign decides a resource's tier by its URI, so it takes URIs only in normal form (RFC 3986, section 6.2.2)",
				exposed, why)}
		}
	}
	g.catalog.mu.Lock()
	templates := g.catalog.templates
	g.catalog.mu.Unlock()
	tier := max(e.tier, g.uriTier(e.up, uri, exposed, templates))
	if !pol.Sees(tier) {
		return "", mcp.ResourceNotFoundError(exposed)
	}
	if pol.Confirms(tier) {
		return "", needsHuman("resource", exposed, tier, verb)
	}
	return uri, nil
}

// needsHuman is the answer for a resource (or template) of a tier that
// the key's policy confirms.
func needsHuman(what, uri string, t Tier, verb string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
		"the %s %s is of the %s tier, which needs a human's approval for this key; countersign asks only for tool calls, so it is not %s",
		what, uri, t, verb)}
}

// completable decides whether a key of the policy may complete the
// template of e. The template's own tier decides as it would for a read;
// then, since a completion names what exists where the template reaches
// (a listing of a protected folder), every tier a URI it completes could
// have must be one the key reads without a human: the tier of each rule
// and template that could match such a URI. A rule's or template's text is compared up
// to its first wildcard or expression, which errs on the side of refusing.
func (g *Gateway) completable(pol Policy, e *resourceEntry) error {
	if !pol.Sees(e.tier) {
		return mcp.ResourceNotFoundError(e.exposed)
	}
	if pol.Confirms(e.tier) {
		return needsHuman("resource template", e.exposed, e.tier, "completed")
	}
	reach := g.reachableTiers(e)
	for t := range numTiers {
		if reach.Has(t) && (!pol.Sees(t) || pol.Confirms(t)) {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: fmt.Sprintf(
				"the resource template %s can complete URIs that this key may not read without a human's approval; countersign does not complete it",
				e.exposed)}
		}
	}
	return nil
}

// reachableTiers are the tiers a URI the template of e expands to could
// have.
func (g *Gateway) reachableTiers(e *resourceEntry) TierSet {
	names := []string{e.up.cfg.Name + "/" + literal(e.tmpl.URITemplate, "{"), literal(e.exposed, "{")}
	reaches := func(prefix string) bool {
		for _, n := range names {
			if strings.HasPrefix(n, prefix) || strings.HasPrefix(prefix, n) {
				return true
			}
		}
		return false
	}
	set := Tiers(e.tier)
	for _, r := range g.cfg.ResourceRules {
		if reaches(literal(strings.TrimSuffix(r.Match, "**"), "*?[\\")) {
			set |= Tiers(max(e.tier, r.Tier))
		}
	}
	g.catalog.mu.Lock()
	defer g.catalog.mu.Unlock()
	for _, o := range g.catalog.templates {
		if reaches(literal(o.exposed, "{")) {
			set |= Tiers(max(e.tier, o.tier))
		}
	}
	return set
}

// literal is s up to the first of the characters stops.
func literal(s, stops string) string {
	if i := strings.IndexAny(s, stops); i >= 0 {
		return s[:i]
	}
	return s
}

// notNormal says what keeps uri from the normal form of RFC 3986 (section
// 6.2.2), or "" when it is in it: a lower-case scheme and host, escapes
// in upper case and only where needed, and no dot or empty segments. It
// also refuses what a file server may take for a separator (a backslash,
// an escaped / or \), and looks for segments in the whole URI, query and
// fragment included, since an upstream may take all of it for a path.
func notNormal(uri string) string {
	scheme, rest, ok := strings.Cut(uri, ":")
	if !ok || !validScheme(scheme) {
		return "no scheme"
	}
	if strings.ToLower(scheme) != scheme {
		return "an upper-case scheme"
	}
	if why := badEscape(rest); why != "" {
		return why
	}
	if strings.Contains(rest, `\`) {
		return "a backslash"
	}
	if auth, ok := strings.CutPrefix(rest, "//"); ok {
		end := strings.IndexAny(auth, "/?#")
		if end < 0 {
			end = len(auth)
		}
		host := auth[strings.LastIndex(auth[:end], "@")+1 : end]
		if strings.ToLower(host) != host {
			return "an upper-case host"
		}
		rest = auth[end:]
	}
	segs := strings.Split(rest, "/")
	for i, s := range segs {
		switch {
		case s == "." || s == "..":
			return "a dot segment (" + s + ")"
		case s == "" && i > 0 && i < len(segs)-1:
			return "an empty segment (//)"
		}
	}
	return ""
}

func validScheme(s string) bool {
	for i, c := range s {
		alpha := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alpha && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

// badEscape says what is wrong with the first escape of s that is not in
// normal form, or "".
func badEscape(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) || unhex(s[i+1]) < 0 || unhex(s[i+2]) < 0 {
			return "a broken escape"
		}
		esc := s[i : i+3]
		b := byte(unhex(s[i+1])<<4 | unhex(s[i+2]))
		switch {
		case strings.ToUpper(esc) != esc:
			return "an escape in lower case (" + esc + ")"
		case b == '/' || b == '\\':
			return "an escaped separator (" + esc + ")"
		case unreserved(b):
			return "an escaped character that needs no escape (" + esc + ")"
		}
		i += 2
	}
	return ""
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// unreserved reports whether RFC 3986 lets b stand unescaped anywhere.
func unreserved(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || strings.IndexByte("-._~", b) >= 0
}
