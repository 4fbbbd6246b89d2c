package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/client/api"
	"github.com/countersign/countersign/internal/approval"
)

// apiHandler is an API handler that returns its error instead of writing
// it.
type apiHandler func(w http.ResponseWriter, r *http.Request) error

// api turns a handler's error into a JSON error, applies the API's rate
// limit per client address, and refuses a body declared larger than
// maxBody, also on routes that read none.
func (s *Server) api(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.rateLimit(r); err != nil {
			s.writeAPIError(w, r, err)
		} else if r.ContentLength > maxBody {
			s.writeAPIError(w, r, tooLarge(maxBody))
		} else if err := h(w, r); err != nil {
			s.writeAPIError(w, r, err)
		}
	}
}

// rateLimit refuses a request beyond the API's rate for its client
// address. A call of its own, to keep the frame under every long poll
// small (see getRequest).
//
//go:noinline
func (s *Server) rateLimit(r *http.Request) error {
	if ok, retry := s.limiter.Allow(s.clientAddr(r), time.Now()); !ok {
		return &countersign.Error{Code: countersign.ELIMIT,
			Message: "too many requests from this address; slow down and retry after the time in Retry-After", RetryAfter: retry}
	}
	return nil
}

type agentHandler func(w http.ResponseWriter, r *http.Request, agent countersign.Agent) error
type approverHandler func(w http.ResponseWriter, r *http.Request, ap countersign.ApproverPrincipal) error

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if h == "" {
		return "", countersign.Errorf(countersign.EUNAUTHORIZED, "send a credential as Authorization: Bearer <key>")
	} else if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", countersign.Errorf(countersign.EUNAUTHORIZED, "the Authorization header must be: Bearer <key>")
	}
	return strings.TrimSpace(token), nil
}

// agent lets only a valid agent key through.
func (s *Server) agent(h agentHandler) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		a, err := s.agentOf(r)
		if err != nil {
			return err
		}
		return h(w, r, a)
	}
}

// agentOf authenticates the agent key of r. The lookup runs off the
// handler's stack, and this is a call of its own: a long poll parks on the
// handler's goroutine, under the frame of agent (see getRequest).
//
//go:noinline
func (s *Server) agentOf(r *http.Request) (countersign.Agent, error) {
	secret, err := bearer(r)
	if err != nil {
		return countersign.Agent{}, err
	}
	return approval.OffStack(func() (countersign.Agent, error) { return s.auth.Agent(r.Context(), secret) })
}

// approver lets only a valid approver token through.
func (s *Server) approver(h approverHandler) apiHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		secret, err := bearer(r)
		if err != nil {
			return err
		}
		ap, err := s.auth.Approver(r.Context(), secret)
		if err != nil {
			return err
		}
		return h(w, r, ap)
	}
}

func (s *Server) apiNotFound(w http.ResponseWriter, r *http.Request) error {
	return countersign.Errorf(countersign.ENOTFOUND, "no such route: %s %s; see the API reference, docs/api.md", r.Method, r.URL.Path)
}

// createInput is the body of POST /api/v1/requests.
type createInput struct {
	Kind        countersign.Kind           `json:"kind"`
	Action      string                     `json:"action"`
	Arguments   json.RawMessage            `json:"arguments"`
	Preview     string                     `json:"preview"`
	RiskReasons []string                   `json:"risk_reasons"`
	Tier        countersign.Tier           `json:"tier"`
	Protected   bool                       `json:"protected"`
	Context     countersign.RequestContext `json:"context"`
	TTLSeconds  int                        `json:"ttl_seconds"`
	Scope       *scopeInput                `json:"scope"`
	CoveredBy   string                     `json:"covered_by"`
}

// scopeInput is the shape of the action as the agent states it,
// countersign.StatedScope with other tags; the server adds the classes of
// the risk reasons itself. Its tags keep every field, unlike
// StatedScope's: the Idempotency-Key fingerprint of a create hashes the
// body as createInput encodes it, and a retry must match its first call
// whichever version of the server answered that.
type scopeInput struct {
	Commands    []string `json:"commands"`
	Paths       []string `json:"paths"`
	Files       int64    `json:"files"`
	Bytes       int64    `json:"bytes"`
	FilesCapped bool     `json:"files_capped"`
}

func (in *scopeInput) scope() *countersign.Scope {
	if in == nil {
		return nil
	}
	return &countersign.Scope{StatedScope: countersign.StatedScope(*in)}
}

