package countersign

import (
	"encoding/json"
	"time"
)

// Kind says what kind of action a request is about.
type Kind string

// The kinds of request.
const (
	KindRm      Kind = "rm"      // a delete through the safe-rm client
	KindTool    Kind = "tool"    // a Claude Code tool call
	KindMCP     Kind = "mcp"     // an MCP tool call through the gateway
	KindGeneric Kind = "generic" // anything else an agent asks about
)

// Valid reports whether k is one of the known kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindRm, KindTool, KindMCP, KindGeneric:
		return true
	}
	return false
}

// Tier is the class of an MCP tool by what a call of it can do, as the MCP
// gateway judged it: read, write, commit (changes something for good) or
// external (reaches the outside world). A request of kind mcp carries its
// call's tier as a typed fact, so that the rules of who may approve it
// (step-up, windows) never read the risk reasons written for humans.
type Tier string

// The tiers, lowest first.
const (
	TierRead     Tier = "read"
	TierWrite    Tier = "write"
	TierCommit   Tier = "commit"
	TierExternal Tier = "external"
)

// Valid reports whether t is one of the known tiers.
func (t Tier) Valid() bool {
	switch t {
	case TierRead, TierWrite, TierCommit, TierExternal:
		return true
	}
	return false
}

// Status is where a request is in its lifecycle.
type Status string

// The statuses of a request. pending moves to exactly one of approved,
// denied, responded, stopped, expired or cancelled; approved moves to
// consumed (or expired when it is never used, or stopped when the human
// stops its agent session before it is used).
const (
	StatusPending   Status = "pending"
	StatusApproved  Status = "approved"
	StatusDenied    Status = "denied"
	StatusResponded Status = "responded"
	StatusStopped   Status = "stopped"
	StatusExpired   Status = "expired"
	StatusCancelled Status = "cancelled"
	StatusConsumed  Status = "consumed"
)

// Valid reports whether s is one of the known statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusApproved, StatusDenied, StatusResponded,
		StatusStopped, StatusExpired, StatusCancelled, StatusConsumed:
		return true
	}
	return false
}

// Live reports whether a request in this status can still change because
// of time passing: pending and approved requests expire.
func (s Status) Live() bool { return s == StatusPending || s == StatusApproved }

// DecidedByAutoApprove is the DecidedBy of a request approved by an open
// auto-approve window rather than by a human.
const DecidedByAutoApprove = "auto_approve"

// DecidedByCoverage is the DecidedBy of a delete approved at once because
// an approval the human gave to the Claude Code hook for the same delete
// covers it: the hook's request was what the human decided on.
const DecidedByCoverage = "hook_approval"

// Scope is the shape of what a request asks to do, as the human sees it
// on the decision page: an auto-approve window opened on the request lets
// through only requests of the same shape, and an approval of a hook's
// Bash call covers only the deletes it names. The agent says which
// commands and paths; the server checks them against the request and adds
// the classes of its risk reasons.
type Scope struct {
	// Commands are, for a Bash call, the program and subcommand of every
	// command the hook judged in the line ("rm", "git push"), sorted,
	// each once.
	Commands []string `json:"commands,omitempty"`
	// Paths are the absolute, resolved paths the action deletes (or, for
	// a file tool, writes), sorted, each once. A window covers only
	// actions within their trees.
	Paths []string `json:"paths,omitempty"`
	// Files and Bytes are what the deleted paths held when the agent
	// asked; FilesCapped when the count stopped at a cap.
	Files       int64 `json:"files,omitempty"`
	Bytes       int64 `json:"bytes,omitempty"`
	FilesCapped bool  `json:"files_capped,omitempty"`
	// Classes are the classes of the request's risk reasons, set by the
	// server: a window covers no request with a class the approved one
	// lacked.
	Classes []string `json:"classes,omitempty"`
	// Tier and Protected are, in the scope of an auto-approve window, the
	// typed facts of the request that opened it (see Request), set by the
	// server when the window opens: a window covers no request of another
	// tier and no protected request unless the approved one was. A
	// request's own scope leaves them empty; its fields hold them.
	Tier      Tier `json:"tier,omitempty"`
	Protected bool `json:"protected,omitempty"`
}

