package countersign

import (
	"context"
	"time"
)

// Store keeps accounts, credentials, requests, windows and the audit log.
// Every method that changes a request writes its audit entry in the same
// transaction, so the log and the state never disagree. State changes that
// can race are single conditional statements: of two callers, exactly one
// succeeds.
type Store interface {
	SessionStore
	OutboxStore
	PasskeyStore
	OAuthStore
	VoteStore

	// CreateAccount adds an account. Errors: ECONFLICT if the name is taken.
	CreateAccount(ctx context.Context, a *Account) error
	// Account returns an account by id. Errors: ENOTFOUND.
	Account(ctx context.Context, id string) (*Account, error)
	// AccountByName returns an account by name. Errors: ENOTFOUND.
	AccountByName(ctx context.Context, name string) (*Account, error)
	// Accounts lists all accounts by name.
	Accounts(ctx context.Context) ([]*Account, error)

	// CreateAgentKey adds an agent key. Errors: ECONFLICT on a duplicate
	// name within the account, ENOTFOUND for an unknown account.
	CreateAgentKey(ctx context.Context, k *AgentKey) error
	// AgentKeyByHash returns a key, revoked or not, by the hash of its
	// secret. Errors: ENOTFOUND.
	AgentKeyByHash(ctx context.Context, hash string) (*AgentKey, error)
	// AgentKeys lists an account's keys.
	AgentKeys(ctx context.Context, accountID string) ([]*AgentKey, error)
	// RevokeAgentKey revokes a key of the account by id or name. The key of
	// a grant revokes its grant in the same transaction, as RevokeGrant
	// does (tokens, consent sessions), with an audit entry
	// (RevokedKeyRevoked). Errors: ENOTFOUND, ECONFLICT if already revoked.
	RevokeAgentKey(ctx context.Context, accountID, idOrName string, at time.Time) error

	// CreateApprover adds an approver. Errors: ECONFLICT if the username is
	// taken.
	CreateApprover(ctx context.Context, a *Approver) error
	// ApproverByUsername returns an approver. Errors: ENOTFOUND.
	ApproverByUsername(ctx context.Context, username string) (*Approver, error)
	// AddMembership makes an approver a member of an account with a role;
	// adding an existing membership is not an error and keeps its role.
	// Errors: ENOTFOUND for an unknown approver or account.
	AddMembership(ctx context.Context, approverID, accountID string, role Role, at time.Time) error
	// SetRole changes an approver's role in an account. Errors:
	// ErrNotMember.
	SetRole(ctx context.Context, approverID, accountID string, role Role) error
	// SetRoleKeepingAdmin is SetRole refused, changing nothing, when the
	// approver is the account's only admin and role is not admin. The
	// check and the change are one step: of two admins demoting each other
	// at once, one is refused. Errors: EINVALID, ErrNotMember,
	// ErrLastAdmin.
	SetRoleKeepingAdmin(ctx context.Context, approverID, accountID string, role Role) error
	// Members lists the approvers of an account by username.
	Members(ctx context.Context, accountID string) ([]*Member, error)
	// Memberships returns the ids of the accounts an approver belongs to.
	Memberships(ctx context.Context, approverID string) ([]string, error)

	// CreateApproverToken adds an approver API token. Errors: ENOTFOUND for
	// an unknown approver or account.
	CreateApproverToken(ctx context.Context, t *ApproverToken) error
	// ApproverTokens lists an approver's tokens, revoked or not, oldest
	// first.
	ApproverTokens(ctx context.Context, approverID string) ([]*ApproverToken, error)
	// RevokeApproverToken revokes a token of the approver by id or name.
	// Errors: ENOTFOUND, ECONFLICT if already revoked.
	RevokeApproverToken(ctx context.Context, approverID, idOrName string, at time.Time) error
	// ApproverTokenByHash returns a token, revoked or not, with its
	// approver. Errors: ENOTFOUND.
	ApproverTokenByHash(ctx context.Context, hash string) (*ApproverToken, *Approver, error)

	// CreateRequest stores a new request and its audit entry. Before
	// inserting, in the same transaction, it looks for a pending twin of
	// r that has not expired at now: a request of the same key with the
	// same binding (kind, action, argument hash, preview hash), the same
	// risk reasons, typed facts (tier, protected) and context, and the
	// same TTL within TwinTTLSlack (see
	// RequestTTL). It returns that one instead, with created false.
	// Otherwise, when the account already has
	// maxPending pending requests that have not expired at now, it fails
	// with ELIMIT (maxPending <= 0: no limit). A reference code already used by a live request of the
	// account fails with ErrReferenceTaken so that the caller draws
	// another; a SeedID already used fails with ECONFLICT, and so does a
	// request approved by an auto-approve window (DecidedByAutoApprove)
	// when no window of its key, session and kind has its
	// AutoApproveUntil any more or a stop of the session ended that window
	// (ErrWindowClosed), and a delete approved by a hook approval
	// (DecidedByCoverage) when it holds no claim on one (ClaimCoverage)
	// or a stop of the session came after its claim (ErrSessionStopped):
	// once a stop has returned, nothing it ended is let through, whatever
	// time the request read before it. The request's
	// Links are stored with it. Only requests with the same SeedID (empty
	// for the v1 API) are identical.
	CreateRequest(ctx context.Context, r *Request, maxPending int, now time.Time, ev AuditEvent) (got *Request, created bool, err error)
	// Request returns a request by id. Errors: ENOTFOUND.
	Request(ctx context.Context, id string) (*Request, error)
	// RequestBySeedID returns the request a seed-compatible client named.
	// Errors: ENOTFOUND.
	RequestBySeedID(ctx context.Context, seedID string) (*Request, error)
	// Link returns a link by the hash of its token. Errors: ENOTFOUND.
	Link(ctx context.Context, hash string) (*Link, error)
	// SeedKeys returns the unrevoked agent keys designated for the
	// seed-compatible routes, with their sealed secrets.
	SeedKeys(ctx context.Context) ([]*AgentKey, error)
	// Requests lists the requests of f.AccountID, newest first.
	Requests(ctx context.Context, f RequestFilter) ([]*Request, error)

	// Transition moves a request from one of the statuses in t.From to
	// t.To, only while it has not expired at t.Now, and writes ev. It
	// returns the updated request. A stop also closes the windows of the
	// request's key and session and marks them stopped (ActiveWindows
	// finds none of them, at any time), ends every approval of them not yet
	// consumed (status stopped, an audit entry each naming the stop), and
	// leaves its consumed Bash approvals nothing to cover: a later
	// ClaimCoverage of one fails with ECONFLICT.
	// When the request is not in one of those
	// statuses or has expired, it fails with ECONFLICT and changes nothing.
	// Errors: ENOTFOUND, ECONFLICT.
	Transition(ctx context.Context, t Transition, ev AuditEvent) (*Request, error)
	// ConsumeApproved takes an approval without an id: it finds an approved
	// request of keyID with this binding (kind, action, argument hash,
	// preview hash, the tier, and no SeedID) that has not expired at now, turns it
	// into consumed with ConsumedAt now, and writes ev for it, in one
	// conditional statement, so that of callers racing for one approval
	// exactly one gets it. When several match, the one decided first (then
	// created first, then by id) is taken. Another key's request, a
	// pending, consumed or expired one, or one with any part of the binding
	// different never matches. It returns the consumed request. The MCP
	// gateway uses it when a model retries a call that a human approved in
	// the inbox.
	//
	// When no request has the binding, a request an approver edited
	// before approving it matches by its Original (argument and preview
	// hashes, with the same key, kind, action and tier): the model retries
	// the call it asked about, not the edit. Only a caller that runs the
	// edited action (acceptEdits) consumes it, in the same way and order;
	// for any other the match is ErrEditNotAccepted and nothing changes.
	// This second search reads only the key's edited approvals, and only
	// after the first found nothing. Errors: ENOTFOUND when no request
	// matches, ECONFLICT (ErrEditNotAccepted).
	ConsumeApproved(ctx context.Context, keyID string, kind Kind, action, argsHash, previewHash string, tier Tier, acceptEdits bool, now time.Time, ev AuditEvent) (*Request, error)
	// RequestByCall returns the consumed request of keyID whose context
	// names the session sessionID (as stored, AgentSession's form) and the
	// agent's call callID, the newest when several do. Errors: ENOTFOUND.
	RequestByCall(ctx context.Context, keyID, sessionID, callID string) (*Request, error)
	// RecordRan records, once, what the agent reported it ran under the
	// consumed request id, and writes ev, in one conditional statement: a
	// request that holds a report already, or is not consumed, fails with
	// ECONFLICT and changes nothing. It returns the updated request.
	// Errors: ENOTFOUND, ECONFLICT.
	RecordRan(ctx context.Context, id string, ran Ran, ev AuditEvent) (*Request, error)
	// ExpireRequests marks every live request whose expiry is at or before
	// now (all of them, or only id when id is not empty) as expired, writes
	// an audit entry for each, and returns those it expired, by id.
	ExpireRequests(ctx context.Context, id string, now time.Time) ([]Expired, error)

	// ActiveWindows returns the auto-approve windows open at now for a key,
	// session, kind and action, the one open longest first, at most
	// MaxActiveWindows of them. Which of them covers a request is the
	// service's rule. None is not an error.
	ActiveWindows(ctx context.Context, keyID, sessionID string, kind Kind, action string, now time.Time) ([]*AutoApproveWindow, error)
	// ClaimCoverage records that the approval approvalID covers the
	// request requestID, once: a second claim of the same approval fails
	// with ECONFLICT and changes nothing. Errors: ENOTFOUND for an
	// unknown approval, ECONFLICT.
	ClaimCoverage(ctx context.Context, c Coverage) error

	// AuditLog returns the audit entries with Seq > after, in order, at most
	// limit of them.
	AuditLog(ctx context.Context, after int64, limit int) ([]*AuditEntry, error)
	// AuditHead returns the sequence number and hash of the newest entry as
	// recorded beside the log (zero and "" when empty).
	AuditHead(ctx context.Context) (seq int64, hash string, err error)
	// AppendAudit appends ev, at now, as an entry of the account that
	// belongs to no request (what file transfer did, say), in the same
	// chain as every other entry. Errors: EINVALID for an event that
	// CheckAuditEvent refuses, ENOTFOUND for an unknown account.
	AppendAudit(ctx context.Context, accountID string, now time.Time, ev AuditEvent) error

	// Close releases the store.
	Close() error
}

