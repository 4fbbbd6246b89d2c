//go:build unix

package engine_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/countersign/countersign/internal/store/sqlite/engine"
)

// TestChangeCounterRefusesLinks: a link planted where the counter file
// goes, to a file of someone else's, fails the open and leaves that file
// as it was: a process running as root bumps the counter and may chown it.
func TestChangeCounterRefusesLinks(t *testing.T) {
	const content = "root:x:0:0:root:/root:/bin/sh\n"
	for name, plant := range map[string]func(target, at string) error{
		"symbolic link": os.Symlink,
		"hard link":     os.Link,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(dir, "victim")
			if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "c.db")
			if err := plant(victim, path+"-changes"); err != nil {
				t.Fatal(err)
			}
			if db, err := engine.Open(t.Context(), path, engine.Config{}); err == nil {
				db.Close()
				t.Fatalf("Open with a %s as the change counter succeeded", name)
			}
			got, err := os.ReadFile(victim)
			if err != nil || string(got) != content {
				t.Errorf("the link's target now holds %q (%v)", got, err)
			}
			if fi, err := os.Stat(victim); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("the link's target: %v, %v", fi.Mode(), err)
			}
		})
	}
}

// TestChangeCounterReplaced: a database opened again after its counter
// file was removed maps the new file, not the mapping of the removed one,
// so that its changes reach the processes that open the database next.
func TestChangeCounterReplaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	engine.OpenTest(t, path, engine.Config{})
	if err := os.Remove(path + "-changes"); err != nil {
		t.Fatal(err)
	}
	db := engine.OpenTest(t, path, engine.Config{})
	change(t, db, `CREATE TABLE t (n INTEGER)`)
	b, err := os.ReadFile(path + "-changes")
	if err != nil || len(b) < 8 || binary.NativeEndian.Uint64(b) == 0 {
		t.Fatalf("the counter file after a change: %x (%v), want it there and moved", b, err)
	}
}

// TestNewDatabaseOwnerOnly: a new database, and the files SQLite and the
// change counter make beside it, are readable by their owner only, whatever
// the umask: they hold the server's keys.
func TestNewDatabaseOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "c.db")
	db := engine.OpenTest(t, path, engine.Config{})
	change(t, db, `CREATE TABLE t (n INTEGER)`)
	for _, f := range []string{path, path + "-wal", path + "-shm", path + "-changes"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %04o, want no access for others", filepath.Base(f), fi.Mode().Perm())
		}
	}
}
