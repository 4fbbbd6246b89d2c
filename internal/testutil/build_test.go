package testutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPruneBuilds: kept binaries unused for longer than the cutoff go,
// the others stay.
func TestPruneBuilds(t *testing.T) {
	root := t.TempDir()
	now := time.Now()
	for name, used := range map[string]time.Time{"old": now.Add(-cacheUnused - time.Hour), "recent": now.Add(-time.Hour)} {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "countersign"), []byte("binary"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(d, used, used); err != nil {
			t.Fatal(err)
		}
	}
	pruneBuilds(root, now.Add(-cacheUnused))
	if _, err := os.Stat(filepath.Join(root, "old")); !os.IsNotExist(err) {
		t.Errorf("the binary unused for more than %v is still kept (%v)", cacheUnused, err)
	}
	if _, err := os.Stat(filepath.Join(root, "recent", "countersign")); err != nil {
		t.Errorf("the recently used binary was removed: %v", err)
	}
}
