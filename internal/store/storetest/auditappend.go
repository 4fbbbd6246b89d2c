package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// testAppendAudit: an entry appended on its own (no request) takes the
// next place in the same chain as the entries of requests, with exactly
// the fields given, and the chain still verifies; a bad event or an
// unknown account is refused and appends nothing.
func testAppendAudit(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()

	a := create(t, s, newRequest(f.key, "Bash", `{"a":1}`, "a"), Base.Add(1))
	up := countersign.AuditEvent{Event: "file_uploaded", Actor: "approver:alice",
		Detail: `{"reference":"K7F-2QX","kind":"application/pdf","size":12,"sha256":"ab"}`}
	if err := s.AppendAudit(ctx, f.account.ID, Base.Add(2*time.Second), up); err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
	create(t, s, newRequest(f.key, "Bash", `{"b":1}`, "b"), Base.Add(3*time.Second))

	bad := []struct {
		name    string
		account string
		ev      countersign.AuditEvent
		code    string
	}{
		{"unknown account", "acc_nobody", up, countersign.ENOTFOUND},
		{"no account", "", up, countersign.EINVALID},
		{"no event", f.account.ID, countersign.AuditEvent{Actor: "system", Detail: "{}"}, countersign.EINVALID},
		{"no actor", f.account.ID, countersign.AuditEvent{Event: "x", Detail: "{}"}, countersign.EINVALID},
		{"NUL", f.account.ID, countersign.AuditEvent{Event: "x", Actor: "key:\x00", Detail: "{}"}, countersign.EINVALID},
		{"detail not an object", f.account.ID, countersign.AuditEvent{Event: "x", Actor: "system", Detail: `"text"`}, countersign.EINVALID},
		{"detail not JSON", f.account.ID, countersign.AuditEvent{Event: "x", Actor: "system", Detail: `{"a":`}, countersign.EINVALID},
		{"detail too long", f.account.ID, countersign.AuditEvent{Event: "x", Actor: "system",
			Detail: `{"a":"` + strings.Repeat("x", countersign.MaxAuditDetail) + `"}`}, countersign.EINVALID},
		{"event too long", f.account.ID, countersign.AuditEvent{Event: strings.Repeat("x", countersign.MaxAuditEvent+1), Actor: "system", Detail: "{}"}, countersign.EINVALID},
	}
	for _, b := range bad {
		if err := s.AppendAudit(ctx, b.account, Base.Add(4*time.Second), b.ev); countersign.ErrorCode(err) != b.code {
			t.Errorf("AppendAudit (%s) = %v, want %s", b.name, err, b.code)
		}
	}

	problems, n := Verify(t, s)
	if len(problems) != 0 {
		t.Errorf("the chain does not verify: %v", problems)
	}
	if n != 3 {
		t.Fatalf("the log has %d entries, want 3 (refused appends must add none)", n)
	}
	entries, err := s.AuditLog(ctx, 0, 100)
	if err != nil || len(entries) != 3 {
		t.Fatalf("AuditLog: %d entries, %v", len(entries), err)
	}
	want := countersign.AuditEntry{Seq: 2, At: Base.Add(2 * time.Second), AccountID: f.account.ID, RequestID: "",
		Event: up.Event, Actor: up.Actor, Detail: up.Detail, PrevHash: entries[0].Hash}
	want.Hash = chainValue(s, &want)
	same(t, "appended audit entry", entries[1], &want)
	if entries[0].RequestID != a.ID || entries[2].PrevHash != entries[1].Hash {
		t.Errorf("the appended entry is not between the two requests' entries: %+v", entries)
	}
	if seq, hash, _ := s.AuditHead(ctx); seq != 3 || hash != entries[2].Hash {
		t.Errorf("AuditHead = %d, %s; want 3, %s", seq, hash, entries[2].Hash)
	}
}
