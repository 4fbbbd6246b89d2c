package storetest

import (
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// chainValue is what the store should write as the chain value of e: the
// MAC under its secret key when it was opened with one (a new store is
// keyed from its first entry), else the bare hash.
func chainValue(s countersign.Store, e *countersign.AuditEntry) string {
	if k, ok := s.(countersign.KeyedAuditor); ok && k.SecretKey() != nil {
		return k.SecretKey().AuditMAC(e)
	}
	return e.ComputeHash()
}

// Verify reads the whole audit log of s in small pages, checks the chain
// against the recorded head, and returns the problems found and the number
// of entries read. Backends use it in their own tamper tests.
func Verify(t *testing.T, s countersign.Store) ([]countersign.AuditProblem, int64) {
	t.Helper()
	ctx := t.Context()
	// The head is read first, so that the log read after it reaches at
	// least as far.
	seq, hash, err := s.AuditHead(ctx)
	if err != nil {
		t.Fatalf("AuditHead: %v", err)
	}
	v := countersign.NewAuditVerifier()
	if k, ok := s.(countersign.KeyedAuditor); ok && k.SecretKey() != nil {
		v = countersign.NewKeyedAuditVerifier(k.SecretKey(), k.AuditKeyedFrom())
	}
	var after int64
	for {
		page, err := s.AuditLog(ctx, after, 2)
		if err != nil {
			t.Fatalf("AuditLog(%d): %v", after, err)
		}
		for _, e := range page {
			if e.Seq > seq {
				break
			}
			v.Add(e)
		}
		if len(page) == 0 || page[len(page)-1].Seq >= seq {
			break
		}
		after = page[len(page)-1].Seq
	}
	return v.Finish(seq, hash), v.Count
}

func testAuditChain(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()

	if problems, n := Verify(t, s); len(problems) != 0 || n != 0 {
		t.Fatalf("empty log: %d entries, problems %v", n, problems)
	}
	if seq, hash, err := s.AuditHead(ctx); err != nil || seq != 0 || hash != "" {
		t.Fatalf("AuditHead of an empty log: %d, %q, %v; want 0, \"\"", seq, hash, err)
	}

	a := create(t, s, newRequest(f.key, "Bash", `{"a":1}`, "a"), Base.Add(1))
	approve(t, s, a.ID, Base.Add(2*time.Second+3))
	b := create(t, s, newRequest(f.key2, "Bash", `{"b":1}`, "b"), Base.Add(3*time.Second))
	deny(t, s, b.ID, Base.Add(4*time.Second))
	c := newRequest(f.key, "Bash", `{"c":1}`, "c")
	c.ExpiresAt = Base.Add(time.Minute)
	create(t, s, c, Base.Add(5*time.Second))
	if _, err := s.ExpireRequests(ctx, "", Base.Add(time.Minute)); err != nil {
		t.Fatalf("ExpireRequests: %v", err)
	}

	problems, n := Verify(t, s)
	if len(problems) != 0 {
		t.Errorf("the chain does not verify: %v", problems)
	}
	if n != 6 {
		t.Errorf("the log has %d entries, want 6", n)
	}
	entries, err := s.AuditLog(ctx, 0, 100)
	if err != nil || len(entries) != 6 {
		t.Fatalf("AuditLog: %d entries, %v", len(entries), err)
	}
	want := []countersign.AuditEntry{
		{Seq: 1, At: Base.Add(1), AccountID: f.account.ID, RequestID: a.ID, Event: "created", Actor: "key:" + f.key.ID, Detail: `{"action":"Bash"}`},
		{Seq: 2, At: Base.Add(2*time.Second + 3), AccountID: f.account.ID, RequestID: a.ID, Event: "approved", Actor: "approver:alice", Detail: "{}"},
		{Seq: 3, At: Base.Add(3 * time.Second), AccountID: f.account.ID, RequestID: b.ID, Event: "created", Actor: "key:" + f.key2.ID, Detail: `{"action":"Bash"}`},
		{Seq: 4, At: Base.Add(4 * time.Second), AccountID: f.account.ID, RequestID: b.ID, Event: "denied", Actor: "approver:alice", Detail: `{"reason":"no"}`},
		{Seq: 5, At: Base.Add(5 * time.Second), AccountID: f.account.ID, RequestID: c.ID, Event: "created", Actor: "key:" + f.key.ID, Detail: `{"action":"Bash"}`},
		{Seq: 6, At: Base.Add(time.Minute), AccountID: f.account.ID, RequestID: c.ID, Event: "expired", Actor: "system", Detail: "{}"},
	}
	prev := countersign.AuditGenesis
	for i, e := range entries {
		w := want[i]
		w.PrevHash = prev
		w.Hash = chainValue(s, &w)
		same(t, "audit entry", e, &w)
		prev = e.Hash
	}
	if seq, hash, _ := s.AuditHead(ctx); seq != 6 || hash != entries[5].Hash {
		t.Errorf("AuditHead = %d, %s; want 6, %s", seq, hash, entries[5].Hash)
	}
}
