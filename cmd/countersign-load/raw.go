package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// The raw client (--client raw) speaks just enough HTTP/1.1 for the cycles
// scenario. The tool shares the machine's cores with the server it
// measures, and net/http with the full decoding of ./client spends about
// 140 µs of CPU per call: half a core at the cycles' rate, which the
// server then lacks. The raw client writes each request from precomputed
// header bytes in one write and reads the answer with a small, strict
// parser, on one kept-alive connection per goroutine. It sends the same
// routes, methods, queries, headers and bodies as ./client, and checks
// each answer at least as strictly (see rawConn.do).

// maxAnswer bounds an answer's body, as ./client does.
const maxAnswer = 4 << 20

// cyclesWait is how long the cycles' long polls ask the server to hold.
const cyclesWait = 30 * time.Second

// waitQuery is the long poll's query, as ./client's Wait writes it.
var waitQuery = "?wait=" + url.QueryEscape(cyclesWait.String())

// rawConn is one kept-alive HTTP/1.1 connection to the server, used by one
// goroutine for its calls, one after the other. It is never redialled: a
// broken connection fails the run.
type rawConn struct {
	conn   net.Conn
	r      *bufio.Reader
	header []byte // the headers every request has: Host, Authorization, Accept
	req    []byte // the request being written, reused
	body   []byte // the last answer's body, reused
	broken error  // why the connection can't be used any more
	stop   func() bool
}

// dialRaw connects to addr (host:port) with the credential. The connection
// is closed when ctx ends, so that a call blocked on it returns.
func dialRaw(ctx context.Context, addr, credential string) (*rawConn, error) {
	d := net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	c := &rawConn{conn: conn, r: bufio.NewReaderSize(conn, 4096)}
	c.header = fmt.Appendf(nil, "Host: %s\r\nAuthorization: Bearer %s\r\nAccept: application/json\r\n", addr, credential)
	c.stop = context.AfterFunc(ctx, func() { conn.Close() })
	return c, nil
}

// close closes the connection.
func (c *rawConn) close() {
	c.stop()
	c.conn.Close()
}

