package gateway_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/countersign/countersign/internal/gateway"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func resourceURIs(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var out []string
	for r, err := range cs.Resources(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.URI)
	}
	slices.Sort(out)
	return out
}

func templateURIs(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	var out []string
	for r, err := range cs.ResourceTemplates(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r.URITemplate)
	}
	slices.Sort(out)
	return out
}

func readText(t *testing.T, cs *mcp.ClientSession, uri string) (string, error) {
	t.Helper()
	res, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return "", err
	}
	var parts []string
	for _, c := range res.Contents {
		parts = append(parts, c.URI+": "+c.Text)
	}
	return strings.Join(parts, "\n"), nil
}

// TestResources: an upstream's resources and templates are listed and read
// through /mcp; reading is of the read tier unless a rule says otherwise;
// a key without a resource's tier neither lists nor reads it, and one
// whose policy confirms it cannot read it.
func TestResources(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) {
		c.ResourceRules = []gateway.ResourceTierRule{{Match: "notes/note://secret", Tier: gateway.TierCommit}}
		c.Keys["acme/agent2"] = gateway.Policy{Tiers: gateway.Tiers(gateway.TierWrite)} // no read tier
	})
	writer := h.connect(clientOpts{key: "agent2"})
	if got := resourceURIs(t, writer); len(got) != 0 {
		t.Errorf("a key without the read tier lists resources %v", got)
	}
	for p, err := range writer.Prompts(t.Context(), nil) {
		t.Errorf("a key without the read tier lists the prompt %v (%v)", p, err)
	}
	if _, err := writer.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "greet", Arguments: map[string]string{"name": "x"}}); err == nil {
		t.Error("a key without the read tier gets a prompt")
	}
	for _, version := range []string{"", "2025-11-25"} {
		cs := h.connect(clientOpts{version: version})
		if got := strings.Join(resourceURIs(t, cs), " "); got != "note://readme note://secret" {
			t.Fatalf("%q: resources %s", version, got)
		}
		if got := strings.Join(templateURIs(t, cs), " "); got != "note://note/{id}" {
			t.Fatalf("%q: templates %s", version, got)
		}
		if got, err := readText(t, cs, "note://readme"); err != nil || got != "note://readme: readme of notes" {
			t.Errorf("%q: read readme: %q %v", version, got, err)
		}
		if got, err := readText(t, cs, "note://note/7"); err != nil || got != "note://note/7: note 7 from notes" {
			t.Errorf("%q: read a templated note: %q %v", version, got, err)
		}
		if _, err := readText(t, cs, "note://secret"); err == nil || !strings.Contains(err.Error(), "commit tier, which needs a human's approval") {
			t.Errorf("%q: read of a confirmed tier: %v", version, err)
		}
		if _, err := readText(t, cs, "note://nothing"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("%q: read of an unknown resource: %v", version, err)
		}

		reader := h.connect(clientOpts{key: "reader", version: version})
		if got := strings.Join(resourceURIs(t, reader), " "); got != "note://readme" {
			t.Errorf("%q: the reader lists %s", version, got)
		}
		if _, err := readText(t, reader, "note://secret"); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("%q: the reader reads the secret: %v", version, err)
		}
	}
}

// TestResourceCollisions: the same URIs of two upstreams are exposed under
// countersign:<upstream>/<URI>, and each read reaches its own upstream.
func TestResourceCollisions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) {
		c.Upstreams = append(c.Upstreams, fixtureUpstream(t, "other", ""))
	})
	cs := h.connect(clientOpts{})
	got := resourceURIs(t, cs)
	for _, want := range []string{"countersign:notes/note://readme", "countersign:other/note://readme"} {
		if !slices.Contains(got, want) {
			t.Fatalf("resources %v lack %s", got, want)
		}
	}
	if got, err := readText(t, cs, "countersign:other/note://readme"); err != nil || got != "countersign:other/note://readme: readme of other" {
		t.Errorf("read other's readme: %q %v", got, err)
	}
	if got, err := readText(t, cs, "countersign:notes/note://note/3"); err != nil || got != "countersign:notes/note://note/3: note 3 from notes" {
		t.Errorf("read a templated note of notes: %q %v", got, err)
	}
	var names []string
	for p, err := range cs.Prompts(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, p.Name)
	}
	if !slices.Contains(names, "notes_greet") || !slices.Contains(names, "other_greet") {
		t.Errorf("prompts %v", names)
	}
	res, err := cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "other_greet", Arguments: map[string]string{"name": "bob"}})
	if err != nil || res.Messages[0].Content.(*mcp.TextContent).Text != "Hello, bob, from other" {
		t.Errorf("get other_greet: %v %v", res, err)
	}
	c, err := cs.Complete(t.Context(), &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "countersign:other/note://note/{id}"},
		Argument: mcp.CompleteParamsArgument{Name: "id", Value: "oth"}})
	if err != nil || strings.Join(c.Completion.Values, ",") != "other-1,other-2" {
		t.Errorf("complete other's template: %v %v", c, err)
	}
}

