// Package client is the Go client of countersign's v1 API. Every client
// role of the binary (the rm wrapper, the hook, the gateway, the terminal
// approver) talks to the server only through it.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/countersign/countersign/client/api"
)

// Client calls one countersign server with one credential: an agent key
// (csk_…) or an approver token (cst_…).
type Client struct {
	BaseURL    string
	Credential string
	HTTP       *http.Client
	// AcceptEdits says that the caller runs the action of an approval as
	// approved: the consumed request's Arguments, which an approver may
	// have edited, never the ones it asked with. Without it, Consume of
	// an edited approval is refused (ECONFLICT) and nothing is consumed.
	AcceptEdits bool
}

// New returns a client of the server at baseURL.
func New(baseURL, credential string) *Client {
	return &Client{
		BaseURL:    strings.TrimRight(baseURL, "/"),
		Credential: credential,
		// No overall timeout: long polls set their own through ctx.
		HTTP: &http.Client{Transport: http.DefaultTransport},
	}
}

// The API's types live in package api, which agent-side code can import
// without an HTTP client; these are the same types.
type (
	// Request is a request as the API shows it.
	Request = api.Request
	// Context is where the agent was when it asked.
	Context = api.Context
	// CreateInput is what an agent asks about.
	CreateInput = api.CreateInput
	// Scope is the shape of an action as the agent states it.
	Scope = api.Scope
	// Decision is what an approver decides.
	Decision = api.Decision
	// Edit is an approver's change of a request's action, with approve.
	Edit = api.Edit
	// Original is the action as the agent asked for it, on a request an
	// approver edited before approving.
	Original = api.Original
	// RanInput is what a coding agent's hook reports after a call ran.
	RanInput = api.RanInput
	// Ran is what the server recorded of what ran.
	Ran = api.Ran
	// Error is an error answer of the server.
	Error = api.Error
)

// ErrUnreachable wraps every failure to reach the server or to understand
// its answer, so that callers can fail closed with a clear message.
var ErrUnreachable = api.ErrUnreachable

// Create asks for a decision. created is false when an identical live
// request of the same key was returned instead.
func (c *Client) Create(ctx context.Context, in CreateInput) (r *Request, created bool, err error) {
	status, err := c.doIdempotent(ctx, http.MethodPost, "/api/v1/requests", in, &r)
	r, err = checked(r, err, "", "")
	return r, err == nil && status == http.StatusCreated, err
}

// Get returns a request of the client's key.
func (c *Client) Get(ctx context.Context, id string) (*Request, error) {
	var r *Request
	_, err := c.do(ctx, http.MethodGet, "/api/v1/requests/"+url.PathEscape(id), nil, &r)
	return checked(r, err, id, "")
}

// checked refuses an answer that is not the request asked about (a proxy
// or a wrong URL answering 200 with null, {} or another request) as
// garbage, so that no caller mistakes it for a state. Callers fail closed
// on ErrUnreachable. want, when set, is the status the call must produce.
func checked(r *Request, err error, id, want string) (*Request, error) {
	switch {
	case err != nil:
		return nil, err
	case r == nil || r.ID == "" || r.Status == "" || (id != "" && r.ID != id):
		return nil, fmt.Errorf("%w: the answer is not the request asked about", ErrUnreachable)
	case want != "" && r.Status != want:
		return nil, fmt.Errorf("%w: the answer says %q, not %q", ErrUnreachable, r.Status, want)
	}
	return r, nil
}

// Wait long-polls a request for up to wait (the server holds at most 60 s)
// and returns its state when it changed or the wait ended.
func (c *Client) Wait(ctx context.Context, id string, wait time.Duration) (*Request, error) {
	var r *Request
	path := "/api/v1/requests/" + url.PathEscape(id) + "?wait=" + url.QueryEscape(wait.String())
	ctx, cancel := context.WithTimeout(ctx, wait+15*time.Second)
	defer cancel()
	_, err := c.do(ctx, http.MethodGet, path, nil, &r)
	return checked(r, err, id, "")
}

// Consume uses an approval, once.
func (c *Client) Consume(ctx context.Context, id string) (*Request, error) {
	var r *Request
	_, err := c.doIdempotent(ctx, http.MethodPost, "/api/v1/requests/"+url.PathEscape(id)+"/consume", nil, &r)
	return checked(r, err, id, "consumed")
}

// Take consumes, once, an approved request of the client's key with the
// binding of in (kind, action, arguments, preview). With AcceptEdits, an
// approval an approver edited is found by the binding of in as asked, and
// the answer carries the edited Arguments to run. Errors: a *Error with
// code not_found when there is none, conflict for an edited approval
// without AcceptEdits.
func (c *Client) Take(ctx context.Context, in CreateInput) (*Request, error) {
	var r *Request
	_, err := c.do(ctx, http.MethodPost, "/api/v1/requests/take", in, &r)
	return checked(r, err, "", "consumed")
}