// request fills c.req with one request: the request line from the parts of
// its target, the common headers and, for a POST, the body with its length.
// A POST without a body is sent with Content-Length: 0 and no
// Content-Type, as net/http sends ./client's.
func (c *rawConn) request(method, path, id, suffix string, body []byte) {
	b := append(c.req[:0], method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, url.PathEscape(id)...)
	b = append(b, suffix...)
	b = append(b, " HTTP/1.1\r\n"...)
	b = append(b, c.header...)
	if len(body) > 0 {
		b = append(b, "Content-Type: application/json\r\n"...)
	}
	if method == "POST" {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	c.req = append(b, body...)
}

// roundTrip writes c.req in one write, calls wrote (when set) once it is
// written, and reads the answer: its status code and its body, which is
// valid until the next call.
func (c *rawConn) roundTrip(ctx context.Context, timeout time.Duration, wrote func()) (int, []byte, error) {
	if c.broken != nil {
		return 0, nil, c.broken
	}
	status, body, err := c.exchange(timeout, wrote)
	if err != nil {
		if ctx.Err() != nil {
			// The connection was closed because the run ended.
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		c.broken = fmt.Errorf("the connection broke earlier: %w", err)
	}
	return status, body, err
}

func (c *rawConn) exchange(timeout time.Duration, wrote func()) (int, []byte, error) {
	// A stuck server fails the run instead of hanging it.
	if err := c.conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return 0, nil, err
	}
	if _, err := c.conn.Write(c.req); err != nil {
		return 0, nil, fmt.Errorf("write the request: %w", err)
	}
	if wrote != nil {
		wrote()
	}
	status, closing, err := c.readHead()
	if err != nil {
		return status, nil, err
	}
	if err := c.readBody(); err != nil {
		return status, nil, err
	}
	if n := c.r.Buffered(); n > 0 {
		return status, nil, fmt.Errorf("%d bytes more than the Content-Length followed the answer", n)
	}
	if closing {
		// This answer is good, but the connection can't carry the next.
		c.broken = errors.New("the server closed the connection after the previous answer (Connection: close)")
	}
	return status, c.body, nil
}

// readHead reads the status line and the headers, and keeps the body's
// length in c.body. Only bodies with a Content-Length are understood.
func (c *rawConn) readHead() (status int, closing bool, err error) {
	line, err := c.readLine()
	if err != nil {
		return 0, false, fmt.Errorf("read the status line: %w", err)
	}
	if status, err = parseStatusLine(line); err != nil {
		return 0, false, err
	}
	length := -1
	for {
		line, err := c.readLine()
		if err != nil {
			return status, false, fmt.Errorf("read the headers: %w", err)
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(name) == 0 || name[0] == ' ' || name[0] == '\t' || bytes.ContainsAny(name, " \t") {
			return status, false, fmt.Errorf("malformed header line %q", line)
		}
		value = bytes.Trim(value, " \t")
		switch {
		case asciiEqualFold(name, "Content-Length"):
			n, err := parseLength(value)
			if err != nil || (length >= 0 && n != length) {
				return status, false, fmt.Errorf("bad Content-Length %q", value)
			}
			length = n
		case asciiEqualFold(name, "Transfer-Encoding"):
			return status, false, fmt.Errorf("the answer has Transfer-Encoding %q; this client reads only bodies with a Content-Length", value)
		case asciiEqualFold(name, "Connection"):
			closing = closing || hasToken(value, "close")
		}
	}
	switch {
	case status < 200:
		return status, false, fmt.Errorf("unexpected interim answer %d", status)
	case length < 0:
		return status, false, fmt.Errorf("the answer (status %d) has no Content-Length", status)
	case length > maxAnswer:
		return status, false, fmt.Errorf("the answer's Content-Length %d is over %d", length, maxAnswer)
	}
	if cap(c.body) < length {
		c.body = make([]byte, length)
	}
	c.body = c.body[:length]
	return status, closing, nil
}

// readBody reads exactly len(c.body) bytes.
func (c *rawConn) readBody() error {
	n, err := io.ReadFull(c.r, c.body)
	if err != nil {
		return fmt.Errorf("the body ends after %d of its %d bytes: %w", n, len(c.body), err)
	}
	return nil
}

// readLine reads one line ending in CRLF, without it. The line is valid
// until the next read.
func (c *rawConn) readLine() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("a line of the answer is longer than %d bytes", c.r.Size())
	case err == io.EOF && len(line) == 0:
		return nil, fmt.Errorf("the server closed the connection: %w", io.ErrUnexpectedEOF)
	case err != nil:
		return nil, err
	case len(line) < 2 || line[len(line)-2] != '\r':
		return nil, fmt.Errorf("a line of the answer does not end in CRLF: %q", line)
	}
	return line[:len(line)-2], nil
}

// parseStatusLine reads "HTTP/1.1 200 OK".
func parseStatusLine(line []byte) (int, error) {
	rest, ok := bytes.CutPrefix(line, []byte("HTTP/1.1 "))
	if !ok || len(rest) < 3 || (len(rest) > 3 && rest[3] != ' ') {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	status := 0
	for _, d := range rest[:3] {
		if d < '0' || d > '9' {
			return 0, fmt.Errorf("malformed status line %q", line)
		}
		status = status*10 + int(d-'0')
	}
	if status < 100 {
		return 0, fmt.Errorf("malformed status line %q", line)
	}
	return status, nil
}

// parseLength reads a Content-Length: decimal digits only.
func parseLength(v []byte) (int, error) {
	if len(v) == 0 || len(v) > 9 {
		return 0, errors.New("not a length")
	}
	n := 0
	for _, d := range v {
		if d < '0' || d > '9' {
			return 0, errors.New("not a length")
		}
		n = n*10 + int(d-'0')
	}
	return n, nil
}

// asciiEqualFold compares a header name with a canonical one, ignoring
// ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i]|0x20, s[i]|0x20
		if x != y || (x < 'a' || x > 'z') && b[i] != s[i] {
			return false
		}
	}
	return true
}

// hasToken reports whether a comma-separated header value holds token,
// ignoring case.
func hasToken(v []byte, token string) bool {
	for part := range bytes.SplitSeq(v, []byte(",")) {
		if asciiEqualFold(bytes.Trim(part, " \t"), token) {
			return true
		}
	}
	return false
}