// RequestContext is where the agent was when it asked.
type RequestContext struct {
	User      string `json:"user,omitempty"`
	Host      string `json:"host,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// Request is one thing awaiting, or having had, a human's decision.
type Request struct {
	ID          string
	AccountID   string
	KeyID       string // the agent key that asked; only it may see and use the request
	KeyName     string
	Reference   string // six characters of ReferenceAlphabet, shown as XXX-XXX
	Kind        Kind
	Action      string          // the command or tool name
	Arguments   json.RawMessage // RFC 8785 canonical JSON
	ArgsHash    string          // hex SHA-256 of Arguments
	Preview     string          // what the human sees
	PreviewHash string          // hex SHA-256 of Preview
	RiskReasons []string
	// Tier is the MCP tier of a request of kind mcp; empty for other
	// kinds, and for an mcp request stored before tiers were kept, whose
	// tier is unknown: the rules that key on a tier treat it as the
	// riskiest.
	Tier Tier
	// Protected reports that the action touches a protected path (the
	// rm wrapper's and the hook's judgement of a delete).
	Protected bool
	Context   RequestContext
	Status    Status
	CreatedAt time.Time
	ExpiresAt time.Time
	DecidedAt time.Time // zero until decided
	DecidedBy string    // approver username, or DecidedByAutoApprove
	Reason    string    // the deny reason or the answer to the agent
	// AutoApproveUntil is set on an approval that opened an auto-approve
	// window.
	AutoApproveUntil time.Time
	ConsumedAt       time.Time
	// Scope is the shape of the action (nil for a request stored before
	// scopes were kept: no window opened on it covers anything).
	Scope *Scope
	// Seed holds the original payload of the seed-compatible routes; the
	// v1 API ignores it.
	Seed json.RawMessage
	// SeedID is the id a client of the seed-compatible routes chose, such
	// as "delete:del_1700000000_12345"; empty for the v1 API. It is unique
	// among all requests.
	SeedID string
	// ArgumentsText is Arguments as a human reads them, indented and
	// bounded in size: rendered once when the request is created and
	// stored, so that no page view renders the arguments again. Empty for
	// no arguments, and for requests stored before it existed.
	ArgumentsText string
	// Links are stored with a new request and never read back with it.
	Links []Link
	// Outbox holds the notifications of a new request, stored in its
	// transaction and never read back with it.
	Outbox []OutboxItem
}

// Link is a one-time capability of the seed-compatible routes: a random
// token in an e-mailed URL that opens a confirm page for one decision on
// one request. Only the token's hash is stored. The decision it leads to is
// the request's first, so a used link, like every other, is dead.
type Link struct {
	Hash      string
	RequestID string
	Action    string // approve, deny, respond, auto_approve, stop
	CreatedAt time.Time
}

// Expired reports whether a live request has passed its expiry at now.
func (r *Request) Expired(now time.Time) bool {
	return r.Status.Live() && !now.Before(r.ExpiresAt)
}

// TwinTTLSlack is how far the TTL of a pending request may be from a new
// request's for the pending one to be returned as its twin. A twin must
// match everything the human sees, its expiry included: a request made
// beforehand with a long TTL (by anyone who can read the key) must not
// stand in for an ask that would expire sooner. An honest retry asks for
// the same TTL (the same ttl_seconds, or the server's default), give or
// take the one second that a client rounding its remaining wait to whole
// seconds may add or drop, as the Claude Code hook does. A second more on
// a life of at least ten seconds is nothing a human would notice; a
// planted request's extra minutes are.
const TwinTTLSlack = time.Second

// RequestTTL is the TTL r was asked with: from its creation (now when
// CreatedAt is not set yet) to its expiry.
func RequestTTL(r *Request, now time.Time) time.Duration {
	created := r.CreatedAt
	if created.IsZero() {
		created = now
	}
	return r.ExpiresAt.Sub(created)
}

// CreateInput is what an agent asks about.
type CreateInput struct {
	Kind        Kind
	Action      string
	Arguments   json.RawMessage // any JSON value; canonicalised before hashing
	Preview     string          // empty: built from the action and arguments
	RiskReasons []string
	// Tier is the MCP tier of the call, for kind mcp only (see Request).
	Tier Tier
	// Protected says the action touches a protected path.
	Protected bool
	Context   RequestContext
	TTL       time.Duration // zero: the server's default
	Seed      json.RawMessage
	SeedID    string
	Links     []Link
	// Scope is the shape of the action as the agent states it (commands
	// and paths; see Scope). The server checks it and adds the classes.
	Scope *Scope
	// CoveredBy, on an rm request, names the approved request of the
	// Claude Code hook that let this delete run: when that approval covers
	// exactly this delete, the request is approved at once.
	CoveredBy string
}

// Decision is what a human decides about a pending request.
type Decision string

// The decisions.
const (
	DecisionApprove Decision = "approve"
	DecisionDeny    Decision = "deny"
	DecisionRespond Decision = "respond"
	DecisionStop    Decision = "stop"
)

// Status returns the status a request takes on this decision.
func (d Decision) Status() (Status, bool) {
	switch d {
	case DecisionApprove:
		return StatusApproved, true
	case DecisionDeny:
		return StatusDenied, true
	case DecisionRespond:
		return StatusResponded, true
	case DecisionStop:
		return StatusStopped, true
	}
	return "", false
}

// DecisionInput is a decision with its details.
type DecisionInput struct {
	Decision Decision
	// Text is the deny reason, or the answer to the agent for respond.
	Text string
	// AutoApproveMinutes, with approve, opens an auto-approve window of 1 to
	// 60 minutes for the same key, session, kind and action, and the
	// request's scope.
	AutoApproveMinutes int
	// Verified, when set, is the proof that the approver confirmed this
	// decision with a passkey (a step-up). Only the inbox's WebAuthn
	// ceremony makes one; nothing decoded from outside carries it.
	Verified *Verification `json:"-"`
}

// Verification is the proof of a step-up: a user-verified WebAuthn
// assertion whose challenge was bound to one request's id and binding
// hash, one decision and one window, checked by the server.
type Verification struct {
	Method       string // "webauthn"
	CredentialID string // base64url, as WebAuthn writes it; not secret
	PasskeyID    string
	RequestID    string
	BindingHash  string
	Decision     Decision
	Minutes      int
}

// RequestFilter selects requests of one account for listing. Every field
// set narrows the list, in the store, before the limit is applied.
type RequestFilter struct {
	AccountID string
	Status    Status // empty: any
	Reference string // empty: any
	SessionID string // empty: any
	Kind      Kind   // empty: any
	// SeedPrefix keeps only the requests of the seed-compatible routes
	// whose SeedID starts with it, such as "delete:"; empty: any request.
	SeedPrefix string
	// Statuses keeps only the requests in one of these statuses; nil: any.
	// An empty, non-nil list matches nothing.
	Statuses []Status
	Limit    int // at most this many, newest first
}

// AutoApproveWindow lets requests of one agent key's session through without
// asking, until it closes. It never widens beyond its scope.
type AutoApproveWindow struct {
	ID        string
	AccountID string
	KeyID     string
	SessionID string
	Kind      Kind
	Action    string // empty for kinds that are not scoped to a tool
	Until     time.Time
	CreatedAt time.Time
	RequestID string // the approval that opened it
	// Scope is the shape of the approved request: the window covers only
	// requests within it (nil: a window from before scopes, which covers
	// only requests of tools that have no shape beyond their name).
	Scope *Scope
}

// Coverage records that an approval of the Claude Code hook covered one
// delete of the rm wrapper. An approval covers at most one.
type Coverage struct {
	ApprovalID string // the hook's approved request
	RequestID  string // the wrapper's request it covered
	CreatedAt  time.Time
}

// EncodeScope is a scope as the stores keep it: JSON, "" for none.
func EncodeScope(s *Scope) string {
	if s == nil {
		return ""
	}
	b, _ := json.Marshal(s) // strings, numbers and booleans only: never fails
	return string(b)
}

// DecodeScope reads a scope EncodeScope wrote; "" is none.
func DecodeScope(text string) (*Scope, error) {
	if text == "" {
		return nil, nil
	}
	var s Scope
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		return nil, err
	}
	return &s, nil
}
