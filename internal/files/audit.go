package files

import (
	"context"
	"encoding/json"
	"time"

	"github.com/countersign/countersign"
)

// Auditor appends audit entries that belong to no request; a
// countersign.Store is one.
type Auditor interface {
	AppendAudit(ctx context.Context, accountID string, now time.Time, ev countersign.AuditEvent) error
}

// The audit events of file transfer. Their detail carries the reference,
// kind, size and SHA-256 of ADR 0008 and never a record's id (which opens
// the file) nor its name (which says what it holds).
const (
	AuditUploaded   = "file_uploaded"   // a human uploaded a file to a page
	AuditUsed       = "file_used"       // a tool call got an upload's bytes
	AuditKept       = "file_kept"       // an upstream's file was kept for download
	AuditDownloaded = "file_downloaded" // a human downloaded a kept file
)

// auditFacts is the detail of a file transfer entry: only what ADR 0008
// lets an audit log carry.
type auditFacts struct {
	Reference string `json:"reference"`
	Kind      string `json:"kind,omitempty"`
	Size      *int64 `json:"size,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
}

// AuditUploaded records that approver (a username) uploaded rec. An
// upload the audit log does not hold is not kept: on an error the record
// is dropped, and the page with it.
func (s *Store) AuditUploaded(ctx context.Context, rec *Record, approver string) error {
	err := s.audit(ctx, rec, AuditUploaded, "approver:"+approver, auditFacts{Reference: rec.Reference, Kind: rec.MIME, Size: &rec.Size, SHA256: rec.SHA256})
	if err != nil {
		s.drop(rec.ID)
	}
	return err
}

// AuditUsed records that a call of the agent key keyID got the bytes of
// the upload rec. The caller passes the bytes on only when it succeeds.
func (s *Store) AuditUsed(ctx context.Context, rec *Record, keyID string) error {
	return s.audit(ctx, rec, AuditUsed, "key:"+keyID, auditFacts{Reference: rec.Reference, SHA256: rec.SHA256})
}

// AuditKept records that a file an upstream returned to a call of the
// agent key keyID is kept for download as rec. A file the audit log does
// not hold is not kept: on an error the record is dropped.
func (s *Store) AuditKept(ctx context.Context, rec *Record, keyID string) error {
	err := s.audit(ctx, rec, AuditKept, "key:"+keyID, auditFacts{Reference: rec.Reference, Kind: rec.MIME, Size: &rec.Size, SHA256: rec.SHA256})
	if err != nil {
		s.drop(rec.ID)
	}
	return err
}

// AuditDownloaded records that approver (a username) downloaded rec. The
// caller serves the bytes only when it succeeds.
func (s *Store) AuditDownloaded(ctx context.Context, rec *Record, approver string) error {
	return s.audit(ctx, rec, AuditDownloaded, "approver:"+approver, auditFacts{Reference: rec.Reference})
}

// audit appends one entry of the record's account; without an Auditor
// (a store of tests, a gateway without a server) it writes none.
func (s *Store) audit(ctx context.Context, rec *Record, event, actor string, facts auditFacts) error {
	if s.cfg.Audit == nil {
		return nil
	}
	detail, err := json.Marshal(facts)
	if err == nil {
		err = s.cfg.Audit.AppendAudit(ctx, rec.Owner.Account, s.cfg.Clock.Now(), countersign.AuditEvent{Event: event, Actor: actor, Detail: string(detail)})
	}
	if err != nil {
		s.cfg.Log.Error("file transfer not written to the audit log", "reference", rec.Reference, "event", event, "err", err)
		return countersign.Errorf(countersign.EINTERNAL, "countersign could not write file %s to its audit log", rec.Reference)
	}
	return nil
}

// drop forgets a record and its bytes.
func (s *Store) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.records[id]; ok && e.reserved == 0 {
		s.dropLocked(id, e)
	}
}
