package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
)

// BenchmarkCycle runs the store's part of one approval cycle (create,
// approve, consume) from many goroutines at once, as the server's handlers
// do under load: what the one writer can take.
//
//	go test -run '^$' -bench Cycle -cpu 2 ./internal/store/sqlite
func BenchmarkCycle(b *testing.B) { benchCycle(b, newBenchFixture(b)) }

// BenchmarkCycleSealed is BenchmarkCycle on a store sealed with a secret
// key, as countersign serve opens it: every audit entry carries an HMAC
// instead of a bare hash.
func BenchmarkCycleSealed(b *testing.B) {
	benchCycle(b, newBenchFixture(b, WithSecretKey(storetest.NewSecretKey(b))))
}

func benchCycle(b *testing.B, f *cacheFixture) {
	db := f.db
	var n atomic.Int64
	ev := countersign.AuditEvent{Event: "created", Actor: "key:x", Detail: "{}"}
	b.SetParallelism(25) // 50 goroutines with -cpu 2, as the load tool's agents
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := n.Add(1)
			now := time.Now()
			args := fmt.Sprintf(`{"i":%d}`, i)
			r := &countersign.Request{
				AccountID: f.account.ID, KeyID: f.key.ID, KeyName: f.key.Name, Reference: testRef(int(i % 100000)),
				Kind: countersign.KindGeneric, Action: "load.cycle", Arguments: json.RawMessage(args), ArgsHash: countersign.HashSecret(args),
				Preview: "load.cycle", PreviewHash: countersign.HashSecret("load.cycle"), Status: countersign.StatusPending,
				RiskReasons: []string{}, ExpiresAt: now.Add(10 * time.Minute),
			}
			got, _, err := db.CreateRequest(ctx, r, 0, now, ev)
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := db.Transition(ctx, countersign.Transition{ID: got.ID, From: []countersign.Status{countersign.StatusPending},
				To: countersign.StatusApproved, Now: now, AccountID: f.account.ID, DecidedBy: "alice", ExpiresAt: now.Add(2 * time.Minute)},
				countersign.AuditEvent{Event: "approved", Actor: "approver:alice", Detail: "{}"}); err != nil {
				b.Error(err)
				return
			}
			if _, err := db.Transition(ctx, countersign.Transition{ID: got.ID, From: []countersign.Status{countersign.StatusApproved},
				To: countersign.StatusConsumed, Now: now, KeyID: f.key.ID, AccountID: f.account.ID},
				countersign.AuditEvent{Event: "consumed", Actor: "key:" + f.key.ID, Detail: "{}"}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// newBenchFixture is newCacheFixture for a benchmark.
func newBenchFixture(b *testing.B, opts ...Option) *cacheFixture {
	b.Helper()
	f := &cacheFixture{path: filepath.Join(b.TempDir(), "countersign.db")}
	db, err := Open(context.Background(), f.path, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	f.db = db
	now := time.Now().UTC()
	f.account = &countersign.Account{ID: countersign.NewID("acc_"), Name: "default", CreatedAt: now}
	f.key = &countersign.AgentKey{ID: countersign.NewID("key_"), AccountID: f.account.ID, Name: "agent", Hash: countersign.HashSecret("csk_bench"), CreatedAt: now}
	if err := db.CreateAccount(context.Background(), f.account); err != nil {
		b.Fatal(err)
	}
	if err := db.CreateAgentKey(context.Background(), f.key); err != nil {
		b.Fatal(err)
	}
	return f
}

// BenchmarkAgentKeyByHash authenticates an agent key from many goroutines
// at once, as every API call does: between changes, from the cache.
//
//	go test -run '^$' -bench AgentKeyByHash -cpu 2 ./internal/store/sqlite
func BenchmarkAgentKeyByHash(b *testing.B) {
	f := newBenchFixture(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := f.db.AgentKeyByHash(ctx, f.key.Hash); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
