package saferm

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// The 100,000-file tree is built once per process, lazily — only when a
// benchmark asks for it — and removed by TestMain. (b.TempDir would build
// it again for every b.N round the framework runs.)
var (
	bigTreeOnce sync.Once
	bigTreeDir  string
	bigTreeErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if bigTreeDir != "" {
		os.RemoveAll(bigTreeDir)
	}
	os.Exit(code)
}

// bigTree returns a tree of 100 directories of 1,000 one-byte files.
func bigTree(b *testing.B) string {
	bigTreeOnce.Do(func() {
		bigTreeDir, bigTreeErr = os.MkdirTemp("", "saferm-bench-")
		if bigTreeErr == nil {
			bigTreeDir, bigTreeErr = filepath.EvalSymlinks(bigTreeDir)
		}
		if bigTreeErr == nil {
			makeTree(b, filepath.Join(bigTreeDir, "tree"), 100, 1000)
			// Flush the new inodes now, so that their writeback does not
			// run during, and get measured as, the assessments.
			syscall.Sync()
		}
	})
	if bigTreeErr != nil {
		b.Fatal(bigTreeErr)
	}
	return filepath.Join(bigTreeDir, "tree")
}

// BenchmarkAssess100k assesses `rm -rf tree` on 100,000 files with the
// default policy. The tally stops at 1,000 files, so the time does not
// grow with the tree.
func BenchmarkAssess100k(b *testing.B) {
	tree := bigTree(b)
	a := &Assessor{
		Cwd: filepath.Dir(tree), Protected: DefaultProtectedPaths(""),
		FileThreshold: 100, BytesThreshold: 100 << 20,
	}
	args := []string{"-rf", tree}
	for b.Loop() {
		res := a.Assess(context.Background(), args)
		if res.FileCount != DefaultFileCap || !res.FileCountCapped || !res.NeedsApproval {
			b.Fatalf("Assess = %+v", res)
		}
	}
}
