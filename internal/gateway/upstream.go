package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Restart backoff of an upstream that failed or died: quick at first, so
// that a crash costs one call, and slower while it keeps failing.
const (
	minBackoff     = 250 * time.Millisecond
	maxBackoff     = 30 * time.Second
	connectTimeout = 30 * time.Second
)

// upstream keeps one MCP server connected: it starts or dials it, lists its
// tools, follows its list_changed notifications, and restarts it with a
// backoff whenever it fails or dies. A call never waits for a restart: it
// fails at once with a tool error that says the server is restarting.
type upstream struct {
	cfg     UpstreamConfig
	log     *slog.Logger
	command commandRun // a command upstream's
	// web carries the requests to a URL upstream, across its sessions.
	web    *http.Transport
	client *mcp.Client
	opts   *mcp.ClientOptions
	mw     mcp.Middleware // of hooks.requests
	hooks  upstreamHooks

	mu      sync.Mutex
	session *mcp.ClientSession
	gen     int // counts sessions, so that a late list of an old one is dropped
	lists   upstreamLists
	down    string // why there is no session
	settled firstAttempt
	kick    chan struct{}
}

// commandRun is how a command upstream runs.
type commandRun struct {
	// stopWait is how long the command has to exit once its stdin is
	// closed, before it is signalled (CommandTransport's TerminateDuration).
	stopWait time.Duration
	stderr   io.Writer // where a command's stderr goes
}

// firstAttempt is done after an upstream's first attempt to connect,
// whether it succeeded or not, so that start-up never waits on a broken
// upstream.
type firstAttempt struct {
	ch   chan struct{}
	once sync.Once
}

// done marks the first attempt made; later calls do nothing.
func (f *firstAttempt) done() { f.once.Do(func() { close(f.ch) }) }

// wait is closed once the first attempt was made.
func (f *firstAttempt) wait() <-chan struct{} { return f.ch }

// upstreamLists are what an upstream offers, as it last listed it.
type upstreamLists struct {
	caps      *mcp.ServerCapabilities // never nil once connected
	tools     []*mcp.Tool
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
	prompts   []*mcp.Prompt
}

// upstreamHooks are how an upstream tells the gateway what happened. Each
// runs on the upstream's read loop, outside any lock, and must not block.
type upstreamHooks struct {
	// progress takes the upstream's progress notifications, in their
	// order on the wire.
	progress func(u *upstream, p *mcp.ProgressNotificationParams)
	// changed: a list (tools, resources, templates, prompts) changed.
	changed func()
	// updated: a subscribed resource changed.
	updated func(u *upstream, uri string)
	// logged: the upstream sent a log message (see logging.go), handed
	// over in its order on the wire.
	logged logHook
	// stamp marks a request of the upstream, as its connection reads it,
	// with what it belongs to (see inflight.go).
	stamp func(*jsonrpc.Request, attribution)
	// connected: a session of the upstream is up.
	connected func(u *upstream)
	// requests sets the client up to pass its server's requests on (see
	// passthrough.go), and returns a middleware for the client.
	requests func(u *upstream, opts *mcp.ClientOptions) mcp.Middleware
}

func newUpstream(cfg UpstreamConfig, stopWait time.Duration, log *slog.Logger, stderr io.Writer, hooks upstreamHooks) *upstream {
	if stopWait <= 0 {
		stopWait = defaultStopWait
	}
	ulog := log.With("upstream", cfg.Name)
	u := &upstream{cfg: cfg, command: commandRun{stopWait: stopWait, stderr: upstreamStderr(cfg.Name, stderr, ulog)}, log: ulog, hooks: hooks,
		down: "starting", settled: firstAttempt{ch: make(chan struct{})}, kick: make(chan struct{}, 1)}
	if cfg.URL != "" {
		u.web = upstreamTransport()
	}
	// Notifications are handled on the connection's read loop: a list
	// call must not run there, or it would wait for itself.
	relist := func(ctx context.Context) { go u.refresh(context.WithoutCancel(ctx)) }
	opts := &mcp.ClientOptions{
		Logger: quiet(log),
		// Nothing to pass on but what requests adds.
		Capabilities:               &mcp.ClientCapabilities{},
		ToolListChangedHandler:     func(ctx context.Context, _ *mcp.ToolListChangedRequest) { relist(ctx) },
		ResourceListChangedHandler: func(ctx context.Context, _ *mcp.ResourceListChangedRequest) { relist(ctx) },
		PromptListChangedHandler:   func(ctx context.Context, _ *mcp.PromptListChangedRequest) { relist(ctx) },
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			if hooks.updated != nil {
				hooks.updated(u, r.Params.URI)
			}
		},
		// No ProgressNotificationHandler nor LoggingMessageHandler:
		// progress and log messages are read off the messages in their
		// order (see progressRoutes and logging.go).
	}
	if hooks.requests != nil {
		u.mw = hooks.requests(u, opts)
	}
	u.opts = opts
	u.newClient()
	return u
}

