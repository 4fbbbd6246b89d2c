package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/approval"
	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/visible"
)

// claudePayload is the body of POST /api/claude-events.
type claudePayload struct {
	EventID   string          `json:"event_id"`
	EventType string          `json:"event_type"`
	SessionID string          `json:"session_id"`
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"` // a string in the seed; an object is taken too
	Timestamp string          `json:"timestamp"`
}

func (s *Server) createClaudeEvent(w http.ResponseWriter, r *http.Request) error {
	data, agent, err := s.seedBody(w, r, "X-Claude-Signature")
	if err != nil {
		return err
	}
	var p claudePayload
	if err := decodeStrict(data, &p); err != nil {
		return err
	}
	if !seedIDPattern().MatchString(p.EventID) {
		return countersign.Errorf(countersign.EINVALID, "event_id must be 1 to 128 characters of letters, digits, '_', '.', ':' and '-'")
	}
	input, err := claudeInput(p.ToolInput)
	if err != nil {
		return err
	}
	args, _ := json.Marshal(map[string]any{"event_type": p.EventType, "tool_input": input})
	// No one-time link goes back to the caller, as none does in the
	// seed's answer: whoever holds the key could decide with it. Links go
	// to humans, through the account's notification channels.
	req, created, err := s.service.Create(r.Context(), agent, countersign.CreateInput{
		Kind: countersign.KindTool, Action: p.ToolName, Arguments: args, Preview: claudePreview(p.ToolName, input),
		Context: countersign.RequestContext{SessionID: p.SessionID},
		Seed:    data, SeedID: "claude:" + p.EventID,
	})
	if err != nil {
		return err
	}
	out := map[string]any{
		"success": true, "event_id": p.EventID, "expires_at": req.ExpiresAt.Unix(),
		"reference": countersign.FormatReference(req.Reference), "inbox_url": s.inboxURL(req.ID),
	}
	if !created && !sameSeed(req.Seed, data) {
		return seedIDTaken("event_id", p.EventID)
	}
	if req.DecidedBy == countersign.DecidedByAutoApprove {
		out["status"], out["auto_approved"] = "auto_approved", true
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	if !created {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// claudeInput accepts the seed's tool_input string, or an object.
func claudeInput(raw json.RawMessage) (any, error) {
	var v any
	if len(raw) == 0 {
		return "", nil
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, countersign.Errorf(countersign.EINVALID, "tool_input must be a string or an object")
	}
	switch v.(type) {
	case string, map[string]any:
		return v, nil
	}
	return nil, countersign.Errorf(countersign.EINVALID, "tool_input must be a string or an object")
}

// claudePreview is what a human sees of a seed Claude event, cut to
// approval.MaxPreview with a visible mark. An object is indented bounded:
// its indentation grows with its depth at every line.
func claudePreview(tool string, input any) string {
	if s, ok := input.(string); ok {
		// Characters that would hide or reorder text are written as
		// escapes, as the service requires.
		return limit.Text(visible.String(tool+"\n"+s), approval.MaxPreview)
	}
	b, _ := json.Marshal(input)
	return limit.Text(visible.String(tool+"\n"+limit.IndentJSON(b, approval.MaxPreview-len(tool)-1)), approval.MaxPreview)
}

// resolvedBy is the seed's resolved_by: "auto_approve", "email" for a link,
// or the approver who decided in the inbox or terminal.
func resolvedBy(by string) any {
	switch by {
	case "":
		return nil
	case approval.DecidedByLink:
		return "email"
	}
	return by
}

// seedResolver is resolved_by on the unsigned status route: only the seed's
// two words, so that no approver's name is told to whoever asks.
func seedResolver(by string) any {
	switch by {
	case "":
		return nil
	case countersign.DecidedByAutoApprove:
		return "auto_approve"
	}
	return "email"
}

func (s *Server) claudeEventStatus(w http.ResponseWriter, r *http.Request) error {
	req, err := s.service.SeedRequest(r.Context(), "claude:"+r.PathValue("id"))
	if err != nil {
		return err
	}
	var text any
	if req.Status == countersign.StatusResponded {
		text = req.Reason
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"status": seedStatus(req.Status, true), "response_text": text, "resolved_by": seedResolver(req.DecidedBy),
	})
	return nil
}

func (s *Server) listClaudeEvents(w http.ResponseWriter, r *http.Request, ap countersign.ApproverPrincipal) error {
	list, err := s.seedList(r, ap, countersign.KindTool, "claude:")
	if err != nil {
		return err
	}
	out := []map[string]any{}
	for _, req := range list {
		var p claudePayload
		json.Unmarshal(req.Seed, &p)
		input, _ := claudeInput(p.ToolInput)
		var text any
		if req.Status == countersign.StatusResponded {
			text = req.Reason
		}
		out = append(out, map[string]any{
			"id": strings.TrimPrefix(req.SeedID, "claude:"), "event_type": p.EventType, "session_id": req.Context.SessionID,
			"tool_name": req.Action, "tool_input": input, "status": seedStatus(req.Status, true),
			"created_at": req.CreatedAt.Unix(), "expires_at": req.ExpiresAt.Unix(), "response_text": text,
			"resolved_by": resolvedBy(req.DecidedBy), "resolved_at": unixOrNil(req.DecidedAt),
			"reference": countersign.FormatReference(req.Reference),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "events": out})
	return nil
}
