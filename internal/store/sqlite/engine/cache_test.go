package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/countersign/countersign/internal/store/sqlite/engine"
)

// An entry is served only at the version it was read at, and only for
// CacheTTL; a full cache starts again empty.
func TestCache(t *testing.T) {
	var c engine.Cache[string]
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, ok := c.Get("k", 1, at); ok {
		t.Fatal("an empty cache served an entry")
	}
	c.Put("k", "v", 1, at)
	for _, tt := range []struct {
		name    string
		version uint64
		now     time.Time
		want    bool
	}{
		{"as read", 1, at, true},
		{"just before the TTL", 1, at.Add(engine.CacheTTL - time.Nanosecond), true},
		{"at the TTL", 1, at.Add(engine.CacheTTL), false},
		{"another version", 2, at, false},
		{"a clock set back", 1, at.Add(-time.Second), false},
	} {
		if v, ok := c.Get("k", tt.version, tt.now); ok != tt.want || (ok && v != "v") {
			t.Errorf("%s: %q, %v; want %v", tt.name, v, ok, tt.want)
		}
	}
	for i := range engine.CacheMax - 1 {
		c.Put(string(rune('a'+i%26))+string(rune(i)), "x", 1, at)
	}
	if _, ok := c.Get("k", 1, at); !ok {
		t.Fatal("the first entry is gone before the cache was full")
	}
	c.Put("one more", "x", 1, at)
	if _, ok := c.Get("k", 1, at); ok {
		t.Error("a full cache kept its entries")
	}
	if v, ok := c.Get("one more", 1, at); !ok || v != "x" {
		t.Errorf("the entry that filled the cache: %q, %v", v, ok)
	}
}

// The change counter moves once a change made with UpdateCached has
// committed, and only then: not for UpdateUncached, not for a change that
// failed. An engine opened again on the file sees it where it is.
func TestCacheVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "countersign.db")
	db := engine.OpenTest(t, path, engine.Config{})
	v0, ok := db.CacheVersion()
	if !ok {
		if runtime.GOOS != "windows" {
			t.Fatal("no change counter: nothing is cached")
		}
		t.Skip("no change counter on Windows")
	}
	change(t, db, `CREATE TABLE t (n INTEGER)`)
	v1, _ := db.CacheVersion()
	if v1 == v0 {
		t.Fatal("a committed UpdateCached did not move the counter")
	}
	ctx := t.Context()
	if err := db.UpdateUncached(ctx, func(ctx context.Context, tx engine.Querier) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (1)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused")
	if err := db.UpdateCached(ctx, func(ctx context.Context, tx engine.Querier) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO t (n) VALUES (2)`); err != nil {
			return err
		}
		return refused
	}); err != refused {
		t.Fatalf("a failing change: %v", err)
	}
	if v, _ := db.CacheVersion(); v != v1 {
		t.Errorf("the counter moved from %d to %d for an uncached change and a failed one", v1, v)
	}
	other := engine.OpenTest(t, path, engine.Config{})
	change(t, other, `INSERT INTO t (n) VALUES (3)`)
	if v, _ := db.CacheVersion(); v == v1 {
		t.Error("a change through another engine on the file did not move the counter")
	}
}

// A database opened through a link keeps its change counter beside the
// file itself, with SQLite's -wal and -shm, so that every process shares
// one counter however it names the file.
func TestChangeCounterFollowsLinks(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no change counter on Windows")
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "real.db")
	engine.OpenTest(t, real, engine.Config{}) // creates it
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	engine.OpenTest(t, link, engine.Config{})
	if _, err := os.Stat(real + "-changes"); err != nil {
		t.Errorf("no counter beside the file: %v", err)
	}
	if _, err := os.Lstat(link + "-changes"); err == nil {
		t.Errorf("a second counter beside the link")
	}
}
