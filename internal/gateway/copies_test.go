//go:build unix

package gateway

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSweepCopies: the decrypted uploads a killed process left are
// removed when a gateway starts using files; a running process's folder,
// another name, a link and another user's folder stay.
func TestSweepCopies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A process that has ended: its pid is free (until reused).
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dead := strconv.Itoa(done.Process.Pid)
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(p, "file"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "file", "receipt.pdf"), []byte("decrypted"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := mk("countersign-upload-" + dead + "-123")
	own := mk(strings.TrimSuffix(copiesPrefix(), "-") + "-456")
	running := mk("countersign-upload-1-789") // pid 1 runs
	other := mk("something-else-" + dead)
	target := mk("target")
	link := filepath.Join(dir, "countersign-upload-"+dead+"-999")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	foreign := mk("countersign-upload-" + dead + "-777")
	if os.Getuid() == 0 {
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}

	sweepCopies(dir, slog.New(slog.DiscardHandler))

	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the ended process's decrypted uploads are still there: %v", err)
	}
	for _, p := range []string{own, running, other, target, link} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
	if _, err := os.Stat(filepath.Join(target, "file", "receipt.pdf")); err != nil {
		t.Errorf("the link's target was emptied: %v", err)
	}
	if os.Getuid() == 0 {
		if _, err := os.Stat(foreign); err != nil {
			t.Errorf("another user's folder was removed: %v", err)
		}
	}
}
