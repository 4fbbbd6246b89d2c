package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

// testPasskeys: passkeys round-trip, belong to one approver, are found by
// credential id, keep unique credential ids and names, count uses in one
// conditional statement and go with their approver.
func testPasskeys(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	alice := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "alice", PasswordHash: "", CreatedAt: Base}
	bob := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "bob", PasswordHash: "x", CreatedAt: Base}
	for _, a := range []*countersign.Approver{alice, bob} {
		if err := s.CreateApprover(ctx, a); err != nil {
			t.Fatalf("CreateApprover: %v", err)
		}
	}
	got, err := s.ApproverByID(ctx, alice.ID)
	if err != nil || got.PasswordHash != "" || got.Username != "alice" {
		t.Fatalf("a passkey-only approver: %+v, %v; want alice with an empty password hash", got, err)
	}
	_, err = s.ApproverByID(ctx, "apr_missing")
	wantCode(t, "ApproverByID(missing)", err, countersign.ENOTFOUND)
	pk := &countersign.Passkey{ID: "pk_1", ApproverID: alice.ID, CredentialID: []byte{0, 1, 2, 255}, PublicKey: []byte{0xa5, 1, 2},
		SignCount: 3, AAGUID: make([]byte, 16), Transports: []string{"internal"}, Flags: 0x45, Name: "laptop", CreatedAt: Base}
	if err := s.CreatePasskey(ctx, pk); err != nil {
		t.Fatalf("CreatePasskey: %v", err)
	}
	two := &countersign.Passkey{ID: "pk_2", ApproverID: alice.ID, CredentialID: []byte{7}, PublicKey: []byte{1},
		AAGUID: []byte{}, Transports: []string{}, Name: "phone", CreatedAt: Base.Add(time.Second)}
	if err := s.CreatePasskey(ctx, two); err != nil {
		t.Fatalf("CreatePasskey(second): %v", err)
	}
	wantCode(t, "CreatePasskey with a taken credential id", s.CreatePasskey(ctx, &countersign.Passkey{
		ID: "pk_3", ApproverID: bob.ID, CredentialID: []byte{7}, PublicKey: []byte{1}, Name: "x", CreatedAt: Base}), countersign.ECONFLICT)
	wantCode(t, "CreatePasskey with a taken name", s.CreatePasskey(ctx, &countersign.Passkey{
		ID: "pk_4", ApproverID: alice.ID, CredentialID: []byte{8}, PublicKey: []byte{1}, Name: "phone", CreatedAt: Base}), countersign.ECONFLICT)
	wantCode(t, "CreatePasskey for a missing approver", s.CreatePasskey(ctx, &countersign.Passkey{
		ID: "pk_5", ApproverID: "apr_missing", CredentialID: []byte{9}, PublicKey: []byte{1}, Name: "x", CreatedAt: Base}), countersign.ENOTFOUND)

	list, err := s.Passkeys(ctx, alice.ID)
	if err != nil {
		t.Fatalf("Passkeys: %v", err)
	}
	same(t, "Passkeys", list, []*countersign.Passkey{pk, two})
	if list, err := s.Passkeys(ctx, bob.ID); err != nil || len(list) != 0 {
		t.Fatalf("Passkeys of another approver: %v, %v; want none", list, err)
	}
	byID, err := s.PasskeyByCredentialID(ctx, []byte{0, 1, 2, 255})
	if err != nil {
		t.Fatalf("PasskeyByCredentialID: %v", err)
	}
	same(t, "PasskeyByCredentialID", byID, pk)
	_, err = s.PasskeyByCredentialID(ctx, []byte{0, 1, 2})
	wantCode(t, "PasskeyByCredentialID(missing)", err, countersign.ENOTFOUND)

	// The counter must advance; a counter of 0 stays allowed for an
	// authenticator that keeps none.
	wantCode(t, "UsePasskey with the same counter", s.UsePasskey(ctx, "pk_1", 3, Base.Add(time.Minute)), countersign.ECONFLICT)
	wantCode(t, "UsePasskey with a lower counter", s.UsePasskey(ctx, "pk_1", 2, Base.Add(time.Minute)), countersign.ECONFLICT)
	if err := s.UsePasskey(ctx, "pk_1", 4, Base.Add(time.Minute)); err != nil {
		t.Fatalf("UsePasskey: %v", err)
	}
	for i := range 2 {
		if err := s.UsePasskey(ctx, "pk_2", 0, Base.Add(time.Duration(i+1)*time.Minute)); err != nil {
			t.Fatalf("UsePasskey without a counter: %v", err)
		}
	}
	wantCode(t, "UsePasskey(missing)", s.UsePasskey(ctx, "pk_missing", 9, Base), countersign.ENOTFOUND)
	byID, _ = s.PasskeyByCredentialID(ctx, []byte{0, 1, 2, 255})
	if byID.SignCount != 4 || !byID.LastUsedAt.Equal(Base.Add(time.Minute)) {
		t.Fatalf("after a use: count %d, last used %v", byID.SignCount, byID.LastUsedAt)
	}

	// Of N uses of one counter value at once, exactly one passes.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.UsePasskey(ctx, "pk_1", 5, Base.Add(2*time.Minute)) == nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d racing uses of one counter value passed, want 1", won)
	}

	wantCode(t, "RemovePasskey of another approver's", s.RemovePasskey(ctx, bob.ID, "laptop", true), countersign.ENOTFOUND)
	if err := s.RemovePasskey(ctx, alice.ID, "laptop", true); err != nil {
		t.Fatalf("RemovePasskey by name: %v", err)
	}
	if err := s.RemovePasskey(ctx, alice.ID, "pk_2", false); err != nil {
		t.Fatalf("RemovePasskey by id: %v", err)
	}
	wantCode(t, "RemovePasskey again", s.RemovePasskey(ctx, alice.ID, "pk_2", false), countersign.ENOTFOUND)

	// Removing an approver removes its passkeys.
	if err := s.CreatePasskey(ctx, &countersign.Passkey{ID: "pk_6", ApproverID: bob.ID, CredentialID: []byte{6}, PublicKey: []byte{1},
		Name: "key", CreatedAt: Base}); err != nil {
		t.Fatalf("CreatePasskey: %v", err)
	}
	if _, err := s.RemoveApprover(ctx, bob.ID, Base); err != nil {
		t.Fatalf("RemoveApprover with a passkey: %v", err)
	}
	_, err = s.PasskeyByCredentialID(ctx, []byte{6})
	wantCode(t, "PasskeyByCredentialID after RemoveApprover", err, countersign.ENOTFOUND)
}

