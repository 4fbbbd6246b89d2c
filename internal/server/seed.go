package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/visible"
)

// The seed-compatible routes keep the paths, fields and status codes of the
// safe-rm system's API, so that a client written against it works
// unchanged. One documented change: a link never decides on GET (mail
// scanners open links); GET shows the request and a button, and the POST
// from that page decides.

// seedIDPattern bounds the ids seed clients choose ("del_1700000000_12345").
var seedIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`) }) // compiled on first use: every role starts with this package

// seedBody reads a signed body of the seed routes and returns it with the
// agent whose designated key signed it. The signature is checked over the
// raw bytes before anything is decoded.
func (s *Server) seedBody(w http.ResponseWriter, r *http.Request, header string) ([]byte, countersign.Agent, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, countersign.Agent{}, tooLarge(maxBody)
	} else if err != nil {
		return nil, countersign.Agent{}, countersign.Errorf(countersign.EINVALID, "could not read the body")
	}
	agent, err := s.auth.SeedAgent(r.Context(), data, r.Header.Get(header))
	if err != nil {
		return nil, countersign.Agent{}, err
	}
	return data, agent, nil
}

// deletePayload is the body of POST /api/delete-requests.
type deletePayload struct {
	RequestID     string   `json:"request_id"`
	Command       string   `json:"command"`
	RiskReasons   []string `json:"risk_reasons"`
	AffectedPaths []string `json:"affected_paths"`
	FileCount     int      `json:"file_count"`
	User          string   `json:"user"`
	Hostname      string   `json:"hostname"`
	Cwd           string   `json:"cwd"`
	Timestamp     int64    `json:"timestamp"`
	// Targets are the resolved absolute targets; countersign's own client
	// sends them, the seed's does not.
	Targets []string `json:"targets,omitempty"`
}

func (s *Server) createDeleteRequest(w http.ResponseWriter, r *http.Request) error {
	data, agent, err := s.seedBody(w, r, "X-SafeRM-Signature")
	if err != nil {
		return err
	}
	var p deletePayload
	if err := decodeStrict(data, &p); err != nil {
		return err
	}
	if !seedIDPattern().MatchString(p.RequestID) {
		return countersign.Errorf(countersign.EINVALID, "request_id must be 1 to 128 characters of letters, digits, '_', '.', ':' and '-'")
	}
	if len(p.AffectedPaths) > 50 || len(p.Targets) > 1000 {
		return countersign.Errorf(countersign.EINVALID, "at most 50 affected_paths and 1000 targets")
	}
	if p.FileCount < 0 {
		return countersign.Errorf(countersign.EINVALID, "file_count must not be negative")
	}
	args, _ := json.Marshal(map[string]any{
		"command": p.Command, "affected_paths": nonNil(p.AffectedPaths), "targets": nonNil(p.Targets),
		"file_count": p.FileCount, "cwd": p.Cwd,
	})
	req, created, err := s.service.Create(r.Context(), agent, countersign.CreateInput{
		Kind: countersign.KindRm, Action: p.Command, Arguments: args, Preview: deletePreview(&p),
		RiskReasons: p.RiskReasons, Context: countersign.RequestContext{User: p.User, Host: p.Hostname, Cwd: p.Cwd},
		Seed: data, SeedID: "delete:" + p.RequestID,
	})
	if err != nil {
		return err
	}
	// approval_url is the seed's field, but not its one-time link: that
	// link would let whoever holds the key approve its own request. It is
	// the request's inbox page, where a signed-in approver decides; the
	// links go to humans, through the account's notification channels.
	out := map[string]any{
		"success": true, "request_id": p.RequestID, "expires_at": req.ExpiresAt.Unix(),
		"reference": countersign.FormatReference(req.Reference), "inbox_url": s.inboxURL(req.ID),
		"approval_url": s.inboxURL(req.ID),
	}
	if !created && !sameSeed(req.Seed, data) {
		return seedIDTaken("request_id", p.RequestID)
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK // the same request again
	}
	writeJSON(w, status, out)
	return nil
}

// deletePreview is what a human sees of a seed delete request, cut to
// approval.MaxPreview with a visible mark. The seed's client sends its
// paths as they are: characters that would hide or reorder text are
// written as escapes (visible.String), as the service requires.
func deletePreview(p *deletePayload) string {
	var b strings.Builder
	b.WriteString(p.Command)
	paths := p.Targets
	if len(paths) == 0 {
		paths = p.AffectedPaths
	}
	if len(paths) > 0 {
		b.WriteString("\n\nDeletes:")
		for _, t := range paths {
			b.WriteString("\n  " + t)
		}
	}
	if p.FileCount > 0 {
		b.WriteString("\n\nFiles: " + strconv.Itoa(p.FileCount))
	}
	return limit.Text(visible.String(b.String()), approval.MaxPreview)
}

// sameSeed reports whether a stored seed body and a new one are the same
// JSON value. The store returns a live request of the same key, seed id and
// binding as the same request, but the binding leaves out what a seed body
// carries beside it (user, hostname, session, risk reasons, timestamp): a
// body that differs there is another request under a taken id.
func sameSeed(stored, body []byte) bool {
	a, err := approval.Canonical(stored)
	if err != nil {
		return false
	}
	b, err := approval.Canonical(body)
	return err == nil && bytes.Equal(a, b)
}

func seedIDTaken(field, id string) error {
	return countersign.Errorf(countersign.ECONFLICT, "%s %q is already taken by another request", field, id)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// seedStatus maps a request's status to the words of the seed's API:
// consumed was approved, and what the seed has no word for reads as denied.
func seedStatus(st countersign.Status, claude bool) string {
	switch st {
	case countersign.StatusPending, countersign.StatusApproved, countersign.StatusDenied, countersign.StatusExpired, countersign.StatusStopped:
		return string(st)
	case countersign.StatusConsumed:
		return "approved"
	case countersign.StatusResponded:
		if claude {
			return "responded"
		}
	}
	return "denied"
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) deleteRequestStatus(w http.ResponseWriter, r *http.Request) error {
	req, err := s.service.SeedRequest(r.Context(), "delete:"+r.PathValue("id"))
	if err != nil {
		return err
	}
	// The status route is unsigned, as in the seed: it names no approver,
	// only the seed's word "admin" for a human's decision.
	var by any
	if req.DecidedBy != "" {
		by = "admin"
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": seedStatus(req.Status, false), "approved_by": by})
	return nil
}

func (s *Server) listDeleteRequests(w http.ResponseWriter, r *http.Request, ap countersign.ApproverPrincipal) error {
	list, err := s.seedList(r, ap, countersign.KindRm, "delete:")
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, req := range list {
		var p deletePayload
		json.Unmarshal(req.Seed, &p)
		out = append(out, map[string]any{
			"id": strings.TrimPrefix(req.SeedID, "delete:"), "command": req.Action, "risk_reasons": nonNil(req.RiskReasons),
			"affected_paths": nonNil(p.AffectedPaths), "file_count": p.FileCount, "user": req.Context.User,
			"hostname": req.Context.Host, "cwd": req.Context.Cwd, "status": seedStatus(req.Status, false),
			"created_at": req.CreatedAt.Unix(), "expires_at": req.ExpiresAt.Unix(),
			"approved_by": nullable(req.DecidedBy), "approved_at": unixOrNil(req.DecidedAt),
			"reference": countersign.FormatReference(req.Reference),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "requests": out})
	return nil
}

// seedList lists the account's requests of the seed routes with the prefix,
// filtered by the seed's status word. The store filters kind, prefix and
// status, so that the account's v1 and MCP requests, however many and
// however new, never push the seed ones out of the list.
func (s *Server) seedList(r *http.Request, ap countersign.ApproverPrincipal, kind countersign.Kind, prefix string) ([]*countersign.Request, error) {
	q := r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return nil, countersign.Errorf(countersign.EINVALID, "limit must be a number from 1 to 500")
		}
		limit = n
	}
	f := countersign.RequestFilter{SessionID: q.Get("session_id"), Kind: kind, SeedPrefix: prefix, Limit: limit}
	if want := q.Get("status"); want != "" {
		f.Statuses = seedStatuses(want, kind == countersign.KindTool)
	}
	return s.service.List(r.Context(), ap, f)
}

// seedStatuses returns the statuses that seedStatus shows as the word:
// none for a word it never shows.
func seedStatuses(word string, claude bool) []countersign.Status {
	out := []countersign.Status{}
	for _, st := range []countersign.Status{countersign.StatusPending, countersign.StatusApproved, countersign.StatusDenied,
		countersign.StatusResponded, countersign.StatusStopped, countersign.StatusExpired, countersign.StatusCancelled,
		countersign.StatusConsumed} {
		if seedStatus(st, claude) == word {
			out = append(out, st)
		}
	}
	return out
}

func unixOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.Unix()
}
