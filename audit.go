package countersign

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// AuditEntry is one row of the append-only audit log. Each row's Hash covers
// its own fields and the Hash of the row before it, so a changed, inserted
// or removed row breaks the chain.
type AuditEntry struct {
	Seq       int64
	At        time.Time
	AccountID string
	RequestID string
	Event     string
	Actor     string
	Detail    string
	PrevHash  string
	Hash      string
}

// AuditGenesis is the PrevHash of the first entry.
const AuditGenesis = "0000000000000000000000000000000000000000000000000000000000000000"

// ComputeHash returns the bare chain hash of e from its fields and
// PrevHash: SHA-256 of its encoding. Entries written before the store was
// sealed with a secret key carry it; later ones carry SecretKey.AuditMAC.
func (e *AuditEntry) ComputeHash() string {
	sum := sha256.Sum256([]byte(e.encode()))
	return hex.EncodeToString(sum[:])
}

// encode is what the chain value of e covers. Every field is
// length-prefixed so that no two entries encode alike.
func (e *AuditEntry) encode() string {
	var b strings.Builder
	field := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	field(e.PrevHash)
	field(strconv.FormatInt(e.Seq, 10))
	field(strconv.FormatInt(e.At.UnixNano(), 10))
	field(e.AccountID)
	field(e.RequestID)
	field(e.Event)
	field(e.Actor)
	field(e.Detail)
	return b.String()
}

// AuditProblem is one break found by VerifyAudit.
type AuditProblem struct {
	Seq     int64
	Problem string
}

// AuditVerifier checks the chain one entry at a time, so that a long log is
// verified without holding it in memory.
type AuditVerifier struct {
	prevSeq  int64
	prevHash string
	// key and keyedFrom: entries from keyedFrom on carry the MAC under
	// key; none does when key is nil.
	key       *SecretKey
	keyedFrom int64
	Problems  []AuditProblem
	Count     int64
}

// NewAuditVerifier returns a verifier that expects the chain to start at
// the genesis hash.
func NewAuditVerifier() *AuditVerifier {
	return &AuditVerifier{prevHash: AuditGenesis}
}

// NewKeyedAuditVerifier returns a verifier for a chain keyed with key from
// entry keyedFrom on: entries before it carry bare hashes (they were
// written before the store was sealed), entries from it on the MAC, and
// the first keyed entry links to the last bare one, so that the older part
// cannot be rewritten either without the key.
func NewKeyedAuditVerifier(key *SecretKey, keyedFrom int64) *AuditVerifier {
	return &AuditVerifier{prevHash: AuditGenesis, key: key, keyedFrom: keyedFrom}
}

// Keyed reports whether the verifier checks MACs, and from which entry on.
func (v *AuditVerifier) Keyed() (bool, int64) { return v.key != nil, v.keyedFrom }

// Add checks the next entry of the log.
func (v *AuditVerifier) Add(e *AuditEntry) {
	v.Count++
	if e.Seq != v.prevSeq+1 {
		v.Problems = append(v.Problems, AuditProblem{e.Seq, "entries " + strconv.FormatInt(v.prevSeq+1, 10) + " to " + strconv.FormatInt(e.Seq-1, 10) + " are missing"})
	}
	if e.PrevHash != v.prevHash {
		v.Problems = append(v.Problems, AuditProblem{e.Seq, "does not link to the entry before it"})
	}
	want := ""
	if v.key != nil && e.Seq >= v.keyedFrom {
		want = v.key.AuditMAC(e)
	} else {
		want = e.ComputeHash()
	}
	if want != e.Hash {
		v.Problems = append(v.Problems, AuditProblem{e.Seq, "was changed after it was written"})
	}
	v.prevSeq, v.prevHash = e.Seq, e.Hash
}

// Finish compares the end of the chain with the recorded head and returns
// every problem found.
func (v *AuditVerifier) Finish(headSeq int64, headHash string) []AuditProblem {
	switch {
	case headSeq != v.prevSeq:
		v.Problems = append(v.Problems, AuditProblem{v.prevSeq, "the log ends at entry " + strconv.FormatInt(v.prevSeq, 10) + " but the recorded head is entry " + strconv.FormatInt(headSeq, 10)})
	case headSeq > 0 && headHash != v.prevHash:
		v.Problems = append(v.Problems, AuditProblem{v.prevSeq, "the last entry does not match the recorded head"})
	}
	return v.Problems
}

// DefaultAuditPage is how many entries an audit log read returns when the
// caller names no limit (a limit <= 0).
const DefaultAuditPage = 1000

// AuditPageSize is how many entries an audit log read of limit returns.
func AuditPageSize(limit int) int {
	if limit <= 0 {
		return DefaultAuditPage
	}
	return limit
}

// AuditKeyedEvent is the audit event that marks where a chain of bare
// hashes became keyed, written when an existing store is sealed.
const AuditKeyedEvent = "audit_keyed"

// KeyedEvent is the audit event a store that is sealed appends when it
// already holds entries: it links the old chain to the keyed one, which
// begins at keyedFrom, so that the old part cannot be rewritten without
// the key either.
func KeyedEvent(keyedFrom int64) AuditEvent {
	return AuditEvent{Event: AuditKeyedEvent, Actor: "system", Detail: `{"keyed_from":` + strconv.FormatInt(keyedFrom, 10) + `}`}
}
