package storetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// SealedDB is one database of a backend under test, for RunSealing.
type SealedDB struct {
	// Open opens the database with key, or without one when key is nil.
	// The stores it returns are closed when the test ends.
	Open func(key *countersign.SecretKey) (countersign.Store, error)
	// Exec runs a statement on the database as someone with access to its
	// files or its server would, past the store. Statements hold their
	// values as literals.
	Exec func(query string)
	// Bytes returns the one value a query reads, as such a person would.
	Bytes func(query string) []byte
}

// NewSecretKey returns a new random secret key.
func NewSecretKey(t testing.TB) *countersign.SecretKey {
	t.Helper()
	raw := make([]byte, countersign.SecretKeySize)
	rand.Read(raw)
	k, err := countersign.NewSecretKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// RunSealing runs the tests of a store's sealing with the server's secret
// key. newDB makes a new, empty database for each test.
func RunSealing(t *testing.T, newDB func(t *testing.T) SealedDB) {
	t.Run("NewStore", func(t *testing.T) { testSealNew(t, newDB(t)) })
	t.Run("Legacy", func(t *testing.T) { testSealLegacy(t, newDB(t)) })
	t.Run("RewrittenChain", func(t *testing.T) { testRewrittenChain(t, newDB(t)) })
	t.Run("CheckRemoved", func(t *testing.T) { testCheckRemoved(t, newDB(t)) })
	t.Run("Import", func(t *testing.T) { testSealedImport(t, newDB(t), newDB(t), newDB(t)) })
	t.Run("ImportUnsealed", func(t *testing.T) { testImportUnsealed(t, newDB(t), newDB(t)) })
}

func mustOpen(t *testing.T, db SealedDB, key *countersign.SecretKey) countersign.Store {
	t.Helper()
	s, err := db.Open(key)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// testSealNew: a new store holds its server keys wrapped, and opens only
// with the key that wrapped them.
func testSealNew(t *testing.T, db SealedDB) {
	key := NewSecretKey(t)
	s := mustOpen(t, db, key)
	csrf, err := s.ServerKey(t.Context(), "csrf", 32)
	if err != nil {
		t.Fatalf("ServerKey: %v", err)
	}
	stored := db.Bytes(`SELECT key FROM server_keys WHERE name = 'csrf'`)
	if bytes.Contains(stored, csrf) || len(stored) == 32 {
		t.Fatalf("the database holds the server key as it is: %x", stored)
	}
	if k, ok := s.(countersign.KeyedAuditor); !ok || k.AuditKeyedFrom() != 1 {
		t.Fatalf("a new store's chain is not keyed from its first entry")
	}
	f := newFixture(t, func(*testing.T) countersign.Store { return s })
	r := create(t, s, newRequest(f.key, "Bash", `{}`, "p"), Base)
	approve(t, s, r.ID, Base.Add(time.Second))
	s.Close()

	again := mustOpen(t, db, key)
	if got, err := again.ServerKey(t.Context(), "csrf", 32); err != nil || !bytes.Equal(got, csrf) {
		t.Fatalf("ServerKey after reopening = %x, %v; want %x", got, err, csrf)
	}
	if problems, n := Verify(t, again); len(problems) != 0 || n != 2 {
		t.Fatalf("the keyed chain: %d entries, problems %v", n, problems)
	}
	entries, _ := again.AuditLog(t.Context(), 0, 10)
	for _, e := range entries {
		if e.Hash == e.ComputeHash() || e.Hash != key.AuditMAC(e) {
			t.Errorf("entry %d carries %s, not its MAC", e.Seq, e.Hash)
		}
	}
	again.Close()

	if _, err := db.Open(NewSecretKey(t)); !errors.Is(err, countersign.ErrWrongSecretKey) {
		t.Errorf("Open with another key: %v, want ErrWrongSecretKey", err)
	}
	if _, err := db.Open(nil); !errors.Is(err, countersign.ErrSecretKeyNeeded) {
		t.Errorf("Open without a key: %v, want ErrSecretKeyNeeded", err)
	}
	if got := db.Bytes(`SELECT key FROM server_keys WHERE name = 'csrf'`); !bytes.Equal(got, stored) {
		t.Errorf("a refused open changed the stored key")
	}
}

// testSealLegacy: a store an earlier version wrote (server keys as they
// are, bare hashes) is sealed at its first open with a key, in place: the
// same keys, wrapped; the old chain verifies, linked to the keyed one by an
// entry that says from where it is keyed.
func testSealLegacy(t *testing.T, db SealedDB) {
	old := mustOpen(t, db, nil)
	seedKey, err := old.ServerKey(t.Context(), "seed-secret", 32)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(*testing.T) countersign.Store { return old })
	r := create(t, old, newRequest(f.key, "Bash", `{}`, "p"), Base)
	approve(t, old, r.ID, Base.Add(time.Second))
	if got := db.Bytes(`SELECT key FROM server_keys WHERE name = 'seed-secret'`); !bytes.Equal(got, seedKey) {
		t.Fatalf("the legacy store does not hold the key as it is")
	}
	old.Close()

	key := NewSecretKey(t)
	s := mustOpen(t, db, key)
	if got := db.Bytes(`SELECT key FROM server_keys WHERE name = 'seed-secret'`); bytes.Contains(got, seedKey) {
		t.Fatalf("sealing left the server key as it is")
	}
	if got, err := s.ServerKey(t.Context(), "seed-secret", 32); err != nil || !bytes.Equal(got, seedKey) {
		t.Fatalf("ServerKey after sealing = %x, %v; want the same key %x", got, err, seedKey)
	}
	k := s.(countersign.KeyedAuditor)
	if k.AuditKeyedFrom() != 3 {
		t.Fatalf("AuditKeyedFrom = %d, want 3", k.AuditKeyedFrom())
	}
	create(t, s, newRequest(f.key, "Bash", `{"n":2}`, "q"), Base.Add(2*time.Second))
	if problems, n := Verify(t, s); len(problems) != 0 || n != 4 {
		t.Fatalf("the sealed chain: %d entries, problems %v", n, problems)
	}
	entries, _ := s.AuditLog(t.Context(), 0, 10)
	if e := entries[2]; e.Event != "audit_keyed" || e.Detail != `{"keyed_from":3}` || e.Hash != key.AuditMAC(e) || e.PrevHash != entries[1].Hash {
		t.Errorf("entry 3 = %+v; want the keyed mark, linked to entry 2", e)
	}
	if e := entries[1]; e.Hash != e.ComputeHash() {
		t.Errorf("the old entry 2 was changed")
	}
	s.Close()

	// A second open seals nothing again.
	s = mustOpen(t, db, key)
	if got, err := s.ServerKey(t.Context(), "seed-secret", 32); err != nil || !bytes.Equal(got, seedKey) {
		t.Fatalf("ServerKey after the second open = %x, %v", got, err)
	}
	if seq, _, _ := s.AuditHead(t.Context()); seq != 4 {
		t.Errorf("the second open wrote to the chain: head %d, want 4", seq)
	}
}

// testRewrittenChain: someone with the database but not the key changes an
// entry and rewrites the whole chain and its head with bare hashes, as the
// chain was before it was keyed: the verifier with the key finds it.
func testRewrittenChain(t *testing.T, db SealedDB) {
	key := NewSecretKey(t)
	s := mustOpen(t, db, key)
	f := newFixture(t, func(*testing.T) countersign.Store { return s })
	r := create(t, s, newRequest(f.key, "Bash", `{}`, "p"), Base)
	approve(t, s, r.ID, Base.Add(time.Second))
	create(t, s, newRequest(f.key, "Bash", `{"n":2}`, "q"), Base.Add(2*time.Second))
	if problems, _ := Verify(t, s); len(problems) != 0 {
		t.Fatalf("before: %v", problems)
	}
	entries, err := s.AuditLog(t.Context(), 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	entries[1].Actor = "approver:mallory"
	prev := countersign.AuditGenesis
	for _, e := range entries {
		e.PrevHash = prev
		e.Hash = e.ComputeHash()
		prev = e.Hash
		db.Exec(fmt.Sprintf(`UPDATE audit_log SET actor = '%s', prev_hash = '%s', hash = '%s' WHERE seq = %d`, e.Actor, e.PrevHash, e.Hash, e.Seq))
	}
	db.Exec(fmt.Sprintf(`UPDATE audit_head SET hash = '%s' WHERE id = 1`, prev))

	problems, n := Verify(t, s)
	if n != 3 || len(problems) != 3 {
		t.Fatalf("the rewritten chain: %d entries, problems %v; want 3 entries, each found changed", n, problems)
	}
	for _, p := range problems {
		if !strings.Contains(p.Problem, "changed") {
			t.Errorf("problem %v", p)
		}
	}
	// The same rewrite passes a verifier without the key: only the MAC
	// finds it.
	v := countersign.NewAuditVerifier()
	for _, e := range entries {
		v.Add(e)
	}
	if p := v.Finish(3, prev); len(p) != 0 {
		t.Fatalf("the rewrite is not a valid bare chain: %v", p)
	}
}

// testCheckRemoved: a store whose record of the key was deleted is not
// sealed again over keys that are already wrapped.
func testCheckRemoved(t *testing.T, db SealedDB) {
	key := NewSecretKey(t)
	s := mustOpen(t, db, key)
	if _, err := s.ServerKey(t.Context(), "csrf", 32); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db.Exec(`DELETE FROM secret_key`)
	if _, err := db.Open(key); err == nil || !strings.Contains(err.Error(), "record of the key") {
		t.Fatalf("Open after the check was removed: %v", err)
	}
}

// testSealedImport: a copy of a sealed store opens in a store sealed with
// the same key, and in no other.
func testSealedImport(t *testing.T, srcDB, sameDB, otherDB SealedDB) {
	key := NewSecretKey(t)
	src := mustOpen(t, srcDB, key)
	csrf, err := src.ServerKey(t.Context(), "csrf", 32)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(*testing.T) countersign.Store { return src })
	create(t, src, newRequest(f.key, "Bash", `{}`, "p"), Base)
	exp, ok1 := src.(countersign.Exporter)
	same, ok2 := mustOpen(t, sameDB, key).(countersign.Importer)
	other, ok3 := mustOpen(t, otherDB, NewSecretKey(t)).(countersign.Importer)
	if !ok1 || !ok2 || !ok3 {
		t.Skip("the backend does not copy")
	}
	fill := func(put func(countersign.Record) error) error { return exp.Export(t.Context(), put) }
	if err := other.Import(t.Context(), fill); err == nil || !strings.Contains(err.Error(), "another secret key") {
		t.Fatalf("Import into a store of another key: %v", err)
	}
	if err := same.Import(t.Context(), fill); err != nil {
		t.Fatalf("Import into a store of the same key: %v", err)
	}
	got, err := same.(countersign.Store).ServerKey(t.Context(), "csrf", 32)
	if err != nil || !bytes.Equal(got, csrf) {
		t.Fatalf("the copy's server key = %x, %v; want %x", got, err, csrf)
	}
	if problems, n := Verify(t, same.(countersign.Store)); len(problems) != 0 || n != 1 {
		t.Fatalf("the copy's chain: %d entries, problems %v", n, problems)
	}
}

// testImportUnsealed: a copy of a store never sealed is sealed on the way
// into a store opened with a key: the same server keys, wrapped; the
// copied chain verifies, keyed from the next entry on.
func testImportUnsealed(t *testing.T, srcDB, dstDB SealedDB) {
	src := mustOpen(t, srcDB, nil)
	csrf, err := src.ServerKey(t.Context(), "csrf", 32)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(*testing.T) countersign.Store { return src })
	create(t, src, newRequest(f.key, "Bash", `{}`, "p"), Base)
	exp, ok1 := src.(countersign.Exporter)
	key := NewSecretKey(t)
	dst := mustOpen(t, dstDB, key)
	imp, ok2 := dst.(countersign.Importer)
	if !ok1 || !ok2 {
		t.Skip("the backend does not copy")
	}
	if err := imp.Import(t.Context(), func(put func(countersign.Record) error) error { return exp.Export(t.Context(), put) }); err != nil {
		t.Fatalf("Import: %v", err)
	}
	if got := dstDB.Bytes(`SELECT key FROM server_keys WHERE name = 'csrf'`); bytes.Contains(got, csrf) {
		t.Fatalf("the copy holds the server key as it is")
	}
	if got, err := dst.ServerKey(t.Context(), "csrf", 32); err != nil || !bytes.Equal(got, csrf) {
		t.Fatalf("the copy's server key = %x, %v; want %x", got, err, csrf)
	}
	if k := dst.(countersign.KeyedAuditor); k.AuditKeyedFrom() != 2 {
		t.Errorf("the copy is keyed from %d, want 2", k.AuditKeyedFrom())
	}
	create(t, dst, newRequest(f.key, "Bash", `{"n":2}`, "q"), Base.Add(time.Second))
	if problems, n := Verify(t, dst); len(problems) != 0 || n != 2 {
		t.Fatalf("the copy's chain: %d entries, problems %v", n, problems)
	}
	dst.Close()
	if _, err := dstDB.Open(key); err != nil {
		t.Fatalf("reopen the copy: %v", err)
	}
}