// MaxActiveWindows bounds the windows ActiveWindows returns: a session has
// few open at once, and a request is checked against each.
const MaxActiveWindows = 64

// Expired names a request that ExpireRequests expired.
type Expired struct {
	ID        string
	AccountID string
	Kind      Kind
}

// WriteHealth is implemented by a store that knows whether it can write at
// the moment: the SQLite store, whose disk may fill up. The health check
// answers 503 with the reason while it cannot.
type WriteHealth interface {
	// WriteError returns why the store cannot write now, in words fit for
	// anyone to read (no path, no internal detail), or "" when it can.
	WriteError() string
}

// StoreStats is what a store tells an operator about itself, for /metrics.
type StoreStats struct {
	// WriteFailures counts the writes that failed since the store was
	// opened, by cause: disk_full, io, read_only, corrupt, busy,
	// connection, other.
	WriteFailures map[string]int64
	// LogBytes is the size of the store's write-ahead log and MaxLogBytes
	// its bound (SQLite); both 0 for a store without a log of its own.
	LogBytes, MaxLogBytes int64
	// Checkpoints counts the copies of the log into the database since
	// the store was opened, and CheckpointTime is the time they took, all
	// together (SQLite).
	Checkpoints    int64
	CheckpointTime time.Duration
	// OldestUndelivered is when the oldest notification still waiting to
	// be delivered was made; zero when none waits.
	OldestUndelivered time.Time
}

// StatsReporter is implemented by a store that reports StoreStats.
type StatsReporter interface {
	StoreStats(ctx context.Context) (StoreStats, error)
}

// HistoryPruner is implemented by a store that can forget old history.
type HistoryPruner interface {
	// PruneRequests removes at most limit finished requests (neither
	// pending nor approved) created before before, oldest first, with
	// their links, auto-approve windows, coverages and notifications, and
	// returns how many it removed. A request the record of an
	// Idempotency-Key refers to stays until the record is pruned. The
	// audit log keeps every entry.
	PruneRequests(ctx context.Context, before time.Time, limit int) (int, error)
}
