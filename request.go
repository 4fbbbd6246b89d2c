package countersign

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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

// ErrUnknownStatus is the refusal of a request of no known status.
func ErrUnknownStatus(s Status) *Error {
	return Errorf(EINVALID, "unknown status %q", s)
}

// Live reports whether a request in this status can still change because
// of time passing: pending and approved requests expire.
func (s Status) Live() bool { return s == StatusPending || s == StatusApproved }

// IsDecision reports whether s is what a human's decision leads to: a
// transition to it records when, by whom and why.
func (s Status) IsDecision() bool {
	switch s {
	case StatusApproved, StatusDenied, StatusResponded, StatusStopped:
		return true
	}
	return false
}

// DecidedByAutoApprove is the DecidedBy of a request approved by an open
// auto-approve window rather than by a human.
const DecidedByAutoApprove = "auto_approve"

// DecidedByCoverage is the DecidedBy of a delete approved at once because
// an approval the human gave to the Claude Code hook for the same delete
// covers it: the hook's request was what the human decided on.
const DecidedByCoverage = "hook_approval"

// RequestContext is where the agent was when it asked.
type RequestContext struct {
	User      string `json:"user,omitempty"`
	Host      string `json:"host,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// Agent is the coding agent that asked through its hook (one of
	// CodingAgents); empty for every other asker.
	Agent string `json:"agent,omitempty"`
	// CallID is the agent's own id of the tool call the request is for
	// (Claude Code's tool_use_id), by which the agent's hook reports what
	// ran once the call is done (Service.ReportRan); empty when the agent
	// names none.
	CallID string `json:"call_id,omitempty"`
}

// The coding agents whose hooks countersign answers, as a request's
// context.agent names them.
const (
	AgentClaudeCode = "claude-code"
	AgentCodex      = "codex"
	AgentGemini     = "gemini"
	AgentCopilot    = "copilot"
)

// CodingAgents are the names pages give the coding agents, by
// context.agent.
var CodingAgents = map[string]string{
	AgentClaudeCode: "Claude Code",
	AgentCodex:      "Codex CLI",
	AgentGemini:     "Gemini CLI",
	AgentCopilot:    "Copilot CLI",
}

// AgentSession is the session of a request as windows, stops and coverage
// match it: an agent other than Claude Code has its session id prefixed
// with its name ("codex:…"), so that a window approved in one agent's
// session never covers another agent's. Claude Code keeps the bare id,
// as it always had.
func AgentSession(agent, session string) string {
	if session == "" || agent == "" || agent == AgentClaudeCode {
		return session
	}
	return agent + ":" + session
}

// agentPrefixed reports whether a session id begins as AgentSession
// prefixes another agent's.
func agentPrefixed(session string) bool {
	name, _, ok := strings.Cut(session, ":")
	return ok && name != AgentClaudeCode && CodingAgents[name] != ""
}

// CheckAgent checks a request's context.agent and context.session_id
// together: the agent is empty or one of CodingAgents, and a session id
// that was not prefixed by AgentSession does not look as if it were.
func CheckAgent(c RequestContext) error {
	if c.Agent != "" && CodingAgents[c.Agent] == "" {
		return Errorf(EINVALID, "context.agent must be one of claude-code, codex, gemini and copilot, or absent")
	}
	if agentPrefixed(c.SessionID) {
		return Errorf(EINVALID, "context.session_id must not begin with a coding agent's name and a colon")
	}
	return nil
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
	// Ran is what the agent's hook reported it ran under the approval,
	// after the call; zero until a report came (Store.RecordRan).
	Ran Ran
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
	// Original is the action as the agent asked for it, when an approver
	// edited it before approving; nil otherwise. Arguments, ArgsHash,
	// Preview, PreviewHash, RiskReasons, Protected, Scope and
	// ArgumentsText are then the edited action's.
	Original *Original
	// Links are stored with a new request and never read back with it.
	Links []Link
	// Outbox holds the notifications of a new request, stored in its
	// transaction and never read back with it.
	Outbox []OutboxItem
	// Audience is who the request's notifications are for, set by the
	// service before it builds them and never stored; nil: every
	// channel of the account.
	Audience *Audience
}

// Audience is who may decide a request a team rule routes or counts, as
// its notifications see it.
type Audience struct {
	// Approvers are the usernames who may decide it; empty: every
	// approver of the account whose role decides.
	Approvers []string
	// NoLinks says that no one-time link may decide it: a link stands for
	// no approver, so it can be neither routed to nor counted.
	NoLinks bool
}

// BindingHash is the hex SHA-256 of what an approval of the request
// covers: its kind, action, argument hash and preview hash. A step-up's
// challenge and its proof (Verification.BindingHash) name it, so that a
// passkey confirms this binding and nothing else.
func (r *Request) BindingHash() string {
	sum := sha256.Sum256([]byte(string(r.Kind) + "\x00" + r.Action + "\x00" + r.ArgsHash + "\x00" + r.PreviewHash))
	return hex.EncodeToString(sum[:])
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

// ErrRequestNotFound is the refusal of a request that does not exist, or
// not for the caller: the two are one answer so that ids of other keys and
// accounts reveal nothing.
func ErrRequestNotFound() *Error {
	return Errorf(ENOTFOUND, "request not found")
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

// TwinTTLRange is the range of TTLs, in nanoseconds, that a pending
// request may have been asked with to be the twin of r: r's own within
// TwinTTLSlack either way.
func TwinTTLRange(r *Request, now time.Time) (lo, hi int64) {
	ttl := RequestTTL(r, now)
	return int64(ttl - TwinTTLSlack), int64(ttl + TwinTTLSlack)
}

// Transition describes one conditional state change of a request.
type Transition struct {
	ID   string
	From []Status
	To   Status
	Now  time.Time
	// KeyID, when set, must be the key that created the request; another
	// key's request is ENOTFOUND.
	KeyID string
	// AccountID, when set, must be the request's account; another
	// account's request is ENOTFOUND.
	AccountID string
	DecidedBy string
	Reason    string
	// ExpiresAt, when not zero, is the least expiry the request keeps: a
	// later one stays (an approval keeps a short grace to be consumed in).
	ExpiresAt time.Time
	// Window, when set with an approval, is opened in the same transaction.
	Window *AutoApproveWindow
	// Edited, with an approval from pending only, is the request as an
	// approver's edit makes it (Service.Edited): its Arguments, ArgsHash,
	// Preview, PreviewHash, RiskReasons, Protected, Scope, ArgumentsText
	// and Original replace the request's in the same conditional
	// statement, which changes nothing unless the request still holds
	// the binding of Edited.Original and no original of its own.
	Edited *Request
	// Unedited, set on a consumption by an agent that does not run an
	// approver's edit, changes nothing when the request was edited
	// (ErrEditNotAccepted): such an agent would run the action as it
	// asked for it, not as approved.
	Unedited bool
}

// ErrEditNotAccepted refuses the consumption of an approval whose action
// an approver edited by an agent that does not say it runs the edited
// action: it would run the original instead. Nothing is consumed.
func ErrEditNotAccepted() *Error {
	return Errorf(ECONFLICT, "an approver edited this action before approving it, and this agent's countersign does not run edited actions "+
		"(it sends no Countersign-Accept-Edit header): nothing ran; update countersign where the agent runs, or deny this request and ask again")
}

// Validate reports whether t can be tried at all: it needs a known target
// and a source, and only an approval opens a window. Errors: EINVALID.
func (t Transition) Validate() error {
	if len(t.From) == 0 || !t.To.Valid() {
		return Errorf(EINVALID, "a transition needs a known target and at least one source status")
	}
	if t.Window != nil && t.To != StatusApproved {
		return Errorf(EINVALID, "only an approval opens an auto-approve window")
	}
	if t.Edited != nil && (t.To != StatusApproved || len(t.From) != 1 || t.From[0] != StatusPending ||
		t.Window != nil || t.Edited.Original == nil) {
		return Errorf(EINVALID, "only an approval of a pending request, without a window, replaces its action with an edit")
	}
	return nil
}

// EndsSession reports whether t, applied to a request of the agent
// session sessionID, stops that session: a stop closes the session's
// auto-approve windows and ends its unused approvals. A request of no
// session stops only itself.
func (t Transition) EndsSession(sessionID string) bool {
	return t.To == StatusStopped && sessionID != ""
}

// RefuseTransition explains why t changed nothing, given r, the request as
// it is now: another key's or account's request does not exist for the
// caller (ENOTFOUND); any other request is in a state that does not allow
// the change (ECONFLICT).
func RefuseTransition(t Transition, r *Request) error {
	if (t.KeyID != "" && r.KeyID != t.KeyID) || (t.AccountID != "" && r.AccountID != t.AccountID) {
		return ErrRequestNotFound()
	}
	switch {
	case r.Status == StatusExpired, r.Expired(t.Now):
		return Errorf(ECONFLICT, "request has expired")
	case t.Unedited && r.Original != nil && slices.Contains(t.From, r.Status):
		return ErrEditNotAccepted()
	case r.Status == StatusPending && t.Edited != nil && t.From[0] == StatusPending:
		return Errorf(ECONFLICT, "the request's action changed since it was read; reload the request and decide again")
	case r.Status == StatusPending:
		return Errorf(ECONFLICT, "request is still pending")
	}
	return Errorf(ECONFLICT, "request is already %s", r.Status)
}

// StoppedReason is the reason an approval ended by a stop of its session
// carries.
const StoppedReason = "the human stopped this agent session"

// StoppedDetail is the audit detail of an approval the stop stopID ended.
func StoppedDetail(stopID string) string {
	b, _ := json.Marshal(map[string]string{"stopped_with": stopID})
	return string(b)
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

// PendingLimit is the number of waiting requests at which the account of
// r may not add r, 0 for none: only a pending request waits for a human,
// and maxPending <= 0 means no limit.
func PendingLimit(r *Request, maxPending int) int {
	if r.Status == StatusPending && maxPending > 0 {
		return maxPending
	}
	return 0
}

// PendingLimitError is the ELIMIT of an account that has n requests
// waiting, the soonest of which expires at soonest (zero for none known).
// RetryAfter is when that one expires and so frees a place.
func PendingLimitError(n int, soonest, now time.Time) error {
	return &Error{
		Code: ELIMIT,
		Message: fmt.Sprintf("this account already has %d requests waiting for a decision; "+
			"decide or cancel one, or wait for one to expire, then ask again", n),
		RetryAfter: soonest.Sub(now),
	}
}

// ErrSeedIDTaken is the conflict of a new request whose seed request_id
// another request has.
func ErrSeedIDTaken() *Error {
	return Errorf(ECONFLICT, "another request already has this request_id")
}

// ErrNoApprovedMatch is the ENOTFOUND of a consumption that no live
// approval of the key matches.
func ErrNoApprovedMatch() *Error {
	return Errorf(ENOTFOUND, "no approved request matches")
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
	// Edit, with approve only, is the approver's change of the action:
	// the request is approved as edited (see Edit).
	Edit *Edit
	// Binding, with approve, is the binding hash (Request.BindingHash)
	// of the action the approver saw: an approval of a request whose
	// action is no longer that one is refused (ECONFLICT). It is needed
	// to approve a pending request another approver edited, whose
	// action changed while it waited for more votes: an approver who
	// read it before the edit, or a client that knows nothing of edits,
	// would otherwise vote for an action no one showed them.
	Binding string
}

// Edit is an approver's change of a request's action before approving it:
// the whole new arguments (the action — tool name, command word — stays).
// The server assesses the edited action again, so that an edit can only
// add risk reasons, never take them away.
type Edit struct {
	Arguments json.RawMessage
}

// Original is the action as the agent asked for it, kept when an
// approver edited the action before approving it.
type Original struct {
	Arguments   json.RawMessage // RFC 8785 canonical JSON
	ArgsHash    string
	Preview     string
	PreviewHash string
	RiskReasons []string
}

// EncodeOriginal is the stored text of o: JSON, "" for none. Its field
// names are part of the stores' format: they find an edited approval by
// its original binding, the "ArgsHash" and "PreviewHash" of this text
// (Store.ConsumeApproved).
func EncodeOriginal(o *Original) (string, error) {
	if o == nil {
		return "", nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return "", fmt.Errorf("encode the original action: %w", err)
	}
	return string(b), nil
}

// DecodeOriginal reads what EncodeOriginal wrote; "" is none.
func DecodeOriginal(text string) (*Original, error) {
	if text == "" {
		return nil, nil
	}
	var o Original
	if err := json.Unmarshal([]byte(text), &o); err != nil {
		return nil, err
	}
	return &o, nil
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

// Limits of a request list: a filter of no Limit gets
// DefaultRequestListLimit, and none gets more than MaxRequestListLimit.
const (
	DefaultRequestListLimit = 50
	MaxRequestListLimit     = 500
)

// Check refuses a filter of no account: requests are never listed across
// accounts. Errors: EINVALID.
func (f RequestFilter) Check() error {
	if f.AccountID == "" {
		return ErrListNeedsAccount()
	}
	return nil
}

// MatchesNothing reports whether f keeps no request whatever is stored:
// an empty, non-nil list of statuses.
func (f RequestFilter) MatchesNothing() bool {
	return f.Statuses != nil && len(f.Statuses) == 0
}

// PageSize is how many requests, at most, a list by f returns.
func (f RequestFilter) PageSize() int {
	if f.Limit <= 0 {
		return DefaultRequestListLimit
	}
	return min(f.Limit, MaxRequestListLimit)
}

// ErrListNeedsAccount is the refusal of a request list of no account:
// requests are never listed across accounts.
func ErrListNeedsAccount() *Error {
	return Errorf(EINVALID, "an account is required to list requests")
}
