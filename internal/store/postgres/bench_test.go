package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
)

// BenchmarkCycle is the store's share of one agent's cycle: create a
// request, approve it, consume it, each in its own transaction with its
// audit entry and announcement, one after the other.
//
//	go test -run '^$' -bench Cycle -benchtime 2000x ./internal/store/postgres
func BenchmarkCycle(b *testing.B) { benchCycle(b) }

// BenchmarkCycleSealed is BenchmarkCycle on a store sealed with a secret
// key, as countersign serve opens it: the database computes an HMAC for
// every audit entry instead of a bare hash.
func BenchmarkCycleSealed(b *testing.B) { benchCycle(b, WithSecretKey(storetest.NewSecretKey(b))) }

func benchCycle(b *testing.B, opts ...Option) {
	db, err := Open(b.Context(), Migrated.SchemaURL(b), nil, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := b.Context()
	acc := &countersign.Account{Name: "acme", CreatedAt: storetest.Base}
	if err := db.CreateAccount(ctx, acc); err != nil {
		b.Fatal(err)
	}
	key := &countersign.AgentKey{AccountID: acc.ID, Name: "laptop", Hash: "h", CreatedAt: storetest.Base}
	if err := db.CreateAgentKey(ctx, key); err != nil {
		b.Fatal(err)
	}
	ev := countersign.AuditEvent{Event: "x", Actor: "k", Detail: "{}"}
	b.ResetTimer()
	for i := range b.N {
		r := pendingRequest(key, fmt.Sprint(i))
		r.ExpiresAt = storetest.Base.Add(time.Hour)
		if _, _, err := db.CreateRequest(ctx, r, 100, storetest.Base, ev); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Transition(ctx, countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusPending},
			To: countersign.StatusApproved, Now: storetest.Base, DecidedBy: "a"}, ev); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Transition(ctx, countersign.Transition{ID: r.ID, From: []countersign.Status{countersign.StatusApproved},
			To: countersign.StatusConsumed, Now: storetest.Base, KeyID: key.ID}, ev); err != nil {
			b.Fatal(err)
		}
	}
}
