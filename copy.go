package countersign

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Exporter is implemented by a store that can hand over everything it
// holds, to move an instance to another backend (countersign store copy).
// It is not part of Store: only the copy needs it.
type Exporter interface {
	// Export reads the whole store in one consistent snapshot and calls put
	// with every record, verbatim (secrets stay as they are stored: hashes,
	// sealed seed secrets, server keys), in an order in which Import can
	// write them: accounts, approvers, memberships, agent keys, approver
	// tokens, passkeys, OAuth clients, grants, OAuth tokens, requests, links, auto-approve windows, sessions,
	// notification channels, outbox items, server keys, the check of
	// the secret key they are wrapped with (when they are), the audit log
	// by sequence number, and last the audit head. Server keys stay wrapped:
	// the copy opens only with the same secret key file. It stops at the first
	// error put returns.
	Export(ctx context.Context, put func(Record) error) error
}

// Importer is implemented by a store that can be filled with what an
// Exporter handed over.
type Importer interface {
	// Import writes into an empty store, in one transaction, every record
	// fill passes to put, verbatim: ids, times, statuses and the audit
	// chain are kept, so that the audit log verifies on the copy. Nothing
	// is written when fill or a write fails. Errors: ECONFLICT when the
	// store is not empty.
	Import(ctx context.Context, fill func(put func(Record) error) error) error
}

// Record is one row of a store in a copy: exactly one field is set. A
// Request's Links and Outbox are not set: its links come as Link records
// after the requests, and outbox items as OutboxItem records.
type Record struct {
	Account       *Account
	Approver      *Approver
	Membership    *Membership
	AgentKey      *AgentKey
	ApproverToken *ApproverToken
	OAuthClient   *OAuthClient
	Grant         *Grant
	OAuthToken    *OAuthToken
	Request       *Request
	Link          *Link
	Window        *AutoApproveWindow
	Coverage      *Coverage
	Session       *Session
	Passkey       *Passkey
	Channel       *Channel
	OutboxItem    *OutboxItem
	ServerKey     *ServerKey
	KeyCheck      *KeyCheck
	AuditEntry    *AuditEntry
	AuditHead     *AuditHead
}

// ServerKey is one of the server's own keys (see SessionStore.ServerKey).
type ServerKey struct {
	Name      string
	Key       []byte
	CreatedAt time.Time
}

// AuditHead is the newest entry of the audit log as recorded beside it.
type AuditHead struct {
	Seq  int64
	Hash string
}

// CheckImport refuses a copy whose source is sealed with another secret
// key than k, the target's (none: any).
func CheckImport(k *SecretKey, c KeyCheck) error {
	if k == nil {
		return nil
	}
	if err := k.Verify(c); err != nil {
		return fmt.Errorf("import: the source store is sealed with another secret key than the target's: %w", err)
	}
	return nil
}

// ErrTargetNotEmpty is the conflict of copying into a store that holds
// data already (full names what it holds): a copy never merges.
func ErrTargetNotEmpty(full []string) *Error {
	return Errorf(ECONFLICT, "the target store is not empty (it holds %s); copy only into a new, empty store", strings.Join(full, ", "))
}