// ReportRan reports what ran for one of the agent's calls, after the
// fact, and returns the request whose approval the call consumed, with
// what the server recorded (its Ran). Errors: a *Error with code
// not_found when the call consumed no approval of this key.
func (c *Client) ReportRan(ctx context.Context, in RanInput) (*Request, error) {
	var r *Request
	_, err := c.do(ctx, http.MethodPost, "/api/v1/requests/ran", in, &r)
	r, err = checked(r, err, "", "consumed")
	if err == nil && r.Ran == nil {
		return nil, fmt.Errorf("%w: the answer records nothing of what ran", ErrUnreachable)
	}
	return r, err
}

// Cancel gives up a pending request.
func (c *Client) Cancel(ctx context.Context, id string) (*Request, error) {
	var r *Request
	_, err := c.do(ctx, http.MethodPost, "/api/v1/requests/"+url.PathEscape(id)+"/cancel", nil, &r)
	return checked(r, err, id, "")
}

// List returns the requests of the approver's account with the status
// (any when empty), newest first.
func (c *Client) List(ctx context.Context, status string, limit int) ([]*Request, error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if limit > 0 {
		q.Set("limit", fmt.Sprint(limit))
	}
	var out struct {
		Requests []*Request `json:"requests"`
	}
	_, err := c.do(ctx, http.MethodGet, "/api/v1/requests?"+q.Encode(), nil, &out)
	return out.Requests, err
}

// Find returns the approver's account's newest request with the
// reference code ref (as K7F-2QX or K7F2QX), or an *Error of status 404
// when there is none.
func (c *Client) Find(ctx context.Context, ref string) (*Request, error) {
	q := url.Values{"reference": {ref}, "limit": {"1"}}
	var out struct {
		Requests []*Request `json:"requests"`
	}
	if _, err := c.do(ctx, http.MethodGet, "/api/v1/requests?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	if len(out.Requests) == 0 {
		return nil, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no such request"}
	}
	return out.Requests[0], nil
}

// Decide records a decision on a request, named by id or reference code.
func (c *Client) Decide(ctx context.Context, idOrRef string, d Decision) (*Request, error) {
	var r *Request
	_, err := c.doIdempotent(ctx, http.MethodPost, "/api/v1/requests/"+url.PathEscape(idOrRef)+"/decision", d, &r)
	return checked(r, err, "", "")
}

// retryPauses are the pauses before the second and third tries of a call
// whose connection was lost.
var retryPauses = []time.Duration{200 * time.Millisecond, time.Second}

// doIdempotent sends a change with an Idempotency-Key of its own and, when
// the connection is lost before an answer came (the server restarted, a
// proxy dropped it), sends it again with the same key: the server answers
// a retry of a change it made with the first answer and changes nothing,
// so a consumption whose answer was lost is not taken for another's.
func (c *Client) doIdempotent(ctx context.Context, method, path string, in, out any) (int, error) {
	key := newIdempotencyKey()
	for try := 0; ; try++ {
		status, err := c.send(ctx, method, path, key, in, out)
		var lost *lostConnection
		if !errors.As(err, &lost) || try == len(retryPauses) {
			return status, err
		}
		select {
		case <-time.After(retryPauses[try]):
		case <-ctx.Done():
			return status, err
		}
	}
}

// newIdempotencyKey returns 128 random bits, hex.
func newIdempotencyKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// lostConnection is a call whose connection failed before its answer
// was read: whether the server acted on it is not known.
type lostConnection struct{ err error }

func (e *lostConnection) Error() string { return e.err.Error() }
func (e *lostConnection) Unwrap() error { return e.err }

// do sends one API call and decodes the answer into out.
func (c *Client) do(ctx context.Context, method, path string, in, out any) (int, error) {
	return c.send(ctx, method, path, "", in, out)
}

// send sends one API call, with the Idempotency-Key when not empty, and
// decodes the answer into out.
func (c *Client) send(ctx context.Context, method, path, key string, in, out any) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, body)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+c.Credential)
	req.Header.Set("Accept", "application/json")
	if c.AcceptEdits {
		req.Header.Set(api.AcceptEditHeader, "1")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, &lostConnection{fmt.Errorf("%w: %v", ErrUnreachable, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return resp.StatusCode, &lostConnection{fmt.Errorf("%w: reading the answer: %v", ErrUnreachable, err)}
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(data, &e) != nil || e.Error.Code == "" {
			return resp.StatusCode, fmt.Errorf("%w: status %d without an error body", ErrUnreachable, resp.StatusCode)
		}
		return resp.StatusCode, &Error{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return resp.StatusCode, fmt.Errorf("%w: the answer is not the expected JSON", ErrUnreachable)
	}
	return resp.StatusCode, nil
}
