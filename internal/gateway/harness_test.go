package gateway_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/gateway"
	"github.com/countersign/countersign/internal/gateway/confirm"
	"github.com/countersign/countersign/internal/server"
	"github.com/countersign/countersign/internal/store/sqlite"
	"github.com/countersign/countersign/internal/testutil"
	"github.com/countersign/countersign/internal/testutil/testserver"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testClock is the wall clock moved forward by what a test skips, so that
// expiry needs no sleeping while waits still use real timers.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())).UTC() }

func (c *testClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// harness is countersign serve in process (testserver, on the wall clock
// the test moves) with the gateway at /mcp and the fixture as the
// gateway's stdio upstream. Beside the World's keys, the account acme has
// the agent keys agent, agent2, reader (limited to read and write) and ci;
// the account other has the keys outsider and ci (h.keys["other/ci"]).
type harness struct {
	t       testing.TB
	ctx     context.Context
	srv     *testserver.Server
	store   *sqlite.DB
	clock   *testClock
	svc     *approval.Service
	alice   countersign.ApproverPrincipal
	keys    map[string]string
	base    string
	logFile string
	gw      *gateway.Gateway
	hub     *approval.Hub
	rate    int // the API's rate per client address
	acfg    approval.Config
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("GATEWAY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

func newHarness(t testing.TB, configure func(*gateway.Config)) *harness {
	t.Helper()
	return newHarnessRate(t, configure, 0)
}

// newHarnessRate is newHarness with the API's rate per client address.
func newHarnessRate(t testing.TB, configure func(*gateway.Config), ratePerMinute int) *harness {
	t.Helper()
	return newHarnessWith(t, configure, ratePerMinute, approval.Config{})
}

// newHarnessWith is newHarnessRate with the approval service's
// configuration.
func newHarnessWith(t testing.TB, configure func(*gateway.Config), ratePerMinute int, acfg approval.Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: &testClock{}, keys: map[string]string{}, rate: ratePerMinute, acfg: acfg,
		logFile: filepath.Join(t.TempDir(), "calls.log")}
	// The World's clock starts at the wall clock's time, as testClock does.
	h.srv = testserver.New(t, testserver.At(time.Now().UTC()), testserver.Clock(h.clock), testserver.Serve(),
		testserver.Approval(func(_ *testserver.Server, c *approval.Config) { *c = acfg }),
		testserver.Config(func(s *testserver.Server, c *server.Config) {
			h.ctx, h.store = s.Ctx, s.World.Store
			for _, k := range []struct{ account, name, label string }{{"acme", "agent", "agent"}, {"acme", "agent2", "agent2"},
				{"acme", "reader", "reader"}, {"acme", "ci", "ci"}, {"other", "outsider", "outsider"}, {"other", "ci", "other/ci"}} {
				h.keys[k.label] = s.Key(k.account, k.name)
			}
			h.alice = countersign.ApproverPrincipal{Username: "alice", AccountID: s.Acme.ID, Role: countersign.RoleAdmin}
			h.mount(s, c, h.config(configure))
		}))
	return h
}

// config is the gateway's configuration: the fixture as its upstream, the
// key reader limited to read and write, then what configure sets.
func (h *harness) config(configure func(*gateway.Config)) *gateway.Config {
	t := h.t
	t.Helper()
	cfg := gateway.NewConfig()
	cfg.Hold = 300 * time.Millisecond
	cfg.Clock = h.clock
	cfg.Upstreams = []gateway.UpstreamConfig{fixtureUpstream(t, "notes", h.logFile)}
	cfg.Keys["acme/reader"] = gateway.Policy{Tiers: gateway.Tiers(gateway.TierRead, gateway.TierWrite), Confirm: cfg.Policy.Confirm}
	quickStop(cfg)
	if configure != nil {
		configure(cfg)
	}
	if err := cfg.ResolveKeys(h.ctx, h.store); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// restarted is the server restarted with the configuration configure
// sets: another replica on the same store (testserver.ReplicaOf), so with
// the same request state key, and a gateway, an approval service and an
// address of its own. The harness goes on serving too.
func (h *harness) restarted(configure func(*gateway.Config)) *harness {
	h.t.Helper()
	r := *h
	r.srv = testserver.New(h.t, testserver.ReplicaOf(h.srv, h.store), testserver.Clock(h.clock), testserver.Serve(),
		testserver.Approval(func(_ *testserver.Server, c *approval.Config) { *c = h.acfg }),
		testserver.Config(func(s *testserver.Server, c *server.Config) { r.mount(s, c, r.config(configure)) }))
	return &r
}

// mount starts the gateway of cfg on s's approval service and puts it at
// /mcp, as countersign serve does; /mcp takes agent keys and the OAuth
// access tokens issued for it.
func (h *harness) mount(s *testserver.Server, c *server.Config, cfg *gateway.Config) {
	t := h.t
	t.Helper()
	h.svc, h.hub, h.base = s.Service, s.Hub, s.URL
	key, err := h.store.ServerKey(h.ctx, "mcp-request-state", 32)
	if err != nil {
		t.Fatal(err)
	}
	h.gw, err = confirm.NewForServer(cfg, h.svc, s.Public, key, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	h.gw.Start(h.ctx, 20*time.Second)
	t.Cleanup(h.gw.Close)
	c.MCP = h.gw.HTTPHandler(s.Auth.MCPAgent(h.base+"/mcp", h.clock))
	c.RatePerMinute = h.rate
}

// quickStop gives command upstreams 100 ms to exit once their stdin is
// closed: server-everything keeps running until signalled, and the default
// wait would add two seconds to the end of each test that runs it.
func quickStop(cfg *gateway.Config) { gateway.SetStopWait(cfg, 100*time.Millisecond) }

// bearer is an HTTP client that sends the key as a bearer token.
func bearer(secret string) *http.Client {
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+secret)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// clientOpts describe a downstream client.
type clientOpts struct {
	key      string // agent key name; default agent
	version  string // protocol version; default the latest (2026-07-28)
	elicit   func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	urlOnly  bool // declare URL elicitation only
	withURL  bool // declare URL elicitation besides form
	noMRTR   bool // answer input_required results by hand
	progress func(*mcp.ProgressNotificationClientRequest)
	changed  func()
	more     func(*mcp.ClientOptions) // any other handlers
	//lint:ignore SA1019 the tests drive clients of earlier revisions, which have roots
	roots []*mcp.Root
}

func (o clientOpts) client() *mcp.Client {
	opts := &mcp.ClientOptions{ElicitationHandler: o.elicit, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: o.noMRTR}}
	switch {
	case o.urlOnly:
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	case o.withURL:
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{
			Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}}}
	}
	if o.progress != nil {
		opts.ProgressNotificationHandler = func(_ context.Context, r *mcp.ProgressNotificationClientRequest) { o.progress(r) }
	}
	if o.changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) { o.changed() }
	}
	if o.more != nil {
		o.more(opts)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, opts)
	//lint:ignore SA1019 the tests drive clients of earlier revisions, which have roots
	c.AddRoots(o.roots...)
	return c
}

