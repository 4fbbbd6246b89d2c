package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Tmpfs mounts a file system of size bytes in memory on a new directory
// and returns the directory; it is unmounted when the test ends. A test of
// what happens when a disk fills up fills this one, not the machine's.
//
// Only root may mount: for another user the test is skipped, in strict
// mode too, since nothing is missing that could be installed. When root
// cannot mount (a container without the capability), it ends as Missing.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root; this test fills a disk and runs only where it can make one")
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		Missing(t, fmt.Sprintf("mount a tmpfs of %d bytes on %s: %v", size, dir, err))
	}
	t.Cleanup(func() {
		// A lazy unmount: a process the test started may still hold a
		// file open on it for a moment.
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount the tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// FillDisk writes a file in dir until the disk holding it is full, and
// returns the file's path: removing it frees the space.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !isNoSpace(err) {
				t.Fatalf("fill the disk: %v", err)
			}
			return path
		}
	}
}

// isNoSpace reports whether err says the disk is full.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
