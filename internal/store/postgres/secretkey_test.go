package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign"
	"github.com/countersign/countersign/internal/store/postgres/pgtest"
	"github.com/countersign/countersign/internal/store/storetest"
	"github.com/jackc/pgx/v5"
)

// rawScan reads one value on the store's schema past the store, as
// someone with access to the database (or a pg_dump of it) would.
func rawScan(t *testing.T, url, query string, dest ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, query).Scan(dest...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func openKeyed(t *testing.T, url string, key *countersign.SecretKey) (*DB, error) {
	var opts []Option
	if key != nil {
		opts = append(opts, WithSecretKey(key))
	}
	db, err := Open(t.Context(), url, nil, opts...)
	if err == nil {
		t.Cleanup(func() { db.Close() })
	}
	return db, err
}

// sealedDB is a new schema for the sealing tests.
func sealedDB(t *testing.T) storetest.SealedDB {
	url := Migrated.SchemaURL(t)
	return storetest.SealedDB{
		Open: func(key *countersign.SecretKey) (countersign.Store, error) {
			db, err := openKeyed(t, url, key)
			if err != nil {
				return nil, err
			}
			return db, nil
		},
		Exec: func(query string) { pgtest.ExecURL(t, url, query) },
		Bytes: func(query string) []byte {
			var b []byte
			rawScan(t, url, query, &b)
			return b
		},
	}
}

func TestSealing(t *testing.T) { storetest.RunSealing(t, sealedDB) }

// TestConformanceSealed runs the conformance suite on a store opened with a
// secret key.
func TestConformanceSealed(t *testing.T) {
	storetest.Run(t, func(t *testing.T) countersign.Store {
		db, err := openKeyed(t, Migrated.SchemaURL(t), storetest.NewSecretKey(t))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return db
	})
}

// TestAuditMACInDatabase: the database computes each keyed entry's MAC from
// the pads of the audit key; it must be the MAC SecretKey.AuditMAC makes,
// for any text.
func TestAuditMACInDatabase(t *testing.T) {
	key := storetest.NewSecretKey(t)
	db, err := openKeyed(t, Migrated.SchemaURL(t), key)
	if err != nil {
		t.Fatal(err)
	}
	acc, k := seed(t, db, 0)
	for i, detail := range []string{"", `{"text":"ünïcode ✓ 日本語 🙂"}`, strings.Repeat("x", 5000), "\n\\ 'quoted' \"double\""} {
		r := &countersign.Request{
			AccountID: acc.ID, KeyID: k.ID, KeyName: k.Name, Reference: countersign.NewReference(),
			Kind: countersign.KindGeneric, Action: "deploy", ArgsHash: fmt.Sprint(i), PreviewHash: "p",
			Status: countersign.StatusPending, ExpiresAt: storetest.Base.Add(time.Hour),
		}
		if _, _, err := db.CreateRequest(t.Context(), r, 0, storetest.Base.Add(time.Duration(i)), countersign.AuditEvent{Event: "created", Actor: "approver:zoë", Detail: detail}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := db.AuditLog(t.Context(), 0, 10)
	if err != nil || len(entries) != 4 {
		t.Fatalf("AuditLog: %d, %v", len(entries), err)
	}
	for _, e := range entries {
		if e.Hash != key.AuditMAC(e) {
			t.Errorf("entry %d: %s, want the MAC %s", e.Seq, e.Hash, key.AuditMAC(e))
		}
	}
}

// TestReplicasSealTogether: replicas given the same key file, starting at
// once on a store an earlier version wrote, seal it once and agree on its
// keys; a replica given another key file is refused.
func TestReplicasSealTogether(t *testing.T) {
	url := Migrated.SchemaURL(t)
	old, err := openKeyed(t, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	csrf, err := old.ServerKey(t.Context(), "csrf", 32)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, old, 2)
	old.Close()

	key := storetest.NewSecretKey(t)
	const replicas = 4
	dbs := make([]*DB, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { dbs[i], errs[i] = openKeyed(t, url, key) })
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if got, err := dbs[i].ServerKey(t.Context(), "csrf", 32); err != nil || !bytes.Equal(got, csrf) {
			t.Fatalf("replica %d: ServerKey = %x, %v; want %x", i, got, err, csrf)
		}
		if dbs[i].AuditKeyedFrom() != 3 {
			t.Errorf("replica %d: keyed from %d, want 3", i, dbs[i].AuditKeyedFrom())
		}
	}
	var marks int
	rawScan(t, url, `SELECT COUNT(*) FROM audit_log WHERE event = 'audit_keyed'`, &marks)
	if marks != 1 {
		t.Errorf("%d keyed marks in the chain, want 1", marks)
	}
	// A key drawn on one replica is the key of every other.
	a, err := dbs[0].ServerKey(t.Context(), "outbox", 32)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := dbs[replicas-1].ServerKey(t.Context(), "outbox", 32); err != nil || !bytes.Equal(a, b) {
		t.Fatalf("another replica's outbox key = %x, %v; want %x", b, err, a)
	}
	if problems, n := storetest.Verify(t, dbs[1]); len(problems) != 0 || n != 3 {
		t.Fatalf("the chain: %d entries, problems %v", n, problems)
	}
	if _, err := openKeyed(t, url, storetest.NewSecretKey(t)); !errors.Is(err, countersign.ErrWrongSecretKey) {
		t.Fatalf("a replica with another key: %v, want ErrWrongSecretKey", err)
	}
}
