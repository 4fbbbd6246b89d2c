package countersign_test

import (
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/testutil"
)

func TestReference(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		ref := countersign.NewReference()
		if len(ref) != 6 {
			t.Fatalf("reference %q is not 6 characters", ref)
		}
		for _, c := range ref {
			if !strings.ContainsRune(countersign.ReferenceAlphabet, c) {
				t.Fatalf("reference %q has %q outside the alphabet", ref, c)
			}
		}
		seen[ref] = true
	}
	if len(seen) < 1990 {
		t.Fatalf("only %d distinct references of 2000", len(seen))
	}
	for _, bad := range []string{"K7F-2Q", "K7F-2QO", "", "I11-111", "K7F-2QX1"} {
		if _, ok := countersign.ParseReference(bad); ok {
			t.Errorf("ParseReference(%q) accepted", bad)
		}
	}
	for _, good := range []string{"K7F-2QX", "k7f2qx", " K7F 2QX "} {
		if got, ok := countersign.ParseReference(good); !ok || got != "K7F2QX" {
			t.Errorf("ParseReference(%q) = %q, %v", good, got, ok)
		}
	}
	if got := countersign.FormatReference("K7F2QX"); got != "K7F-2QX" {
		t.Errorf("FormatReference = %q", got)
	}
}

func TestSecrets(t *testing.T) {
	k := countersign.NewSecret(countersign.AgentKeyPrefix)
	if !strings.HasPrefix(k, "csk_") || len(k) != 4+52 {
		t.Fatalf("agent key %q", k)
	}
	if h := countersign.HashSecret(k); len(h) != 64 || strings.Contains(h, k) {
		t.Fatalf("hash %q", h)
	}
	if id := countersign.NewID("req_"); !strings.HasPrefix(id, "req_") || len(id) != 4+26 {
		t.Fatalf("id %q", id)
	}
}

func chain(n int) []*countersign.AuditEntry {
	prev := countersign.AuditGenesis
	var out []*countersign.AuditEntry
	for i := 1; i <= n; i++ {
		e := &countersign.AuditEntry{Seq: int64(i), At: time.Unix(int64(i), 5), RequestID: "req_x", Event: "created", Actor: "system", Detail: "{}", PrevHash: prev}
		e.Hash = e.ComputeHash()
		prev = e.Hash
		out = append(out, e)
	}
	return out
}

func verify(entries []*countersign.AuditEntry, headSeq int64, headHash string) []countersign.AuditProblem {
	v := countersign.NewAuditVerifier()
	for _, e := range entries {
		v.Add(e)
	}
	return v.Finish(headSeq, headHash)
}

func TestAuditVerifier(t *testing.T) {
	log := chain(5)
	if p := verify(log, 5, log[4].Hash); len(p) != 0 {
		t.Fatalf("intact chain: %v", p)
	}
	changed := chain(5)
	changed[2].Detail = `{"x":1}`
	if p := verify(changed, 5, changed[4].Hash); len(p) == 0 || p[0].Seq != 3 {
		t.Fatalf("changed entry 3: %v", p)
	}
	removed := append(chain(5)[:2:2], chain(5)[3:]...)
	if p := verify(removed, 5, log[4].Hash); len(p) == 0 || p[0].Seq != 4 {
		t.Fatalf("removed entry 3: %v", p)
	}
	if p := verify(log[:4], 5, log[4].Hash); len(p) != 1 {
		t.Fatalf("removed last entry: %v", p)
	}
	if p := verify(log, 5, "beef"); len(p) != 1 {
		t.Fatalf("head hash differs: %v", p)
	}
}

// Ordered ids sort by the time they were made, look like NewID's, and do
// not repeat within a millisecond.
func TestNewOrderedID(t *testing.T) {
	plain := countersign.NewID("req_")
	seen := map[string]bool{}
	for range 2000 {
		id := countersign.NewOrderedID("req_")
		if len(id) != len(plain) || strings.Trim(id[4:], "abcdefghijklmnopqrstuvwxyz234567") != "" || !strings.HasPrefix(id, "req_") {
			t.Fatalf("id %q does not look like %q", id, plain)
		}
		if seen[id] {
			t.Fatalf("id %q repeated", id)
		}
		seen[id] = true
	}
	// The time is in the first 48 bits: the first 9 characters hold it
	// in units of 8 ms, and a later unit sorts after an earlier one.
	a := countersign.NewOrderedID("")
	var b string
	testutil.Eventually(t, func() bool {
		b = countersign.NewOrderedID("")
		return b[:9] != a[:9]
	}, "a new time part in the ids")
	if a[:9] >= b[:9] {
		t.Errorf("time part of %q is not before that of %q", a, b)
	}
}
