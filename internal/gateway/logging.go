//lint:file-ignore SA1019 logging is deprecated as of MCP 2026-07-28, but upstreams and clients of 2025-11-25 use it; the gateway passes it through while they do.

package gateway

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Log messages of the upstreams (notifications/message) go to clients by
// the rule of their requests (inflight.go): to the client of the one
// operation a message belongs to, on that operation's stream, and only
// while it runs; it reaches the client before the operation's result. Any
// other message is dropped and counted, never sent to another key's or
// account's client on a guess. The stdio gateway has one client, which
// also gets the messages that belong to none of its operations.
//
// Each client gets only the messages at or above the level it set
// (logging/setLevel, or the level in a request's _meta in 2026-07-28): the
// SDK filters them per session. An upstream is set to the most verbose
// level any connected client set, and set again as they change, as their
// sessions end, and when it reconnects.

// logHook takes an upstream's log message and what it belongs to.
type logHook = func(u *upstream, p *mcp.LoggingMessageParams, a attribution)

// logQueue bounds the log messages of one operation that wait for its client;
// more are dropped.
const logQueue = 256

// logMessageOf decodes a log message, or returns nil for any other
// message.
func logMessageOf(msg jsonrpc.Message) *mcp.LoggingMessageParams {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.IsCall() || req.Method != "notifications/message" {
		return nil
	}
	var p mcp.LoggingMessageParams
	if json.Unmarshal(req.Params, &p) != nil {
		return nil
	}
	return &p
}

// taps take what an upstream sends besides its answers, in its order on
// the wire (tapConn, sseTap): progress (progressRoutes), log messages,
// and the requests that are passed on, which are stamped with what they
// belong to (inflight.go).
type taps struct {
	progress func(*mcp.ProgressNotificationParams)
	logged   func(*mcp.LoggingMessageParams, attribution)
	stamp    func(*jsonrpc.Request, attribution)
}

// taps returns the upstream's taps.
func (u *upstream) taps() taps {
	t := taps{stamp: u.hooks.stamp}
	if u.hooks.progress != nil {
		t.progress = func(p *mcp.ProgressNotificationParams) { u.hooks.progress(u, p) }
	}
	if u.hooks.logged != nil {
		t.logged = func(p *mcp.LoggingMessageParams, a attribution) { u.hooks.logged(u, p, a) }
	}
	return t
}

// take hands a message to its tap, if it has one. attribute tells what
// the message belongs to; it is asked only for a log message or a
// request.
func (t taps) take(msg jsonrpc.Message, attribute func() attribution) {
	if p := progressOf(msg); p != nil {
		if t.progress != nil {
			t.progress(p)
		}
	} else if p := logMessageOf(msg); p != nil {
		if t.logged != nil {
			t.logged(p, attribute())
		}
	} else if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && stamped[req.Method] && t.stamp != nil {
		t.stamp(req, attribute())
	}
}

// withLoggingCapability adds logging to the capabilities; advertise takes
// it away where no upstream logs.
func withLoggingCapability(c *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	c.Logging = &mcp.LoggingCapabilities{}
	return c
}

func logs(c *mcp.ServerCapabilities) bool { return c.Logging != nil }

func withoutLogging(c *mcp.ServerCapabilities) { c.Logging = nil }

// upstreamLogged takes an upstream's log message as its connection reads
// it, before any message read after it (taps), with what it belongs to.
// It never blocks.
func (g *Gateway) upstreamLogged(u *upstream, p *mcp.LoggingMessageParams, a attribution) {
	msg := *p
	if msg.Logger == "" {
		msg.Logger = u.cfg.Name
	} else {
		msg.Logger = u.cfg.Name + "/" + msg.Logger
	}
	if c := a.call; c != nil {
		g.relay.pass.mu.Lock()
		if !c.ended {
			queued := c.queueLog(&msg, g.fixed != nil)
			g.relay.pass.mu.Unlock()
			if !queued {
				g.droppedLog(u, "the operation's queue is full")
			}
			return
		}
		g.relay.pass.mu.Unlock()
		a.why = whyEnded
	}
	if g.fixed != nil {
		go func() {
			for ss := range g.server.Sessions() {
				_ = ss.Log(context.Background(), &msg)
			}
		}()
		return
	}
	g.droppedLog(u, a.why)
}

// droppedLog counts a log message of u that went to no client; the
// message itself is not logged: it may be any key's.
func (g *Gateway) droppedLog(u *upstream, why string) {
	n := g.relay.pass.dropped.Add(1)
	u.log.Debug("upstream log message passed on to no client", "why", why, "dropped", n)
}

// queueLog queues a log message for the call's client, starting its
// delivery on the first; false when the queue is full. stdio: the
// client is the stdio gateway's. Under passthrough.mu.
func (c *runningCall) queueLog(p *mcp.LoggingMessageParams, stdio bool) bool {
	if c.logs == nil {
		c.logs = make(chan *mcp.LoggingMessageParams, logQueue)
		c.delivered = make(chan struct{})
		go c.deliverLogs(stdio)
	}
	select {
	case c.logs <- p:
		return true
	default:
		return false
	}
}

