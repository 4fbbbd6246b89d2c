package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// richUpstream is docs/agents.md's example of a file server, "rich", as a real
// MCP server over HTTP: the resources file:///srv/readme.txt and
// file:///srv/secret/plan.txt, the templates file:///{+path} and
// file:///srv/public/{name} (and others a test adds), subscriptions, and
// completions that name the files of a folder. It records every read,
// subscription and completion that reaches it, so that a test can tell
// what the gateway let through.
type richUpstream struct {
	mu  sync.Mutex
	got []string
}

func (r *richUpstream) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, s)
}

// reached reports whether the upstream got exactly this line.
func (r *richUpstream) reached(line string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.got, line)
}

// newRich starts the upstream, with the templates given besides its own,
// and returns its configuration.
func newRich(t *testing.T, templates ...string) (*richUpstream, gateway.UpstreamConfig) {
	t.Helper()
	rich := &richUpstream{}
	s := mcp.NewServer(&mcp.Implementation{Name: "rich", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, r *mcp.SubscribeRequest) error {
			rich.record("subscribe " + r.Params.URI)
			return nil
		},
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		CompletionHandler: func(_ context.Context, r *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			rich.record("complete " + r.Params.Ref.URI + r.Params.Ref.Name)
			names := map[string][]string{
				"file:///{+path}":           {"srv/secret/plan.txt", "srv/secret/other.txt"},
				"file:///srv/secret/{name}": {"plan.txt", "other.txt"},
				"file:///srv/public/{name}": {"a.txt"},
			}[r.Params.Ref.URI]
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: append([]string{}, names...)}}, nil
		},
	})
	read := func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		rich.record("read " + r.Params.URI)
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "contents"}}}, nil
	}
	s.AddResource(&mcp.Resource{URI: "file:///srv/readme.txt", Name: "readme"}, read)
	s.AddResource(&mcp.Resource{URI: "file:///srv/secret/plan.txt", Name: "plan"}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///{+path}", Name: "file"}, read)
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "file:///srv/public/{name}", Name: "public"}, read)
	for i, tmpl := range templates {
		s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: tmpl, Name: fmt.Sprint("more", i)}, read)
	}
	web := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(web.Close)
	return rich, gateway.UpstreamConfig{Name: "rich", URL: web.URL}
}

// richHarness is the gateway in front of the fixture and rich (with the
// templates given), with the rules given; the key agent2 has only the read
// tier, and ci needs a human for every tier.
func richHarness(t *testing.T, templates []string, rules ...gateway.ResourceTierRule) (*harness, *richUpstream) {
	t.Helper()
	rich, up := newRich(t, templates...)
	h := newHarness(t, func(c *gateway.Config) {
		c.Upstreams = append(c.Upstreams, up)
		c.ResourceRules = rules
		c.Keys["acme/agent2"] = gateway.Policy{Tiers: gateway.Tiers(gateway.TierRead), Confirm: c.Policy.Confirm}
		c.Keys["acme/ci"] = gateway.Policy{Tiers: gateway.AllTiers, Confirm: gateway.AllTiers}
	})
	return h, rich
}

// secretRule is docs/agents.md's own rule.
var secretRule = gateway.ResourceTierRule{Match: "rich/file:///srv/secret/**", Tier: gateway.TierCommit}

// rpcError is the JSON-RPC error of err; without one, the test fails and
// it is nil.
func rpcError(t *testing.T, what string, err error) *jsonrpc.Error {
	t.Helper()
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: %v, want a JSON-RPC error", what, err)
		return nil
	}
	return e
}

// wantUnknown fails unless err is what reading a resource that does not
// exist answers, for the URI given.
func wantUnknown(t *testing.T, what, uri string, err error) {
	t.Helper()
	e := rpcError(t, what, err)
	data, _ := json.Marshal(map[string]string{"uri": uri})
	if e != nil && (e.Code != jsonrpc.CodeInvalidParams || e.Message != "Resource not found" || string(e.Data) != string(data)) {
		t.Errorf("%s: %d %q %s, want the answer for an unknown resource", what, e.Code, e.Message, e.Data)
	}
}

// wantRefused fails unless err has the code and a message holding text.
func wantRefused(t *testing.T, what string, err error, code int64, text string) {
	t.Helper()
	if e := rpcError(t, what, err); e != nil && (e.Code != code || !strings.Contains(e.Message, text)) {
		t.Errorf("%s: %d %q, want %d and %q", what, e.Code, e.Message, code, text)
	}
}

const (
	needsHuman = "commit tier, which needs a human's approval"
	notNormal  = "not in normal form"
)

