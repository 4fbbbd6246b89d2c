package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
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
	cfg    UpstreamConfig
	log    *slog.Logger
	stderr io.Writer // where a command's stderr goes
	client *mcp.Client
	// changed is called, outside any lock, when the tool list changed.
	changed func()
	// progress takes the upstream's progress notifications, in their
	// order on the wire, on its read loop.
	progress func(*mcp.ProgressNotificationParams)

	mu      sync.Mutex
	session *mcp.ClientSession
	gen     int // counts sessions, so that a late list of an old one is dropped
	tools   []*mcp.Tool
	down    string // why there is no session
	// settled is closed after the first attempt to connect, whether it
	// succeeded or not, so that start-up never waits on a broken upstream.
	settled chan struct{}
	once    sync.Once
	kick    chan struct{}
}

func newUpstream(cfg UpstreamConfig, log *slog.Logger, stderr io.Writer, progress func(*mcp.ProgressNotificationParams), changed func()) *upstream {
	u := &upstream{cfg: cfg, log: log.With("upstream", cfg.Name), stderr: stderr, changed: changed,
		down: "starting", settled: make(chan struct{}), kick: make(chan struct{}, 1)}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "countersign-gateway", Version: "1"}, &mcp.ClientOptions{
		Logger: quiet(log),
		// No roots: the upstream works on what its own configuration names.
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(ctx context.Context, _ *mcp.ToolListChangedRequest) {
			// Notifications are handled on the connection's read loop: the
			// list call must not run there, or it would wait for itself.
			go u.refresh(context.WithoutCancel(ctx))
		},
		// No ProgressNotificationHandler: progress is read off the
		// messages in their order (see progressRoutes).
	})
	u.progress = progress
	return u
}

// run keeps the upstream connected until ctx is done.
func (u *upstream) run(ctx context.Context) {
	backoff := minBackoff
	for ctx.Err() == nil {
		cs, err := u.connect(ctx)
		u.once.Do(func() { close(u.settled) })
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

// connect starts or dials the server and lists its tools.
func (u *upstream) connect(ctx context.Context) (*mcp.ClientSession, error) {
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	cs, err := u.client.Connect(cctx, u.transport(), u.sessionOptions())
	if err != nil {
		return nil, err
	}
	tools, err := listTools(cctx, cs)
	if err != nil {
		cs.Close()
		return nil, fmt.Errorf("list tools: %w", err)
	}
	u.mu.Lock()
	u.session, u.tools, u.down = cs, tools, ""
	u.gen++
	u.mu.Unlock()
	u.log.Info("upstream connected", "tools", len(tools))
	u.changed()
	return cs, nil
}

// transport builds the upstream's transport: a fresh process, or the URL
// with the configured headers.
func (u *upstream) transport() mcp.Transport {
	if u.cfg.URL != "" {
		return &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: &http.Client{
			Transport: &sseTapTransport{tap: u.progress,
				base: &headerTransport{headers: expandHeaders(u.cfg.Headers), base: http.DefaultTransport}},
		}}
	}
	// Not exec.CommandContext: the process outlives the connect call, and
	// ends when its session is closed.
	cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
	cmd.Env = os.Environ()
	for k, v := range u.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+os.Expand(v, os.Getenv))
	}
	cmd.Stderr = u.stderr
	return &tapTransport{Transport: &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, tap: u.progress}
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

// refresh lists the tools again after a list_changed notification.
func (u *upstream) refresh(ctx context.Context) {
	u.mu.Lock()
	cs, gen := u.session, u.gen
	u.mu.Unlock()
	if cs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	tools, err := listTools(ctx, cs)
	if err != nil {
		u.log.Warn("list tools after list_changed", "err", err)
		return
	}
	u.mu.Lock()
	if u.gen != gen {
		u.mu.Unlock()
		return // a newer session listed its own
	}
	u.tools = tools
	u.mu.Unlock()
	u.log.Info("upstream tools changed", "tools", len(tools))
	u.changed()
}

func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// snapshot returns the tools of the current or last session.
func (u *upstream) snapshot() []*mcp.Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.tools
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

// headerTransport adds the configured headers to every request.
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