// TestSubscriptions: a subscription reaches the upstream once, its
// resources/updated reaches the client, and list_changed of resources and
// prompts follows the upstream's.
func TestSubscriptions(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	var mu sync.Mutex
	var updated []string
	resChanged, promptsChanged := make(chan bool, 10), make(chan bool, 10)
	cs := h.connect(clientOpts{version: "2025-11-25", more: func(o *mcp.ClientOptions) {
		o.ResourceUpdatedHandler = func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			mu.Lock()
			updated = append(updated, r.Params.URI)
			mu.Unlock()
		}
		o.ResourceListChangedHandler = func(context.Context, *mcp.ResourceListChangedRequest) { resChanged <- true }
		o.PromptListChangedHandler = func(context.Context, *mcp.PromptListChangedRequest) { promptsChanged <- true }
	}})
	if cs.InitializeResult().Capabilities.Resources == nil || !cs.InitializeResult().Capabilities.Resources.Subscribe {
		t.Fatalf("capabilities %+v", cs.InitializeResult().Capabilities)
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "note://readme"}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "note://nothing"}); err == nil {
		t.Error("subscribed to a resource that does not exist")
	}
	wantRan(t, call(t, cs, "touch", nil), "touched")
	eventually(t, "resources/updated", func() bool { mu.Lock(); defer mu.Unlock(); return len(updated) > 0 })
	mu.Lock()
	if updated[0] != "note://readme" {
		t.Errorf("updated %v", updated)
	}
	mu.Unlock()
	if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: "note://readme"}); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, h.logFile, "subscribe note://readme", "unsubscribe note://readme")

	wantRan(t, call(t, cs, "add_tool", nil), "added")
	<-resChanged
	<-promptsChanged
	eventually(t, "the new resource", func() bool { return slices.Contains(resourceURIs(t, cs), "note://extra") })
}

// TestSubscriptionOfAnEndedSession: a session that ends without
// unsubscribing is forgotten at the next subscription, and the upstream's
// subscription it held is ended.
func TestSubscriptionOfAnEndedSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	gone := h.connect(clientOpts{version: "2025-11-25"})
	if err := gone.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "note://readme"}); err != nil {
		t.Fatal(err)
	}
	gone.Close()
	cs := h.connect(clientOpts{version: "2025-11-25"})
	eventually(t, "the ended session to be gone", func() bool {
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "note://note/1"}); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(calls(t, h.logFile), "unsubscribe note://readme")
	})
}

// TestHostileResourceURIs: a resource URI or template the SDK would panic
// on is left out; the gateway and the upstream's other resources go on.
func TestHostileResourceURIs(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *gateway.Config) {
		raw := fixtureUpstream(t, "raw", "")
		raw.Env["COUNTERSIGN_FIXTURE"] = "raw"
		c.Upstreams = append(c.Upstreams, raw)
	})
	cs := h.connect(clientOpts{})
	got := resourceURIs(t, cs)
	if !slices.Contains(got, "note://good") || slices.ContainsFunc(got, func(u string) bool { return strings.Contains(u, "bad") }) {
		t.Fatalf("resources %v", got)
	}
	if tmpls := templateURIs(t, cs); slices.ContainsFunc(tmpls, func(u string) bool { return strings.Contains(u, "bad") }) {
		t.Fatalf("templates %v", tmpls)
	}
	wantRan(t, call(t, cs, "read_note", map[string]any{"id": "1"}), "note 1 from notes")
}
