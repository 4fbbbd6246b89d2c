package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/countersign/countersign"
)

// testLastPasskey: with keepLast, the last passkey of an approver without
// a password stays, whoever asks and however many at once; an approver
// with a password may remove every passkey, and so may the operator
// (keepLast false).
func testLastPasskey(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	passkeys := func(ap *countersign.Approver, n int) []string {
		t.Helper()
		var ids []string
		for i := range n {
			pk := &countersign.Passkey{ID: countersign.NewID("pk_"), ApproverID: ap.ID, CredentialID: []byte(countersign.NewID("cred_")),
				PublicKey: []byte{1}, Name: "key " + string(rune('a'+i)), CreatedAt: Base}
			if err := s.CreatePasskey(ctx, pk); err != nil {
				t.Fatalf("CreatePasskey: %v", err)
			}
			ids = append(ids, pk.ID)
		}
		return ids
	}
	approver := func(name, hash string) *countersign.Approver {
		t.Helper()
		ap := &countersign.Approver{ID: countersign.NewID("apr_"), Username: name, PasswordHash: hash, CreatedAt: Base}
		if err := s.CreateApprover(ctx, ap); err != nil {
			t.Fatalf("CreateApprover: %v", err)
		}
		return ap
	}
	left := func(ap *countersign.Approver) int {
		t.Helper()
		list, err := s.Passkeys(ctx, ap.ID)
		if err != nil {
			t.Fatalf("Passkeys: %v", err)
		}
		return len(list)
	}

	only := approver("only", "")
	ids := passkeys(only, 2)
	if err := s.RemovePasskey(ctx, only.ID, "key a", true); err != nil {
		t.Fatalf("RemovePasskey of one of two: %v", err)
	}
	wantError(t, "RemovePasskey of the last", s.RemovePasskey(ctx, only.ID, ids[1], true), countersign.ECONFLICT,
		"this is the only passkey of an approver without a password: removing it would lock the approver out")
	wantCode(t, "RemovePasskey of a removed one", s.RemovePasskey(ctx, only.ID, ids[0], true), countersign.ENOTFOUND)
	if n := left(only); n != 1 {
		t.Fatalf("%d passkeys after a refused removal, want 1", n)
	}
	if err := s.RemovePasskey(ctx, only.ID, ids[1], false); err != nil {
		t.Fatalf("RemovePasskey of the last by the operator: %v", err)
	}
	withPassword := approver("pw", "h")
	ids = passkeys(withPassword, 1)
	if err := s.RemovePasskey(ctx, withPassword.ID, ids[0], true); err != nil {
		t.Fatalf("RemovePasskey of the last of an approver with a password: %v", err)
	}
	// A passkey named as another's id: removing that name would take both,
	// so the other does not count as left.
	named := approver("named", "")
	ids = passkeys(named, 1)
	tricky := &countersign.Passkey{ID: countersign.NewID("pk_"), ApproverID: named.ID, CredentialID: []byte("tricky"), PublicKey: []byte{1},
		Name: ids[0], CreatedAt: Base}
	if err := s.CreatePasskey(ctx, tricky); err != nil {
		t.Fatalf("CreatePasskey: %v", err)
	}
	wantCode(t, "RemovePasskey of a name that is also an id", s.RemovePasskey(ctx, named.ID, ids[0], true), countersign.ECONFLICT)
	if n := left(named); n != 2 {
		t.Errorf("%d passkeys after a refused removal of two, want 2", n)
	}
}