// TestResourceTemplateTiers: a read through a template is of the tier of
// the URI it reads, so that a template cannot reach a protected folder
// another way: every spelling of a file under a commit-tier folder is
// refused (not in normal form, or needing a human), to a key of every tier
// as to one of the read tier only (which gets the answer of an unknown
// resource), and nothing of it reaches the upstream.
func TestResourceTemplateTiers(t *testing.T) {
	t.Parallel()
	h, rich := richHarness(t, nil, secretRule)
	agent, reader := h.connect(clientOpts{}), h.connect(clientOpts{key: "agent2"})
	if _, err := readText(t, agent, "zzz:///unknown"); err != nil {
		wantUnknown(t, "an unknown resource", "zzz:///unknown", err)
	} else {
		t.Fatal("read a resource that does not exist")
	}
	for _, uri := range []string{
		"file:///srv/secret/plan.txt", // the resource itself
		"file:///srv/secret/other.txt",
		"file:///srv/secret/",
		"file:///srv/secret", // the folder is under its own rule
		// What an upstream that resolves only the path, or ignores
		// case, reads as the same file or folder.
		"file:///srv/secret?",
		"file:///srv/secret?x=1",
		"file:///srv/secret#",
		"file:///srv/secret;x",
		"file:///srv/secret/plan.txt?",
		"file:///srv/secret/plan.txt#x",
		"file:///srv/secret;v=1/plan.txt",
		"file:///srv/Secret/plan.txt",
		"file:///srv/SECRET/other.txt",
	} {
		_, err := readText(t, agent, uri)
		wantRefused(t, "agent reads "+uri, err, jsonrpc.CodeInvalidRequest, needsHuman)
		_, err = readText(t, reader, uri)
		wantUnknown(t, "read-tier key reads "+uri, uri, err)
	}
	for _, uri := range []string{
		"file:///srv/secret//plan.txt",
		"file:///srv/./secret/plan.txt",
		"file:///srv/secret/%70lan.txt",
		"file:///srv/secre%74/plan.txt",
		"file:///srv/secret%2Fplan.txt",
		"file:///srv%2fsecret/plan.txt",
		"file:///srv/public/../secret/plan.txt",
		"file:///srv/x?/../secret/plan.txt",
		"file:///srv/secret/%2E%2E/secret/plan.txt",
		"file:////srv/secret/plan.txt",
		"file:///srv/secret/plan.txt/.",
	} {
		for name, cs := range map[string]*mcp.ClientSession{"agent": agent, "read-tier key": reader} {
			_, err := readText(t, cs, uri)
			wantRefused(t, name+" reads "+uri, err, jsonrpc.CodeInvalidParams, notNormal)
		}
	}
	for _, uri := range []string{"file:///srv/readme.txt", "file:///srv/public/a.txt", "file:///srv/public/a%20b.txt", "file:///srv/secretary/x"} {
		for name, cs := range map[string]*mcp.ClientSession{"agent": agent, "read-tier key": reader} {
			if got, err := readText(t, cs, uri); err != nil || got != uri+": contents" {
				t.Errorf("%s reads %s: %q %v", name, uri, got, err)
			}
		}
	}
	rich.mu.Lock()
	defer rich.mu.Unlock()
	for _, line := range rich.got {
		if l := strings.ToLower(line); strings.Contains(l, "/srv/secret") && !strings.Contains(l, "/srv/secretary") || strings.Contains(line, "%") && !strings.Contains(line, "%20") {
			t.Errorf("the upstream got %q", line)
		}
	}
}

// TestResourceTierHighestWins: of the template a URI matches and every rule
// that matches it, the highest tier decides, whatever their order; a
// resource that a higher template covers is of the template's tier, in the
// list as in a read.
func TestResourceTierHighestWins(t *testing.T) {
	t.Parallel()
	h, _ := richHarness(t, nil,
		gateway.ResourceTierRule{Match: "rich/file:///srv/**", Tier: gateway.TierRead},
		secretRule,
		gateway.ResourceTierRule{Match: "rich/file:///{+path}", Tier: gateway.TierWrite})
	agent, reader := h.connect(clientOpts{}), h.connect(clientOpts{key: "agent2"})
	for _, uri := range []string{"file:///srv/secret/plan.txt", "file:///srv/secret/other.txt"} {
		_, err := readText(t, agent, uri)
		wantRefused(t, "agent reads "+uri, err, jsonrpc.CodeInvalidRequest, needsHuman)
		_, err = readText(t, reader, uri)
		wantUnknown(t, "read-tier key reads "+uri, uri, err)
	}
	for _, uri := range []string{"file:///srv/readme.txt", "file:///srv/public/a.txt"} {
		if got, err := readText(t, agent, uri); err != nil || got != uri+": contents" {
			t.Errorf("agent reads %s (write tier): %q %v", uri, got, err)
		}
		_, err := readText(t, reader, uri)
		wantUnknown(t, "read-tier key reads "+uri, uri, err)
	}
	if got := resourceURIs(t, reader); slices.ContainsFunc(got, func(u string) bool { return strings.HasPrefix(u, "file:") }) {
		t.Errorf("the read-tier key lists %v", got)
	}
	if got := resourceURIs(t, agent); !slices.Contains(got, "file:///srv/readme.txt") || !slices.Contains(got, "file:///srv/secret/plan.txt") {
		t.Errorf("agent lists %v", got)
	}
}

