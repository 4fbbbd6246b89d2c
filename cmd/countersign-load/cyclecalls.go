package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"time"

	"github.com/countersign/countersign/client"
)

// agentCalls are one agent's calls in the cycles scenario, through ./client
// (--client go) or the raw client (--client raw). Each returns the request
// id and status of the answer; an error names the call.
type agentCalls interface {
	// create asks for a decision for iteration iter of agent a; created
	// is false when the server returned an existing identical request.
	create(ctx context.Context, a, iter int) (id, status string, created bool, err error)
	// wait long-polls the request for cyclesWait, and calls wrote once the
	// request has been written to its connection.
	wait(ctx context.Context, id string, wrote func()) (status string, err error)
	consume(ctx context.Context, id string) (status string, err error)
}

// deciderCalls are one decider's calls: it approves a request on the
// replica (an index into srv.replicas()) the job names.
type deciderCalls interface {
	approve(ctx context.Context, replica int, id string) error
}

// cycleClients returns the calls of every agent and every decider with the
// client of --client, and a function that closes their connections. Agent
// a waits on replica a mod N and its decisions are made on a+1 mod N.
func cycleClients(ctx context.Context, o *options, srv *server) ([]agentCalls, []deciderCalls, func(), error) {
	agents := make([]agentCalls, o.agents)
	deciders := make([]deciderCalls, o.deciders)
	if o.client == "go" {
		// Agents and deciders each have their own pool of kept-alive
		// connections: a long poll holds its connection, so agents need
		// up to two each (the poll and the next create or consume).
		ac := clientsOf(srv, srv.agentKey, newTransport(2*o.agents+16))
		dc := clientsOf(srv, srv.token, newTransport(o.deciders+16))
		for a := range agents {
			agents[a] = goAgent{ac[a%len(ac)]}
		}
		for d := range deciders {
			deciders[d] = goDecider(dc)
		}
		return agents, deciders, func() {}, nil
	}

	// One connection per agent, whose calls follow one another, and one
	// per decider and replica.
	var conns []*rawConn
	closeAll := func() {
		for _, c := range conns {
			c.close()
		}
	}
	dial := func(r *server, credential string) (*rawConn, error) {
		c, err := dialRaw(ctx, r.addr, credential)
		if err == nil {
			conns = append(conns, c)
		}
		return c, err
	}
	for a := range agents {
		c, err := dial(srv.replica(a), srv.agentKey)
		if err != nil {
			closeAll()
			return nil, nil, nil, fmt.Errorf("agent %d: %w", a, err)
		}
		agents[a] = &rawAgent{c: c}
	}
	for d := range deciders {
		var rd rawDecider
		for _, r := range srv.replicas() {
			c, err := dial(r, srv.token)
			if err != nil {
				closeAll()
				return nil, nil, nil, fmt.Errorf("decider %d: %w", d, err)
			}
			rd = append(rd, c)
		}
		deciders[d] = rd
	}
	return agents, deciders, closeAll, nil
}

// goAgent calls through ./client, as the scenario always has.
type goAgent struct{ c *client.Client }

func (g goAgent) create(ctx context.Context, a, iter int) (string, string, bool, error) {
	args, _ := json.Marshal(map[string]int{"agent": a, "iteration": iter})
	r, created, err := create(ctx, g.c, client.CreateInput{Kind: "generic", Action: "load.cycle", Arguments: args})
	if err != nil {
		return "", "", false, err
	}
	return r.ID, r.Status, created, nil
}

func (g goAgent) wait(ctx context.Context, id string, wrote func()) (string, error) {
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote() },
	})
	r, err := g.c.Wait(ctx, id, cyclesWait)
	if err != nil {
		return "", err
	}
	return r.Status, nil
}

func (g goAgent) consume(ctx context.Context, id string) (string, error) {
	r, err := consume(ctx, g.c, id)
	if err != nil {
		return "", err
	}
	return r.Status, nil
}

// goDecider approves through ./client, with one client per replica.
type goDecider []*client.Client

func (g goDecider) approve(ctx context.Context, replica int, id string) error {
	_, err := approve(ctx, g[replica], id)
	return err
}

// The routes of ./client's calls; a request's id goes between a prefix and
// a suffix.
const (
	routeRequests = "/api/v1/requests"
	routeRequest  = "/api/v1/requests/"
)