func (s *Server) createRequest(w http.ResponseWriter, r *http.Request, agent countersign.Agent) error {
	var in createInput
	if err := decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	return s.idempotent(w, r, agentPrincipal(agent), countersign.IdemCreate, "", in, func(ctx context.Context) (*countersign.Request, int, error) {
		req, created, err := s.service.Create(ctx, agent, countersign.CreateInput{
			Kind: in.Kind, Action: in.Action, Arguments: in.Arguments, Preview: in.Preview,
			RiskReasons: in.RiskReasons, Tier: in.Tier, Protected: in.Protected, Context: in.Context, TTL: ttl(in.TTLSeconds),
			Scope: in.Scope.scope(), CoveredBy: in.CoveredBy,
		})
		if created {
			return req, http.StatusCreated, err
		}
		return req, http.StatusOK, err // an identical live request was returned
	})
}

// ttl turns ttl_seconds into a duration without overflow: a number too
// large for a Duration must stay too large, for the service to refuse, and
// not wrap around into a short, valid TTL.
func ttl(seconds int) time.Duration {
	const limit = 1 << 30 // 34 years: far beyond any TTL, and an int everywhere
	return time.Duration(min(max(seconds, -limit), limit)) * time.Second
}

// getRequest answers a request's state, after a long poll when asked.
//
// A long poll parks this goroutine, with every frame between it and the
// connection's, for up to a minute; thousands of them are most of the
// server's memory. So the frames on that path are kept small: what needs
// room (parsing the query, setting the deadline, building the answer) is
// done in calls that have returned before the wait parks, and the frames
// stay within the goroutine's first stack.
func (s *Server) getRequest(w http.ResponseWriter, r *http.Request, agent countersign.Agent) error {
	wait, err := s.waitParam(w, r)
	if err != nil {
		return err
	}
	var req *countersign.Request
	if wait > 0 {
		// Wait ends itself after wait. A deadline on its context as well
		// would fail a store read that is in progress when it passes, and
		// answer 500 instead of the request's state.
		req, err = s.service.Wait(r.Context(), agent, r.PathValue("id"), wait)
	} else {
		req, err = s.service.Get(r.Context(), agent, r.PathValue("id"))
	}
	if err != nil {
		return err
	}
	s.writeRequest(w, req)
	return nil
}

// waitParam reads the wait parameter and gives a long poll's response a
// write deadline of its own, since the wait outlives the server's write
// timeout.
//
//go:noinline
func (s *Server) waitParam(w http.ResponseWriter, r *http.Request) (time.Duration, error) {
	wait, err := s.parseWait(r.URL.Query().Get("wait"))
	if err == nil && wait > 0 {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 10*time.Second))
	}
	return wait, err
}

// writeRequest answers 200 with a request; see getRequest for why it is a
// call of its own.
//
//go:noinline
func (s *Server) writeRequest(w http.ResponseWriter, req *countersign.Request) {
	writeJSON(w, http.StatusOK, s.requestJSON(req))
}

// parseWait reads the wait parameter: a Go duration ("25s") or seconds
// ("25"), at most MaxWait (longer waits are shortened).
func (s *Server) parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil {
			return 0, countersign.Errorf(countersign.EINVALID, "wait must be a duration such as 25s")
		}
		d = time.Duration(min(n, 1<<30)) * time.Second // no overflow into a negative wait
	}
	if d < 0 {
		return 0, countersign.Errorf(countersign.EINVALID, "wait must not be negative")
	}
	return min(d, s.cfg.MaxWait), nil
}

func (s *Server) consumeRequest(w http.ResponseWriter, r *http.Request, agent countersign.Agent) error {
	if err := decodeJSON(w, r, &struct{}{}, true); err != nil {
		return err
	}
	id := r.PathValue("id")
	// Only a client that runs an approver's edit says so: any other
	// would run the action as it asked, so it gets no edited approval.
	accepts := r.Header.Get(api.AcceptEditHeader) == "1"
	return s.idempotent(w, r, agentPrincipal(agent), countersign.IdemConsume, id, nil, func(ctx context.Context) (*countersign.Request, int, error) {
		if accepts {
			ctx = approval.AcceptEdits(ctx)
		}
		req, err := s.service.Consume(ctx, agent, id)
		return req, http.StatusOK, err
	})
}