func (u *upstream) newClient() {
	u.client = mcp.NewClient(&mcp.Implementation{Name: "countersign-gateway", Version: "1"}, u.opts)
	if u.mw != nil {
		u.client.AddReceivingMiddleware(u.mw)
	}
}

// declare sets the capabilities the upstream's sessions declare; only
// before run.
func (u *upstream) declare(caps *mcp.ClientCapabilities) {
	o := *u.opts
	o.Capabilities = caps
	u.opts = &o
	u.newClient()
}

// run keeps the upstream connected until ctx is done.
func (u *upstream) run(ctx context.Context) {
	if u.web != nil {
		// However it stops: also while it waits to be retried.
		defer u.web.CloseIdleConnections()
	}
	backoff := minBackoff
	for ctx.Err() == nil {
		cs, err := u.connect(ctx)
		u.settled.done()
		if err != nil {
			u.setDown(fmt.Sprintf("cannot start: %v", err))
			u.log.Warn("upstream failed to start; retrying", "err", err, "in", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		started := time.Now()
		// A kick meant for an earlier session is void: left in the
		// channel, it would end this one at once, and the calls failing
		// with it would kick the next, each restart waiting longer.
		select {
		case <-u.kick:
		default:
		}
		done := make(chan error, 1)
		go func() { done <- cs.Wait() }()
		select {
		case err = <-done:
		case <-u.kick:
			cs.Close()
			err = <-done
		case <-ctx.Done():
			cs.Close()
			<-done
			u.setDown("stopped")
			return
		}
		u.setDown("restarting after it stopped")
		u.log.Warn("upstream stopped; restarting", "err", err)
		if time.Since(started) > time.Minute {
			backoff = minBackoff // it ran well for a while: this is a new failure
		}
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// connect starts or dials the server and lists what it offers.
func (u *upstream) connect(ctx context.Context) (*mcp.ClientSession, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	cs, err := u.client.Connect(cctx, u.transport(), u.sessionOptions())
	if err != nil {
		return nil, err
	}
	lists, err := u.list(cctx, cs)
	if err != nil {
		cs.Close()
		return nil, err
	}
	u.mu.Lock()
	u.session, u.lists, u.down = cs, lists, ""
	u.gen++
	u.mu.Unlock()
	u.log.Info("upstream connected", "tools", len(lists.tools), "resources", len(lists.resources),
		"templates", len(lists.templates), "prompts", len(lists.prompts))
	u.hooks.changed()
	if u.hooks.connected != nil {
		u.hooks.connected(u)
	}
	return cs, nil
}

// list lists what the session's server says it offers. Tools must list;
// a failing list of resources or prompts leaves them out, with a warning.
func (u *upstream) list(ctx context.Context, cs *mcp.ClientSession) (upstreamLists, error) {
	l := upstreamLists{caps: &mcp.ServerCapabilities{}}
	if r := cs.InitializeResult(); r != nil && r.Capabilities != nil {
		l.caps = r.Capabilities
	}
	var err error
	if l.tools, err = collect(cs.Tools(ctx, nil)); err != nil {
		return l, fmt.Errorf("list tools: %w", err)
	}
	if l.caps.Resources != nil {
		if l.resources, err = collect(cs.Resources(ctx, nil)); err != nil {
			u.log.Warn("list resources", "err", err)
		}
		if l.templates, err = collect(cs.ResourceTemplates(ctx, nil)); err != nil {
			u.log.Warn("list resource templates", "err", err)
		}
	}
	if l.caps.Prompts != nil {
		if l.prompts, err = collect(cs.Prompts(ctx, nil)); err != nil {
			u.log.Warn("list prompts", "err", err)
		}
	}
	return l, nil
}

// collect gathers the items of a paginated list.
func collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for t, err := range seq {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// transport builds the upstream's transport: a fresh process, or the URL
// with the configured headers.
func (u *upstream) transport() mcp.Transport {
	if u.cfg.URL != "" {
		endpoint, full := splitURL(u.cfg.URL)
		return &mcp.StreamableClientTransport{Endpoint: endpoint.String(), HTTPClient: &http.Client{
			Transport: &sseTapTransport{tap: u.taps(),
				base: &urlSecretsTransport{endpoint: endpoint, full: full,
					base: &headerTransport{headers: expandHeaders(u.cfg.Headers), base: u.web}}},
		}}
	}
	// Not exec.CommandContext: the process outlives the connect call, and
	// ends when its session is closed.
	cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
	cmd.Env = os.Environ()
	for k, v := range u.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+os.Expand(v, os.Getenv))
	}
	cmd.Stderr = u.command.stderr
	return &tapTransport{Transport: &mcp.CommandTransport{Command: cmd, TerminateDuration: u.command.stopWait}, tap: u.taps()}
}

// sessionOptions picks the protocol towards the upstream. A stdio process
// is one session anyway, and the 2025-11-25 protocol spares every call the
// per-request _meta of 2026-07-28 (client info and capabilities, encoded by
// the gateway and decoded by the upstream), which is most of the gateway's
// cost on a read call. Over HTTP the newest protocol needs no session that
// the upstream could expire, so it is offered first.
func (u *upstream) sessionOptions() *mcp.ClientSessionOptions {
	if u.cfg.URL != "" {
		return nil
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
}

// refresh lists everything again after a list_changed notification.
func (u *upstream) refresh(ctx context.Context) {
	u.mu.Lock()
	cs, gen := u.session, u.gen
	u.mu.Unlock()
	if cs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	lists, err := u.list(ctx, cs)
	if err != nil {
		u.log.Warn("list after list_changed", "err", err)
		return
	}
	u.mu.Lock()
	if u.gen != gen {
		u.mu.Unlock()
		return // a newer session listed its own
	}
	u.lists = lists
	u.mu.Unlock()
	u.log.Info("upstream lists changed", "tools", len(lists.tools), "resources", len(lists.resources), "prompts", len(lists.prompts))
	u.hooks.changed()
}

// snapshot returns the lists of the current or last session.
func (u *upstream) snapshot() upstreamLists {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lists
}

// current returns the session, or why there is none.
func (u *upstream) current() (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session == nil {
		return nil, errUnavailable{u.cfg.Name, u.down}
	}
	return u.session, nil
}

func (u *upstream) setDown(why string) {
	u.mu.Lock()
	u.session, u.down = nil, why
	u.mu.Unlock()
}

// restart ends the session cs, if it is still the current one, so that run
// starts a new one.
func (u *upstream) restart(cs *mcp.ClientSession) {
	u.mu.Lock()
	current := u.session == cs
	u.mu.Unlock()
	if !current {
		return
	}
	select {
	case u.kick <- struct{}{}:
	default:
	}
}

// errUnavailable is a call to an upstream that is not connected.
type errUnavailable struct{ name, why string }

func (e errUnavailable) Error() string {
	return fmt.Sprintf("the MCP server %q is not available (%s)", e.name, e.why)
}

// call calls a tool of the upstream. A failure of the connection (not an
// error answer of the server) restarts it.
func (u *upstream) call(ctx context.Context, tool string, args []byte, progressToken any) (*mcp.CallToolResult, error) {
	u.mu.Lock()
	cs, why := u.session, u.down
	u.mu.Unlock()
	if cs == nil {
		return nil, errUnavailable{u.cfg.Name, why}
	}
	params := &mcp.CallToolParams{Name: tool}
	if len(args) > 0 {
		params.Arguments = rawJSON(args)
	}
	if progressToken != nil {
		params.Meta = mcp.Meta{"progressToken": progressToken}
	}
	res, err := cs.CallTool(ctx, params)
	if err != nil && ctx.Err() == nil {
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) {
			u.log.Warn("upstream call failed; restarting it", "tool", tool, "err", err)
			u.restart(cs)
		}
	}
	return res, err
}

// rawJSON marshals as itself.
type rawJSON []byte

func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// maxUpstreamIdle is how many idle connections to one HTTP upstream are
// kept for the next calls.
const maxUpstreamIdle = 64

// upstreamTransport is net/http's default transport with room for the
// connections of calls made at once. The default keeps two idle
// connections per host; every key's calls share an upstream's session, so
// with more at once each call past the second opened a connection (over
// TLS, with a handshake) and closed it after its answer.
func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = maxUpstreamIdle
	t.MaxIdleConns = maxUpstreamIdle
	return t
}

// headerTransport adds the configured headers to every request.
// splitURL parses an upstream's URL (Check made sure it parses) into the
// endpoint the MCP client is given, scheme, host and path, and the URL as
// configured. The user info and the query, which can hold secrets, are
// added to each request by urlSecretsTransport: an error of net/http
// names the request's URL, and such an error reaches logs and, as why the
// upstream is not available, the agent.
func splitURL(raw string) (endpoint, full *url.URL) {
	full, err := url.Parse(raw)
	if err != nil {
		full = &url.URL{}
	}
	e := *full
	e.User, e.RawQuery, e.ForceQuery, e.Fragment, e.RawFragment = nil, "", false, "", ""
	return &e, full
}

// urlSecretsTransport adds the configured URL's query and user info (as
// basic authentication, as net/http does) to requests for the endpoint.
// A request for another URL, where the upstream redirects, gets neither,
// as net/http would not send them there either.
type urlSecretsTransport struct {
	endpoint, full *url.URL
	base           http.RoundTripper
}

func (t *urlSecretsTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	u := r.URL
	if (t.full.RawQuery == "" && t.full.User == nil) || u.Scheme != t.endpoint.Scheme || u.Host != t.endpoint.Host ||
		u.EscapedPath() != t.endpoint.EscapedPath() || u.RawQuery != "" {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.URL.RawQuery = t.full.RawQuery
	if user := t.full.User; user != nil && r.Header.Get("Authorization") == "" {
		password, _ := user.Password()
		r.SetBasicAuth(user.Username(), password)
	}
	return t.base.RoundTrip(r)
}

type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// expandHeaders fills ${VAR} in header values from the environment, so that
// a token need not be written into the configuration file.
func expandHeaders(h map[string]string) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = os.Expand(v, os.Getenv)
	}
	return out
}

// sleep waits for d or until ctx is done, and reports whether it slept.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
