package storetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/countersign/countersign"
)

func testSeed(t *testing.T, open Opener) {
	f := newFixture(t, open)
	s, ctx := f.s, t.Context()

	// A request with a seed id and links: both found by what the seed
	// routes hold.
	r := newRequest(f.key, "rm -rf /srv/a", `{"p":1}`, "delete /srv/a")
	r.SeedID = "delete:del_1700000000_1"
	r.Links = []countersign.Link{{Hash: sha("approve-token"), Action: "approve"}, {Hash: sha("deny-token"), Action: "deny"}}
	got := create(t, s, r, Base)
	if got.SeedID != r.SeedID {
		t.Fatalf("SeedID = %q", got.SeedID)
	}
	bySeed, err := s.RequestBySeedID(ctx, r.SeedID)
	if err != nil || bySeed.ID != r.ID {
		t.Fatalf("RequestBySeedID = %+v, %v", bySeed, err)
	}
	_, err = s.RequestBySeedID(ctx, "delete:unknown")
	wantCode(t, "RequestBySeedID(unknown)", err, countersign.ENOTFOUND)
	_, err = s.RequestBySeedID(ctx, "")
	wantCode(t, "RequestBySeedID(empty)", err, countersign.ENOTFOUND)
	l, err := s.Link(ctx, sha("deny-token"))
	if err != nil || l.RequestID != r.ID || l.Action != "deny" || !l.CreatedAt.Equal(Base) {
		t.Fatalf("Link = %+v, %v", l, err)
	}
	_, err = s.Link(ctx, sha("other"))
	wantCode(t, "Link(unknown)", err, countersign.ENOTFOUND)

	// The same seed id again with the same binding is the same request; with
	// another binding it is a conflict; v1 requests never match seed ones.
	again := newRequest(f.key, "rm -rf /srv/a", `{"p":1}`, "delete /srv/a")
	again.SeedID = r.SeedID
	if got, created, err := s.CreateRequest(ctx, again, 0, Base, createdEvent(again)); err != nil || created || got.ID != r.ID {
		t.Fatalf("same seed id and binding: %v created=%v err=%v", got, created, err)
	}
	clash := newRequest(f.key, "rm -rf /srv/b", `{"p":2}`, "delete /srv/b")
	clash.SeedID = r.SeedID
	_, _, err = s.CreateRequest(ctx, clash, 0, Base, createdEvent(clash))
	wantCode(t, "another binding under a used seed id", err, countersign.ECONFLICT)
	if errors.Is(err, countersign.ErrReferenceTaken) {
		t.Fatalf("a seed id conflict must not read as a taken reference: %v", err)
	}
	plain := newRequest(f.key, "rm -rf /srv/a", `{"p":1}`, "delete /srv/a")
	if _, created, err := s.CreateRequest(ctx, plain, 0, Base, createdEvent(plain)); err != nil || !created {
		t.Fatalf("a v1 request with the binding of a seed request: created=%v err=%v", created, err)
	}

	// Only unrevoked keys with a sealed secret are seed keys.
	sealed := []byte("sealed secret")
	k := &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: f.account.ID, Name: "seed", Hash: sha("seed-key"), Hint: "csk_seed…", CreatedAt: Base, SeedSecret: sealed}
	if err := s.CreateAgentKey(ctx, k); err != nil {
		t.Fatalf("CreateAgentKey: %v", err)
	}
	keys, err := s.SeedKeys(ctx)
	if err != nil || len(keys) != 1 || keys[0].ID != k.ID || !bytes.Equal(keys[0].SeedSecret, sealed) {
		t.Fatalf("SeedKeys = %+v, %v", keys, err)
	}
	if byHash, err := s.AgentKeyByHash(ctx, k.Hash); err != nil || !bytes.Equal(byHash.SeedSecret, sealed) {
		t.Fatalf("AgentKeyByHash of a seed key = %+v, %v", byHash, err)
	}
	if err := s.RevokeAgentKey(ctx, f.account.ID, "seed", Base.Add(time.Minute)); err != nil {
		t.Fatalf("RevokeAgentKey: %v", err)
	}
	if keys, err := s.SeedKeys(ctx); err != nil || len(keys) != 0 {
		t.Fatalf("SeedKeys after revoking = %+v, %v", keys, err)
	}
}