// testCeremonies: a ceremony is taken once, only for its purpose, and not
// after it expired.
func testCeremonies(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	c := &countersign.Ceremony{Hash: sha("c1"), Purpose: "stepup", ApproverID: "apr_x", Data: `{"a":1}`, ExpiresAt: Base.Add(time.Minute)}
	if err := s.CreateCeremony(ctx, c, Base); err != nil {
		t.Fatalf("CreateCeremony: %v", err)
	}
	_, err := s.TakeCeremony(ctx, c.Hash, "signin", Base)
	wantCode(t, "TakeCeremony for another purpose", err, countersign.ENOTFOUND)
	peek, err := s.Ceremony(ctx, c.Hash, "stepup", Base)
	if err != nil {
		t.Fatalf("Ceremony: %v", err)
	}
	same(t, "Ceremony", peek, c)
	_, err = s.Ceremony(ctx, c.Hash, "stepup", Base.Add(time.Minute))
	wantCode(t, "Ceremony at its expiry", err, countersign.ENOTFOUND)
	_, err = s.Ceremony(ctx, c.Hash, "signin", Base)
	wantCode(t, "Ceremony for another purpose", err, countersign.ENOTFOUND)
	got, err := s.TakeCeremony(ctx, c.Hash, "stepup", Base.Add(time.Second))
	if err != nil {
		t.Fatalf("TakeCeremony: %v", err)
	}
	same(t, "TakeCeremony", got, c)
	_, err = s.TakeCeremony(ctx, c.Hash, "stepup", Base.Add(time.Second))
	wantCode(t, "TakeCeremony twice", err, countersign.ENOTFOUND)

	old := &countersign.Ceremony{Hash: sha("c2"), Purpose: "signin", Data: "{}", ExpiresAt: Base.Add(time.Minute)}
	if err := s.CreateCeremony(ctx, old, Base); err != nil {
		t.Fatalf("CreateCeremony: %v", err)
	}
	_, err = s.TakeCeremony(ctx, old.Hash, "signin", Base.Add(time.Minute))
	wantCode(t, "TakeCeremony at its expiry", err, countersign.ENOTFOUND)

	// Of N takers of one ceremony, exactly one gets it.
	race := &countersign.Ceremony{Hash: sha("c3"), Purpose: "signin", Data: "{}", ExpiresAt: Base.Add(time.Minute)}
	if err := s.CreateCeremony(ctx, race, Base); err != nil {
		t.Fatalf("CreateCeremony: %v", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.TakeCeremony(ctx, race.Hash, "signin", Base); err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d racing takers got one ceremony, want 1", won)
	}
}
