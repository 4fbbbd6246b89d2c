//go:build !linux

package testutil

import "testing"

// Tmpfs mounts a small file system in memory on Linux; elsewhere the test
// is skipped.
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	t.Skip("mounting a small tmpfs works on Linux only")
	return ""
}

// FillDisk fills the disk of dir on Linux; elsewhere the test is skipped.
func FillDisk(t testing.TB, dir string) string {
	t.Helper()
	t.Skip("filling a disk is tested on Linux only")
	return ""
}