// deliverLogs sends the call's log messages to its client, in order, on
// the call's stream (its context), at the level the client set: the
// SDK takes it from the request's _meta in 2026-07-28, and from the
// client's logging/setLevel before.
//
// A client of the stdio gateway that speaks 2026-07-28 may still have set
// its level with logging/setLevel (the Go SDK's client sends it), and puts
// none in its requests, whose _meta would then hold back every message:
// it has one stream, and its messages go out on none in particular, at the
// level it set.
func (c *runningCall) deliverLogs(stdio bool) {
	defer close(c.delivered)
	ctx := c.ctx
	if ip := c.ss.InitializeParams(); stdio && !c.metaLevel && ip != nil && ip.ProtocolVersion >= newProtocolVersion {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		defer context.AfterFunc(c.ctx, cancel)()
	}
	for p := range c.logs {
		if c.ctx.Err() != nil {
			continue // the call is over for the client: drain
		}
		_ = c.ss.Log(ctx, p)
	}
}

// logLevels are the levels the clients set, and what the upstreams were
// set to.
type logLevels struct {
	mu sync.Mutex
	// clients are the levels of the connected sessions that set one.
	clients map[*mcp.ServerSession]mcp.LoggingLevel
	// applyMu makes one change of the upstreams' level at a time, so that
	// an older one never ends up last.
	applyMu sync.Mutex
	// applied is the level each upstream's session was set to, under
	// applyMu.
	applied map[*upstream]appliedLevel
}

type appliedLevel struct {
	cs    *mcp.ClientSession
	level mcp.LoggingLevel
}

// levelOrder ranks the levels from the most verbose.
var levelOrder = map[mcp.LoggingLevel]int{"debug": 0, "info": 1, "notice": 2, "warning": 3,
	"error": 4, "critical": 5, "alert": 6, "emergency": 7}

// setLevelTimeout bounds an upstream's answer to logging/setLevel.
var setLevelTimeout = connectTimeout

// quietest is the level an upstream is set back to when no client wants
// its messages any more: the protocol has no level that turns them off.
const quietest mcp.LoggingLevel = "emergency"

// setLevel passes a client's logging/setLevel, which the SDK took as the
// client's own, on to the upstreams that log, as the most verbose level of
// any connected client.
func (g *Gateway) setLevel(ctx context.Context, req mcp.Request) {
	r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams])
	if !ok || r.Params == nil || r.Session == nil {
		return
	}
	if _, known := levelOrder[r.Params.Level]; !known {
		return
	}
	l := &g.relay.levels
	l.mu.Lock()
	if l.clients == nil {
		l.clients = map[*mcp.ServerSession]mcp.LoggingLevel{}
	}
	if _, known := l.clients[r.Session]; !known {
		ss := r.Session
		go func() {
			_ = ss.Wait()
			l.mu.Lock()
			delete(l.clients, ss)
			l.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), connectTimeout)
			defer cancel()
			g.applyLevels(ctx)
		}()
	}
	l.clients[r.Session] = r.Params.Level
	l.mu.Unlock()
	g.applyLevels(ctx)
}

// wanted is the most verbose level a connected client set; "" when none
// set one.
func (l *logLevels) wanted() mcp.LoggingLevel {
	l.mu.Lock()
	defer l.mu.Unlock()
	var want mcp.LoggingLevel
	for _, level := range l.clients {
		if want == "" || levelOrder[level] < levelOrder[want] {
			want = level
		}
	}
	return want
}

// applyLevels sets each upstream that logs to the level the clients want,
// where it is not already. An upstream no client wants messages of any
// more is set to the quietest level; one that was never set is left as it
// is.
func (g *Gateway) applyLevels(ctx context.Context) {
	l := &g.relay.levels
	l.applyMu.Lock()
	defer l.applyMu.Unlock()
	want := l.wanted()
	for _, u := range g.upstreams {
		if caps := u.snapshot().caps; caps == nil || !logs(caps) {
			continue
		}
		cs, err := u.current()
		if err != nil {
			continue // set when it connects
		}
		if r := cs.InitializeResult(); r == nil || r.ProtocolVersion >= newProtocolVersion {
			continue // the protocol has no logging/setLevel
		}
		level, prev := want, l.applied[u]
		if level == "" {
			if prev.cs != cs {
				continue
			}
			level = quietest
		}
		if prev == (appliedLevel{cs, level}) {
			continue
		}
		// Bounded: applyMu is held, and the context of a client's request
		// may have no end.
		sctx, cancel := context.WithTimeout(ctx, setLevelTimeout)
		err = cs.SetLoggingLevel(sctx, &mcp.SetLoggingLevelParams{Level: level})
		cancel()
		if err != nil {
			u.log.Warn("logging/setLevel", "err", err)
			continue
		}
		if l.applied == nil {
			l.applied = map[*upstream]appliedLevel{}
		}
		l.applied[u] = appliedLevel{cs, level}
	}
}

// upstreamConnected sets a new session of an upstream to the level the
// clients want.
func (g *Gateway) upstreamConnected(*upstream) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		g.applyLevels(ctx)
	}()
}