// takeApproval consumes an approved request of the key with the binding of
// the body (kind, action, arguments, preview) and its tier, once: a client that lost
// the id (a restarted MCP gateway) still finds the approval the human
// gave, and no other key's. An approval an approver edited is found by
// the call as asked too, but taken only by a client that runs the edited
// arguments of the answer and says so, as with a consumption.
func (s *Server) takeApproval(w http.ResponseWriter, r *http.Request, agent countersign.Agent) error {
	var in createInput
	if err := decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	ctx := r.Context()
	if r.Header.Get(api.AcceptEditHeader) == "1" {
		ctx = approval.AcceptEdits(ctx)
	}
	req, err := s.service.TakeApproval(ctx, agent, countersign.CreateInput{
		Kind: in.Kind, Action: in.Action, Arguments: in.Arguments, Preview: in.Preview, Tier: in.Tier})
	if err != nil {
		return err
	}
	s.writeRequest(w, req)
	return nil
}

// ranInput is the body of POST /api/v1/requests/ran: what a coding
// agent's hook reports it ran for one of its calls.
type ranInput struct {
	CallID    string          `json:"call_id"`
	SessionID string          `json:"session_id"`
	Agent     string          `json:"agent"`
	Action    string          `json:"action"`
	Arguments json.RawMessage `json:"arguments"`
}

// reportRan compares what an agent ran with the approval its call
// consumed and answers the request with its ran field; a call of the key
// that consumed no approval is 404.
func (s *Server) reportRan(w http.ResponseWriter, r *http.Request, agent countersign.Agent) error {
	var in ranInput
	if err := decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	req, err := s.service.ReportRan(r.Context(), agent, countersign.RanReport{
		CallID: in.CallID, SessionID: in.SessionID, Agent: in.Agent, Action: in.Action, Arguments: in.Arguments})
	if err != nil {
		return err
	}
	s.writeRequest(w, req)
	return nil
}

func (s *Server) cancelRequest(w http.ResponseWriter, r *http.Request, agent countersign.Agent) error {
	if err := decodeJSON(w, r, &struct{}{}, true); err != nil {
		return err
	}
	req, err := s.service.Cancel(r.Context(), agent, r.PathValue("id"))
	if err != nil {
		return err
	}
	s.writeRequest(w, req)
	return nil
}

func (s *Server) listRequests(w http.ResponseWriter, r *http.Request, ap countersign.ApproverPrincipal) error {
	q := r.URL.Query()
	status := q.Get("status")
	if status == "all" { // every status, as the terminal client's --status all
		status = ""
	}
	f := countersign.RequestFilter{
		Status:    countersign.Status(status),
		Reference: q.Get("reference"),
		SessionID: q.Get("session_id"),
		Limit:     50,
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return countersign.Errorf(countersign.EINVALID, "limit must be a number from 1 to 500")
		}
		f.Limit = n
	}
	list, err := s.service.List(r.Context(), ap, f)
	if err != nil {
		return err
	}
	out := struct {
		Requests []requestJSON `json:"requests"`
	}{Requests: make([]requestJSON, 0, len(list))}
	for _, req := range list {
		out.Requests = append(out.Requests, s.requestJSON(req))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// decisionInput is the body of POST /api/v1/requests/{id}/decision.
type decisionInput struct {
	Decision           countersign.Decision `json:"decision"`
	Text               string               `json:"text"`
	AutoApproveMinutes int                  `json:"auto_approve_minutes"`
	// Edit, with approve only, approves the request with its action
	// changed: the whole new arguments.
	Edit *editInput `json:"edit,omitempty"`
	// BindingHash, with approve, is the binding of the action the
	// approver saw (countersign.DecisionInput.Binding).
	BindingHash string `json:"binding_hash"`
}

// editInput is an approver's edit of a request's action.
type editInput struct {
	Arguments json.RawMessage `json:"arguments"`
}

func (s *Server) decideRequest(w http.ResponseWriter, r *http.Request, ap countersign.ApproverPrincipal) error {
	var in decisionInput
	if err := decodeJSON(w, r, &in, false); err != nil {
		return err
	}
	id := r.PathValue("id")
	return s.idempotent(w, r, approverPrincipal(ap), countersign.IdemDecision, id, in, func(ctx context.Context) (*countersign.Request, int, error) {
		d := countersign.DecisionInput{Decision: in.Decision, Text: in.Text, AutoApproveMinutes: in.AutoApproveMinutes, Binding: in.BindingHash}
		if in.Edit != nil {
			d.Edit = &countersign.Edit{Arguments: in.Edit.Arguments}
		}
		req, err := s.service.Decide(ctx, ap, id, d)
		return req, http.StatusOK, err
	})
}