// connect opens an MCP session with the server's /mcp endpoint.
func (h *harness) connect(o clientOpts) *mcp.ClientSession {
	h.t.Helper()
	if o.key == "" {
		o.key = "agent"
	}
	tr := &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", HTTPClient: bearer(h.keys[o.key])}
	cs, err := o.client().Connect(h.ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: o.version})
	if err != nil {
		h.t.Fatalf("connect (%s, %q): %v", o.key, o.version, err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and fails the test on a protocol error.
func call(t testing.TB, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", tool, err)
	}
	return res
}

// textOf is a result's text.
func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// wantRan fails unless the result is the tool's own, with the text.
func wantRan(t testing.TB, res *mcp.CallToolResult, want string) {
	t.Helper()
	if res.IsError || textOf(res) != want {
		t.Fatalf("result %q (error %v, meta %v), want the tool's %q", textOf(res), res.IsError, res.Meta, want)
	}
}

// wantStatus fails unless the result is countersign's with this status,
// and returns its text.
func wantStatus(t testing.TB, res *mcp.CallToolResult, status string) string {
	t.Helper()
	if !res.IsError || res.Meta["countersign/status"] != status {
		t.Fatalf("result %q (error %v, meta %v), want countersign status %q", textOf(res), res.IsError, res.Meta, status)
	}
	return textOf(res)
}

// pending returns the newest pending request of acme for the tool.
func (h *harness) pending(tool string) *countersign.Request {
	h.t.Helper()
	list, err := h.svc.List(context.Background(), h.alice, countersign.RequestFilter{Status: countersign.StatusPending})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range list {
		if r.Action == tool {
			return r
		}
	}
	h.t.Fatalf("no pending request for %s", tool)
	return nil
}

func (h *harness) decide(id string, d countersign.Decision) {
	h.t.Helper()
	if _, err := h.svc.Decide(context.Background(), h.alice, id, countersign.DecisionInput{Decision: d, Text: reasonFor(d)}); err != nil {
		h.t.Fatalf("decide %s %s: %v", id, d, err)
	}
}

func reasonFor(d countersign.Decision) string {
	if d == countersign.DecisionDeny {
		return "not today"
	}
	return ""
}

// request reads a request from the store.
func (h *harness) request(id string) *countersign.Request {
	h.t.Helper()
	r, err := h.store.Request(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

// events returns the audit log's events of one request.
func (h *harness) events(id string) []string {
	h.t.Helper()
	entries, err := h.store.AuditLog(context.Background(), 0, 10000)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.RequestID == id {
			out = append(out, e.Event)
		}
	}
	return out
}

// wantCalls fails unless the fixture ran exactly these side effects.
func wantCalls(t testing.TB, logFile string, want ...string) {
	t.Helper()
	got := calls(t, logFile)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the upstream ran %q, want %q", got, want)
	}
}

// eventually waits for cond (testutil.Wait), failing in the words "timed
// out waiting for what".
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !testutil.Wait(cond, testutil.EventuallyWithin) {
		t.Fatalf("timed out waiting for %s", what)
	}
}
