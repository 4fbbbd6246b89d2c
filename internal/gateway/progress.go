package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// progressRoutes carries the progress notifications of an upstream call to
// the client that asked for them: each forwarded call gets a token of its
// own, since tokens of different clients may be the same. The token is
// random and its route takes progress only from the upstream the call
// went to: another upstream, which may serve another account's clients,
// can neither guess it nor send on it.
//
// Every notification an upstream sent before its result must reach the
// client before the gateway's result. The SDK hands an upstream's
// notifications to a handler queue but its results straight to the caller,
// so a handler of the SDK may see the last progress after the call
// returned. The gateway reads progress off the upstream's messages in
// their order on the wire instead (tapConn, sseTap), queues it on its
// route, and a call ends its route only once the queue is delivered.
type progressRoutes struct {
	mu sync.Mutex
	m  map[string]*progressRoute
}

type progressRoute struct {
	up    *upstream // the only upstream whose progress the route takes
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
func (r *progressRoutes) route(ctx context.Context, req *mcp.CallToolRequest, up *upstream) (any, func()) {
	tok := req.Params.GetProgressToken()
	if tok == nil || req.Session == nil {
		return nil, func() {}
	}
	rt := &progressRoute{up: up, ctx: ctx, ss: req.Session, token: tok,
		queue: make(chan *mcp.ProgressNotificationParams, progressQueue), done: make(chan struct{})}
	id := "countersign-" + rand.Text()
	r.mu.Lock()
	if r.m == nil {
		r.m = map[string]*progressRoute{}
	}
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

// deliver queues the progress of upstream u on its route, when the route
// is of a call to u. It never blocks: it runs on the upstream's read loop.
func (r *progressRoutes) deliver(u *upstream, p *mcp.ProgressNotificationParams) {
	id, _ := p.ProgressToken.(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	if rt, ok := r.m[id]; ok && rt.up == u {
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

// tapped reports whether an event's data may hold a message the taps
// take.
func tapped(data []byte) bool {
	for _, m := range tappedMethods {
		if bytes.Contains(data, m) {
			return true
		}
	}
	return false
}

var tappedMethods = [][]byte{[]byte("notifications/progress"), []byte("notifications/message"),
	[]byte("sampling/createMessage"), []byte("elicitation/create"), []byte("roots/list")}

// tapTransport hands what a stdio upstream sends besides its answers to
// tap as the connection reads it, before any message read after it, and
// keeps the requests in flight on the connection (flights), which tell
// what a message read belongs to.
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
	tap     taps
	flights flights
}

func (c *tapConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		c.flights.closed()
		return msg, err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.flights.answered(resp.ID)
		return msg, nil
	}
	c.tap.take(msg, c.flights.attribution)
	return msg, nil
}

// Write keeps a request in flight from before it is written: its answer
// may be read before Write returns.
func (c *tapConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		return c.Connection.Write(ctx, msg)
	}
	c.flights.sent(req.ID, operationOf(ctx))
	err := c.Connection.Write(ctx, msg)
	if err != nil {
		c.flights.answered(req.ID)
	}
	return err
}

// sseTapTransport does what tapTransport does for an HTTP upstream, on the
// bytes of its event streams: the SDK's streamable connection must not be
// wrapped (it has unexported methods of its own that the SDK looks for).
// A request's POST, and the GET that resumes its stream, carry the
// request's context, and so the operation it was sent for: what comes on
// that stream belongs to it.
type sseTapTransport struct {
	base http.RoundTripper
	tap  taps
}

func (t *sseTapTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		o := operationOf(r.Context())
		attribute := o.attribution
		if o == nil && r.Method == http.MethodGet {
			attribute = func() attribution { return attribution{why: whyStream} }
		}
		resp.Body = newSSETap(resp.Body, t.tap, attribute)
	}
	return resp, err
}

// maxTapEvent bounds the event the tap holds while it is read; a longer
// one (a large result) is passed on without being looked at.
const maxTapEvent = 1 << 20

// sseTap passes server-sent events on, event by event, once it has handed
// the messages the taps take among them to the taps (and stamped the
// requests, whose data it passes on as stamped). Lines other than data
// pass at once; an event's data lines are held until the event ends.
type sseTap struct {
	body io.ReadCloser
	in   *bufio.Reader
	tap  taps
	// attribute tells what the stream's messages belong to.
	attribute func() attribution
	out       []byte // what the reader gets next
	err       error  // the body's, once out is read
	line      []byte // the line being read
	held      []byte // the event's data lines, as they came
	data      []byte // their values, joined
	name      string // the event's type
	// passing: the rest of an event too long to hold passes as it came;
	// inLine: in the middle of one of its lines.
	passing, inLine bool
}

func newSSETap(body io.ReadCloser, tap taps, attribute func() attribution) *sseTap {
	return &sseTap{body: body, in: bufio.NewReader(body), tap: tap, attribute: attribute}
}

func (t *sseTap) Close() error { return t.body.Close() }

func (t *sseTap) Read(p []byte) (int, error) {
	for len(t.out) == 0 && t.err == nil {
		t.step()
	}
	if len(t.out) == 0 {
		return 0, t.err
	}
	n := copy(p, t.out)
	t.out = t.out[n:]
	return n, nil
}

// step reads on to the end of a line, or what the buffer holds of it.
func (t *sseTap) step() {
	b, err := t.in.ReadSlice('\n')
	partial := err == bufio.ErrBufferFull
	if len(b) > 0 {
		t.take(b, partial || err != nil)
	}
	if err != nil && !partial {
		// What is held goes out as it came, and then the end.
		t.out = append(append(t.out, t.held...), t.line...)
		t.held, t.line, t.err = nil, nil, err
	}
}

// take takes the bytes of a line; partial: the line goes on.
func (t *sseTap) take(b []byte, partial bool) {
	if t.passing {
		t.out = append(t.out, b...)
		if !t.inLine && !partial && len(trimEOL(b)) == 0 {
			t.passing = false // the long event ended
		}
		t.inLine = partial
		return
	}
	t.line = append(t.line, b...)
	if len(t.held)+len(t.line) > maxTapEvent {
		t.out = append(append(t.out, t.held...), t.line...)
		ended := !partial && len(trimEOL(t.line)) == 0
		t.held, t.data, t.line, t.name = t.held[:0], t.data[:0], t.line[:0], ""
		t.passing, t.inLine = !ended, partial
		return
	}
	if !partial {
		t.endLine()
	}
}

func trimEOL(b []byte) []byte {
	return bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
}

// endLine takes a complete line: a data line adds to the event, an empty
// one ends it, any other passes.
func (t *sseTap) endLine() {
	line := trimEOL(t.line)
	switch {
	case len(line) == 0:
		t.out = append(append(t.out, t.event()...), t.line...)
		t.held, t.data, t.name = t.held[:0], t.data[:0], ""
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
		if len(t.held) > 0 {
			t.data = append(t.data, '\n')
		}
		t.data = append(t.data, v...)
		t.held = append(t.held, t.line...)
	default:
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			t.name = string(bytes.TrimPrefix(v, []byte(" ")))
		}
		t.out = append(t.out, t.line...)
	}
	t.line = t.line[:0]
}

// event returns the data lines of the event that ended: as they came, or
// a request of the upstream, stamped, on one line.
func (t *sseTap) event() []byte {
	if len(t.data) == 0 || (t.name != "" && t.name != "message") || !tapped(t.data) {
		return t.held // the SDK passes on no message of another type
	}
	msg, err := jsonrpc.DecodeMessage(t.data)
	if err != nil {
		return t.held
	}
	req, isReq := msg.(*jsonrpc.Request)
	before := []byte(nil)
	if isReq {
		before = req.Params
	}
	t.tap.take(msg, t.attribute)
	if !isReq || bytes.Equal(before, req.Params) {
		return t.held
	}
	b, err := jsonrpc.EncodeMessage(req)
	if err != nil {
		return t.held
	}
	return append(append([]byte("data: "), b...), '\n')
}
