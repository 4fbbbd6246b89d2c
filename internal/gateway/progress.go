package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressRoutes carries the progress notifications of an upstream call to
// the client that asked for them: each forwarded call gets a token of its
// own, since tokens of different clients may be the same.
//
// Every notification an upstream sent before its result must reach the
// client before the gateway's result. The SDK hands an upstream's
// notifications to a handler queue but its results straight to the caller,
// so a handler of the SDK may see the last progress after the call
// returned. The gateway reads progress off the upstream's messages in
// their order on the wire instead (tapConn, sseTap), queues it on its
// route, and a call ends its route only once the queue is delivered.
type progressRoutes struct {
	mu   sync.Mutex
	next uint64
	m    map[string]*progressRoute
}

type progressRoute struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any
	queue chan *mcp.ProgressNotificationParams
	done  chan struct{} // closed once the queue is delivered
}

// progressQueue bounds the notifications of one call that wait for the
// client; more are dropped (a flood of them tells nothing more).
const progressQueue = 256

// route returns the token to send upstream (nil when the client asked for
// no progress) and a function that ends the route once everything queued
// on it reached the client (or the call's context ended).
func (r *progressRoutes) route(ctx context.Context, req *mcp.CallToolRequest) (any, func()) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return nil, func() {}
	}
	rt := &progressRoute{ctx: ctx, ss: req.Session, token: tok,
		queue: make(chan *mcp.ProgressNotificationParams, progressQueue), done: make(chan struct{})}
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]*progressRoute{}
	}
	r.next++
	id := fmt.Sprintf("countersign-%d", r.next)
	r.m[id] = rt
	r.mu.Unlock()
	go rt.deliver()
	return id, func() {
		r.mu.Lock()
		delete(r.m, id)
		close(rt.queue) // under mu: deliver never sends on it after this
		r.mu.Unlock()
		<-rt.done
	}
}

// deliver passes the route's progress to the client, in order, under the
// client's own token.
func (rt *progressRoute) deliver() {
	defer close(rt.done)
	for p := range rt.queue {
		if rt.ctx.Err() != nil {
			continue // the call is over for the client: drain
		}
		_ = rt.ss.NotifyProgress(rt.ctx, &mcp.ProgressNotificationParams{ProgressToken: rt.token,
			Progress: p.Progress, Total: p.Total, Message: p.Message})
	}
}

// deliver queues an upstream's progress on its route. It never blocks: it
// runs on the upstream's read loop.
func (r *progressRoutes) deliver(p *mcp.ProgressNotificationParams) {
	id, _ := p.ProgressToken.(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt, ok := r.m[id]; ok {
		select {
		case rt.queue <- p:
		default:
		}
	}
}

// progressOf decodes a progress notification, or returns nil for any other
// message.
func progressOf(msg jsonrpc.Message) *mcp.ProgressNotificationParams {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.IsCall() || req.Method != "notifications/progress" {
		return nil
	}
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(req.Params, &p) != nil {
		return nil
	}
	return &p
}

// tapped reports whether an event's data may hold a tapped notification.
func tapped(data []byte) bool {
	return bytes.Contains(data, []byte("notifications/progress")) || bytes.Contains(data, []byte("notifications/message"))
}

// tapTransport hands every tapped notification of a stdio upstream to tap
// as the connection reads it, before any message read after it.
type tapTransport struct {
	mcp.Transport
	tap taps
}

func (t *tapTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &tapConn{Connection: c, tap: t.tap}, nil
}

type tapConn struct {
	mcp.Connection
	tap taps
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	c.tap.take(msg)
	return msg, err
}

// sseTapTransport does what tapTransport does for an HTTP upstream, on the
// bytes of its event streams: the SDK's streamable connection must not be
// wrapped (it has unexported methods of its own that the SDK looks for).
type sseTapTransport struct {
	base http.RoundTripper
	tap  taps
}

func (t *sseTapTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body = &sseTap{ReadCloser: resp.Body, tap: t.tap}
	}
	return resp, err
}

// maxTapEvent bounds the event the tap keeps while it is read; a longer
// one (a large result) is passed on without being looked at.
const maxTapEvent = 1 << 20

// sseTap reads server-sent events as they pass and taps the tapped
// notifications among them before the reader gets their bytes.
type sseTap struct {
	io.ReadCloser
	tap      taps
	line     []byte
	data     []byte
	overlong bool // the current event is over maxTapEvent
}

func (t *sseTap) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.feed(p[:n])
	return n, err
}

func (t *sseTap) feed(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			t.add(b)
			return
		}
		t.add(b[:i])
		t.endLine()
		b = b[i+1:]
	}
}

func (t *sseTap) add(b []byte) {
	if len(t.line)+len(b) > maxTapEvent {
		t.overlong, t.line = true, t.line[:0]
		return
	}
	t.line = append(t.line, b...)
}

// endLine takes a complete line: a data line adds to the event, an empty
// one ends it.
func (t *sseTap) endLine() {
	line := bytes.TrimSuffix(t.line, []byte("\r"))
	t.line = t.line[:0]
	switch {
	case len(line) == 0:
		if len(t.data) > 0 && !t.overlong && tapped(t.data) {
			if msg, err := jsonrpc.DecodeMessage(t.data); err == nil {
				t.tap.take(msg)
			}
		}
		t.data, t.overlong = t.data[:0], false
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
		if len(t.data)+len(v) > maxTapEvent {
			t.overlong = true
			return
		}
		if len(t.data) > 0 {
			t.data = append(t.data, '\n')
		}
		t.data = append(t.data, v...)
	}
}
