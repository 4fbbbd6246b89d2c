package saferm

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultFileCap is where the tally of a recursive delete stops, as in the
// seed: beyond it the exact number does not change the decision, and
// stopping keeps the assessment fast on any tree.
const DefaultFileCap = 1000

// readBatch is how many directory entries are read at a time, so that a
// directory of 100,000 files costs one batch, not a full listing.
const readBatch = 256

// tally counts what a deletion removes: non-directory entries (files,
// symlinks, sockets) and their bytes, up to a cap. It also notes the
// directories holding a .git entry, i.e. git work trees among the targets.
type tally struct {
	cap     int
	files   int
	bytes   int64
	entries int // every entry seen, directories too: bounds trees of empty directories
	capped  bool
	repos   []string
}

// full reports whether the tally stopped; it sets capped when it did.
func (t *tally) full() bool {
	if t.files >= t.cap || t.entries >= 10*t.cap {
		t.capped = true
	}
	return t.capped
}

// addFile counts one non-directory entry.
func (t *tally) addFile(size int64) {
	t.files++
	t.entries++
	t.bytes += size
}

// walk tallies the tree under dir without following symlinks. Directories
// it cannot read are skipped: rm, running as the same user, cannot empty
// them either.
func (t *tally) walk(dir string) {
	stack := []string{dir}
	for len(stack) > 0 && !t.full() {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		stack = t.readDir(d, stack)
	}
}

// readDir tallies the entries of one directory in batches and returns the
// stack with its subdirectories pushed.
func (t *tally) readDir(d string, stack []string) []string {
	f, err := os.Open(d)
	if err != nil {
		return stack
	}
	defer f.Close()
	for !t.full() {
		batch, err := f.ReadDir(readBatch)
		for _, e := range batch {
			if t.full() {
				return stack
			}
			t.entry(d, e, &stack)
		}
		if err == io.EOF || err != nil && len(batch) == 0 {
			return stack
		}
	}
	return stack
}

// entry tallies one directory entry.
func (t *tally) entry(d string, e fs.DirEntry, stack *[]string) {
	if e.Name() == ".git" {
		t.repos = append(t.repos, d)
	}
	if e.IsDir() {
		t.entries++
		*stack = append(*stack, filepath.Join(d, e.Name()))
		return
	}
	var size int64
	if info, err := e.Info(); err == nil {
		size = info.Size()
	}
	t.addFile(size)
}