// testLastPasskeyRace: N removals at once of the passkeys of an approver
// without a password, each keeping the last, leave exactly one: the check
// and the removal are one step. Several rounds, since a race shows only
// sometimes.
func testLastPasskeyRace(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	const rounds, n, keys = 4, 12, 2
	for round := range rounds {
		ap := &countersign.Approver{ID: countersign.NewID("apr_"), Username: "racer" + string(rune('a'+round)), CreatedAt: Base}
		if err := s.CreateApprover(ctx, ap); err != nil {
			t.Fatalf("CreateApprover: %v", err)
		}
		var ids []string
		for i := range keys {
			pk := &countersign.Passkey{ID: countersign.NewID("pk_"), ApproverID: ap.ID, CredentialID: []byte(countersign.NewID("cred_")),
				PublicKey: []byte{1}, Name: "key " + string(rune('a'+i)), CreatedAt: Base}
			if err := s.CreatePasskey(ctx, pk); err != nil {
				t.Fatalf("CreatePasskey: %v", err)
			}
			ids = append(ids, pk.ID)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		removed := 0
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := s.RemovePasskey(ctx, ap.ID, ids[i%keys], true)
				mu.Lock()
				defer mu.Unlock()
				switch countersign.ErrorCode(err) {
				case "":
					removed++
				case countersign.ECONFLICT, countersign.ENOTFOUND:
				default:
					t.Errorf("RemovePasskey: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		list, err := s.Passkeys(ctx, ap.ID)
		if err != nil {
			t.Fatalf("Passkeys: %v", err)
		}
		if len(list) != 1 || removed != keys-1 {
			t.Fatalf("round %d: %d racing removals removed %d passkeys of %d, leaving %d; want exactly one left", round, n, removed, keys, len(list))
		}
	}
}

// testClearPassword: the password of an approver goes only while it has a
// passkey, and of a removal of its last passkey and the clearing of its
// password, asked at once, at most one is made: the approver always keeps
// a way to sign in. Many rounds, since a race shows only sometimes.
func testClearPassword(t *testing.T, open Opener) {
	s, ctx := open(t), t.Context()
	approver := func(name string) *countersign.Approver {
		t.Helper()
		ap := &countersign.Approver{ID: countersign.NewID("apr_"), Username: name, PasswordHash: "h", CreatedAt: Base}
		if err := s.CreateApprover(ctx, ap); err != nil {
			t.Fatalf("CreateApprover: %v", err)
		}
		return ap
	}
	passkey := func(ap *countersign.Approver) string {
		t.Helper()
		pk := &countersign.Passkey{ID: countersign.NewID("pk_"), ApproverID: ap.ID, CredentialID: []byte(countersign.NewID("cred_")),
			PublicKey: []byte{1}, Name: "key", CreatedAt: Base}
		if err := s.CreatePasskey(ctx, pk); err != nil {
			t.Fatalf("CreatePasskey: %v", err)
		}
		return pk.ID
	}
	hash := func(ap *countersign.Approver) string {
		t.Helper()
		got, err := s.ApproverByID(ctx, ap.ID)
		if err != nil {
			t.Fatalf("ApproverByID: %v", err)
		}
		return got.PasswordHash
	}

	lone := approver("lone")
	_, err := s.ClearPassword(ctx, lone.ID, false, Base)
	wantError(t, "ClearPassword without a passkey", err, countersign.ECONFLICT,
		"the approver has no passkey: without a password it could never sign in")
	if h := hash(lone); h != "h" {
		t.Errorf("the refused clearing left the password %q", h)
	}
	_, err = s.ClearPassword(ctx, "apr_missing", false, Base)
	wantCode(t, "ClearPassword of a missing approver", err, countersign.ENOTFOUND)
	passkey(lone)
	if _, err := s.ClearPassword(ctx, lone.ID, false, Base); err != nil || hash(lone) != "" {
		t.Fatalf("ClearPassword with a passkey: %v, password %q", err, hash(lone))
	}

	for round := range 30 {
		ap := approver(fmt.Sprint("racer", round))
		pk := passkey(ap)
		var wg sync.WaitGroup
		var cleared, removed error
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, cleared = s.ClearPassword(ctx, ap.ID, false, Base)
		}()
		go func() {
			defer wg.Done()
			<-start
			removed = s.RemovePasskey(ctx, ap.ID, pk, true)
		}()
		close(start)
		wg.Wait()
		for what, err := range map[string]error{"ClearPassword": cleared, "RemovePasskey": removed} {
			if err != nil && countersign.ErrorCode(err) != countersign.ECONFLICT {
				t.Fatalf("round %d: %s: %v", round, what, err)
			}
		}
		list, err := s.Passkeys(ctx, ap.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cleared == nil && removed == nil || hash(ap) == "" && len(list) == 0 {
			t.Fatalf("round %d: the password cleared (%v) and the last passkey removed (%v) at once: %d passkeys, password %q",
				round, cleared, removed, len(list), hash(ap))
		}
	}
}
