package postgres

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/storetest"
	"github.com/jackc/pgx/v5"
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
	// The store's connections carry a name of their own, so that the CPU
	// of their backends can be read (a local server only).
	app := countersign.NewID("bench")
	db, err := Open(b.Context(), Migrated.SchemaURL(b)+"&application_name="+app, nil, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	defer func(start map[int]time.Duration) {
		var used time.Duration
		for pid, d := range backendCPU(b, db, app) {
			used += d - start[pid]
		}
		b.ReportMetric(float64(used.Microseconds())/float64(b.N), "db-cpu-µs/op")
	}(backendCPU(b, db, app))
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

// backendCPU returns the CPU used so far by each backend of the
// connections named app, by pid, read from /proc: 0 for all when the
// server is not on this machine.
func backendCPU(b *testing.B, db *DB, app string) map[int]time.Duration {
	rows, err := db.pool.Query(b.Context(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	out := map[int]time.Duration{}
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[int(pid)] = time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
	}
	return out
}