// TestResourceTemplateSubscriptions: a subscription through a template is
// decided as a read of its URI is.
func TestResourceTemplateSubscriptions(t *testing.T) {
	t.Parallel()
	h, rich := richHarness(t, nil, secretRule)
	agent := h.connect(clientOpts{version: "2025-11-25"})
	reader := h.connect(clientOpts{key: "agent2", version: "2025-11-25"})
	subscribe := func(cs *mcp.ClientSession, uri string) error {
		return cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: uri})
	}
	uri := "file:///srv/secret/other.txt"
	wantRefused(t, "agent subscribes "+uri, subscribe(agent, uri), jsonrpc.CodeInvalidRequest, needsHuman)
	wantUnknown(t, "read-tier key subscribes "+uri, uri, subscribe(reader, uri))
	for _, uri := range []string{"file:///srv/secret//plan.txt", "file:///srv/secret/%70lan.txt", "file:///srv/./secret/plan.txt"} {
		wantRefused(t, "agent subscribes "+uri, subscribe(agent, uri), jsonrpc.CodeInvalidParams, notNormal)
		wantRefused(t, "read-tier key subscribes "+uri, subscribe(reader, uri), jsonrpc.CodeInvalidParams, notNormal)
	}
	if err := subscribe(reader, "file:///srv/public/a.txt"); err != nil {
		t.Fatal(err)
	}
	if !rich.reached("subscribe file:///srv/public/a.txt") {
		t.Errorf("the upstream got %v", rich.got)
	}
	rich.mu.Lock()
	defer rich.mu.Unlock()
	if slices.ContainsFunc(rich.got, func(l string) bool { return strings.Contains(l, "secret") }) {
		t.Errorf("the upstream got %v", rich.got)
	}
}

// TestCompletionTiers: a completion is refused where the read or the prompt
// it completes would be: a template of a tier that needs a human, one
// under which a rule gives such a tier (its completions would name what
// lies there), a prompt the key cannot get; the others complete.
func TestCompletionTiers(t *testing.T) {
	t.Parallel()
	h, rich := richHarness(t, []string{"file:///srv/secret/{name}"}, secretRule)
	agent, reader, ci := h.connect(clientOpts{}), h.connect(clientOpts{key: "agent2"}), h.connect(clientOpts{key: "ci"})
	complete := func(cs *mcp.ClientSession, typ, ref, arg string) ([]string, error) {
		r := &mcp.CompleteReference{Type: typ, URI: ref}
		if typ == "ref/prompt" {
			r = &mcp.CompleteReference{Type: typ, Name: ref}
		}
		res, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: r, Argument: mcp.CompleteParamsArgument{Name: arg, Value: ""}})
		if err != nil {
			return nil, err
		}
		return res.Completion.Values, nil
	}

	_, err := complete(agent, "ref/resource", "file:///srv/secret/{name}", "name")
	wantRefused(t, "agent completes the secret folder", err, jsonrpc.CodeInvalidRequest, needsHuman)
	_, err = complete(reader, "ref/resource", "file:///srv/secret/{name}", "name")
	wantUnknown(t, "read-tier key completes the secret folder", "file:///srv/secret/{name}", err)
	for name, cs := range map[string]*mcp.ClientSession{"agent": agent, "read-tier key": reader} {
		_, err := complete(cs, "ref/resource", "file:///{+path}", "path")
		wantRefused(t, name+" completes file:///{+path}", err, jsonrpc.CodeInvalidRequest, "may not read without a human")
		if got, err := complete(cs, "ref/resource", "file:///srv/public/{name}", "name"); err != nil || strings.Join(got, ",") != "a.txt" {
			t.Errorf("%s completes the public folder: %v %v", name, got, err)
		}
	}
	if rich.reached("complete file:///{+path}") || rich.reached("complete file:///srv/secret/{name}") {
		t.Errorf("the upstream got %v", rich.got)
	}

	if got, err := complete(agent, "ref/prompt", "greet", "name"); err != nil || strings.Join(got, ",") != "alice,albert,bob" {
		t.Errorf("agent completes greet: %v %v", got, err)
	}
	_, getErr := ci.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "x"}})
	_, err = complete(ci, "ref/prompt", "greet", "name")
	get, got := rpcError(t, "get greet", getErr), rpcError(t, "complete greet", err)
	if get != nil && got != nil && (get.Code != got.Code || get.Message != got.Message || get.Message != "unknown prompt") {
		t.Errorf("a key that gets %d %q completes greet: %d %q", get.Code, get.Message, got.Code, got.Message)
	}
}