// approveBody is the body ./client sends for Decision{Decision: "approve"}.
var approveBody = []byte(`{"decision":"approve"}`)

// rawAgent calls over one connection of its own.
type rawAgent struct {
	c    *rawConn
	body []byte // the create's body, reused
}

func (r *rawAgent) create(ctx context.Context, a, iter int) (string, string, bool, error) {
	// The JSON ./client sends for CreateInput{Kind: "generic", Action:
	// "load.cycle", Arguments: {"agent": a, "iteration": iter}}: its
	// omitempty fields left out, the arguments' keys sorted.
	b := append(r.body[:0], `{"kind":"generic","action":"load.cycle","arguments":{"agent":`...)
	b = strconv.AppendInt(b, int64(a), 10)
	b = append(b, `,"iteration":`...)
	b = strconv.AppendInt(b, int64(iter), 10)
	r.body = append(b, `},"context":{}}`...)
	r.c.request(http.MethodPost, routeRequests, "", "", r.body)
	status, ans, err := r.c.do(ctx, "", callTimeout, nil, http.StatusCreated, http.StatusOK)
	if err != nil {
		return "", "", false, fmt.Errorf("POST %s: %w", routeRequests, err)
	}
	// 201 is a new request, 200 an existing identical one.
	return ans.ID, ans.Status, status == http.StatusCreated, nil
}

func (r *rawAgent) wait(ctx context.Context, id string, wrote func()) (string, error) {
	r.c.request(http.MethodGet, routeRequest, id, waitQuery, nil)
	// ./client gives a long poll its wait and 15 s more.
	_, ans, err := r.c.do(ctx, id, cyclesWait+15*time.Second, wrote, http.StatusOK, http.StatusOK)
	if err != nil {
		return "", fmt.Errorf("GET %s%s%s: %w", routeRequest, id, waitQuery, err)
	}
	return ans.Status, nil
}

func (r *rawAgent) consume(ctx context.Context, id string) (string, error) {
	r.c.request(http.MethodPost, routeRequest, id, "/consume", nil)
	_, ans, err := r.c.do(ctx, id, callTimeout, nil, http.StatusOK, http.StatusOK)
	if err != nil {
		return "", fmt.Errorf("POST %s%s/consume: %w", routeRequest, id, err)
	}
	return ans.Status, nil
}

// rawDecider approves over connections of its own, one per replica.
type rawDecider []*rawConn

func (d rawDecider) approve(ctx context.Context, replica int, id string) error {
	c := d[replica]
	c.request(http.MethodPost, routeRequest, id, "/decision", approveBody)
	_, ans, err := c.do(ctx, id, callTimeout, nil, http.StatusOK, http.StatusOK)
	if err == nil && ans.Status != "approved" {
		err = fmt.Errorf("the answer says %q, not approved", ans.Status)
	}
	if err != nil {
		return fmt.Errorf("POST %s%s/decision: %w", routeRequest, id, err)
	}
	return nil
}

// answer is what the cycles check of a request in an answer.
type answer struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// do sends the request prepared in c and checks its answer: one of the
// two wanted status codes, and a request as JSON, the one asked about when
// id is set. It returns the status code and the request.
func (c *rawConn) do(ctx context.Context, id string, timeout time.Duration, wrote func(), want1, want2 int) (int, answer, error) {
	status, body, err := c.roundTrip(ctx, timeout, wrote)
	if err != nil {
		return status, answer{}, err
	}
	if status != want1 && status != want2 {
		return status, answer{}, statusError(status, body)
	}
	a, err := scanAnswer(body)
	if err != nil {
		return status, answer{}, fmt.Errorf("the answer (status %d) is not the expected JSON: %v", status, err)
	}
	if a.ID == "" || a.Status == "" || (id != "" && a.ID != id) {
		return status, answer{}, fmt.Errorf("the answer is not the request asked about (id %q, status %q)", a.ID, a.Status)
	}
	return status, a, nil
}

// statusError describes an answer with an unexpected status, with the
// code and message of its JSON error when it has one.
func statusError(status int, body []byte) error {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
		return fmt.Errorf("server answered %d without an error body", status)
	}
	return fmt.Errorf("server answered %d %s: %s", status, e.Error.Code, e.Error.Message)
}
