// Package api holds the types of countersign's v1 API as its clients see
// them: requests, what an agent asks, decisions and errors. It imports no
// HTTP client, so that the agent-side roles can name them without linking
// one (see package client for the client itself).
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/countersign/countersign"
)

// Request is a request as the API shows it.
type Request struct {
	ID          string          `json:"id"`
	Reference   string          `json:"reference"`
	Kind        string          `json:"kind"`
	Action      string          `json:"action"`
	Arguments   json.RawMessage `json:"arguments"`
	ArgsHash    string          `json:"args_hash"`
	Preview     string          `json:"preview"`
	PreviewHash string          `json:"preview_hash"`
	// BindingHash is the request's binding, which a Decision names as
	// the action its approver saw.
	BindingHash      string     `json:"binding_hash,omitempty"`
	RiskReasons      []string   `json:"risk_reasons"`
	Tier             string     `json:"tier,omitempty"`
	Protected        bool       `json:"protected,omitempty"`
	Context          Context    `json:"context"`
	Key              string     `json:"key"`
	Status           string     `json:"status"`
	CreatedAt        time.Time  `json:"created_at"`
	ExpiresAt        time.Time  `json:"expires_at"`
	DecidedAt        *time.Time `json:"decided_at"`
	DecidedBy        string     `json:"decided_by"`
	Text             string     `json:"text"`
	AutoApproved     bool       `json:"auto_approved"`
	AutoApproveUntil *time.Time `json:"auto_approve_until"`
	ConsumedAt       *time.Time `json:"consumed_at"`
	// Ran is what the agent's hook reported it ran under the approval;
	// nil before a report.
	Ran *Ran `json:"ran,omitempty"`
	// Edited says that an approver changed the action before approving
	// it: Arguments, ArgsHash, Preview, PreviewHash and RiskReasons are
	// then the edited action's, what the agent is to run, and Original is
	// the action as the agent asked for it.
	Edited   bool      `json:"edited,omitempty"`
	Original *Original `json:"original,omitempty"`
	InboxURL string    `json:"inbox_url"`
}

// Original is the action as the agent asked for it, on a request an
// approver edited before approving it.
type Original struct {
	Arguments   json.RawMessage `json:"arguments"`
	ArgsHash    string          `json:"args_hash"`
	Preview     string          `json:"preview"`
	PreviewHash string          `json:"preview_hash"`
	RiskReasons []string        `json:"risk_reasons"`
}

// AcceptEditHeader, set to 1 on a consumption (by id, or a take of the
// approval of a call, which then finds an edited approval by the call as
// asked too), says that the client runs
// the action of the approval as approved (the answer's Arguments), edited
// or not; without it the server refuses an edited approval and leaves it
// unused.
const AcceptEditHeader = "Countersign-Accept-Edit"

// Edit is an approver's change of a request's action, with approve only:
// the whole new arguments; the action (tool name, command word) stays.
type Edit struct {
	Arguments json.RawMessage `json:"arguments"`
}

// Ran is what a coding agent's hook reported it ran under an approval:
// the tool, the hash of its arguments in the request's binding, and
// whether both are the approved ones.
type Ran struct {
	ReportedAt time.Time `json:"reported_at"`
	Action     string    `json:"action"`
	ArgsHash   string    `json:"args_hash"`
	AsApproved bool      `json:"as_approved"`
}

// RanInput is what a coding agent's hook reports after one of its calls
// ran: the agent's id of the call, the session and agent (as the
// request's context named them), and the call as it ran.
type RanInput struct {
	CallID    string          `json:"call_id"`
	SessionID string          `json:"session_id,omitempty"`
	Agent     string          `json:"agent,omitempty"`
	Action    string          `json:"action"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Context is where the agent was when it asked.
type Context struct {
	User      string `json:"user,omitempty"`
	Host      string `json:"host,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// Agent is the coding agent whose hook asks: claude-code, codex,
	// gemini or copilot.
	Agent string `json:"agent,omitempty"`
	// CallID is the agent's id of the tool call (Claude Code's
	// tool_use_id), which its report of what ran names.
	CallID string `json:"call_id,omitempty"`
}

// CreateInput is what an agent asks about.
type CreateInput struct {
	Kind        string          `json:"kind"`
	Action      string          `json:"action"`
	Arguments   json.RawMessage `json:"arguments,omitempty"`
	Preview     string          `json:"preview,omitempty"`
	RiskReasons []string        `json:"risk_reasons,omitempty"`
	// Tier is an MCP call's tier (read, write, commit or external), for
	// kind mcp: the server's rules of who may approve read it, not the
	// risk reasons.
	Tier string `json:"tier,omitempty"`
	// Protected says the action touches a protected path.
	Protected  bool    `json:"protected,omitempty"`
	Context    Context `json:"context"`
	TTLSeconds int     `json:"ttl_seconds,omitempty"`
	// Scope is the shape of the action: what an auto-approve window opened
	// on the request may let through (see docs/api.md).
	Scope *Scope `json:"scope,omitempty"`
	// CoveredBy, on an rm request, names the approved request of the
	// Claude Code hook that let this delete run.
	CoveredBy string `json:"covered_by,omitempty"`
}

// Scope is the shape of an action as the agent states it: for a Bash
// call, the program and subcommand of every command of the line; the
// absolute, resolved paths it deletes (or a file tool writes); and what
// the deleted paths hold. It is the server's own type.
type Scope = countersign.StatedScope

// Decision is what an approver decides.
type Decision struct {
	Decision           string `json:"decision"`
	Text               string `json:"text,omitempty"`
	AutoApproveMinutes int    `json:"auto_approve_minutes,omitempty"`
	// Edit, with approve only, approves the request with its action
	// changed (see Edit).
	Edit *Edit `json:"edit,omitempty"`
	// BindingHash, with approve, is the binding_hash of the request as
	// its approver saw it: the approval is refused (409) when the action
	// changed since. It is needed to approve a pending request another
	// approver edited.
	BindingHash string `json:"binding_hash,omitempty"`
}

// Error is an error answer of the server.
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, e.Code, e.Message)
}

// ErrUnreachable wraps every failure to reach the server or to understand
// its answer, so that callers can fail closed with a clear message.
var ErrUnreachable = errors.New("countersign server unreachable or answering garbage")
