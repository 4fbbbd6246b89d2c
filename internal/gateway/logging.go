//lint:file-ignore SA1019 logging is deprecated as of MCP 2026-07-28, but upstreams and clients of 2025-11-25 use it; the stdio gateway passes it through while they do.

package gateway

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// logHook takes an upstream's log message.
type logHook = func(u *upstream, p *mcp.LoggingMessageParams)

// addLogging has the upstream's client hand its log messages to hook.
func addLogging(opts *mcp.ClientOptions, u *upstream, hook logHook) {
	if hook != nil {
		opts.LoggingMessageHandler = func(_ context.Context, r *mcp.LoggingMessageRequest) { hook(u, r.Params) }
	}
}

// withLoggingCapability adds logging to the capabilities; advertise takes
// it away where nothing is passed through.
func withLoggingCapability(c *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	c.Logging = &mcp.LoggingCapabilities{}
	return c
}

func logs(c *mcp.ServerCapabilities) bool { return c.Logging != nil }

func withoutLogging(c *mcp.ServerCapabilities) { c.Logging = nil }

// upstreamLogged passes an upstream's log message on to the client of a
// stdio gateway, which the SDK sends at the level the client set. The
// /mcp endpoint passes none on: an upstream serves every key of every
// account, and its log cannot be told apart by key.
func (g *Gateway) upstreamLogged(u *upstream, p *mcp.LoggingMessageParams) {
	if g.fixed == nil {
		return
	}
	msg := *p
	if msg.Logger == "" {
		msg.Logger = u.cfg.Name
	} else {
		msg.Logger = u.cfg.Name + "/" + msg.Logger
	}
	go func() {
		for ss := range g.server.Sessions() {
			_ = ss.Log(context.Background(), &msg)
		}
	}()
}

// setLevel passes a client's logging/setLevel on to the upstreams that log
// (stdio gateway only: see upstreamLogged), then lets the SDK keep it.
func (g *Gateway) setLevel(ctx context.Context, req mcp.Request) {
	r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams])
	if !ok || g.fixed == nil {
		return
	}
	for _, u := range g.upstreams {
		if !logs(u.snapshot().caps) {
			continue
		}
		if cs, err := u.current(); err == nil {
			if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: r.Params.Level}); err != nil {
				u.log.Warn("logging/setLevel", "err", err)
			}
		}
	}
}
