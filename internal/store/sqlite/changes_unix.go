//go:build unix

package sqlite

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// changeCounter is a 64-bit counter in a small file beside the database,
// mapped into the memory of every process that opens the database, so that
// a change one process commits is seen by all at the cost of one load.
// SQLite's write-ahead log already needs the processes on one machine,
// sharing memory this way.
type changeCounter struct {
	mem []byte
	n   *uint64
}

// counters are the counters this process has mapped, by database path.
// A mapping is never undone: a call still running when its DB is closed
// may read the counter, and must not fault.
var counters struct {
	sync.Mutex
	m map[string]*changeCounter
}

// openChangeCounter maps the counter file of the database at path,
// creating it when missing; a database opened again shares the mapping.
func openChangeCounter(path string) (*changeCounter, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open change counter: %w", err)
	}
	// SQLite follows a link to the database and keeps its -wal and -shm
	// beside the file itself: so does the counter, so that a process
	// that opens the file through a link and one that does not share it.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	counters.Lock()
	defer counters.Unlock()
	if c := counters.m[abs]; c != nil {
		return c, nil
	}
	c, err := mapChangeCounter(abs)
	if err != nil {
		return nil, err
	}
	if counters.m == nil {
		counters.m = map[string]*changeCounter{}
	}
	counters.m[abs] = c
	return c, nil
}

func mapChangeCounter(path string) (*changeCounter, error) {
	f, err := os.OpenFile(path+"-changes", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open change counter: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("open change counter: %w", err)
	}
	sameOwner(f, fi, path)
	if fi.Size() < 8 {
		// Growing a file to the size it already has changes nothing,
		// so two processes creating it at once agree.
		if err := f.Truncate(8); err != nil {
			return nil, fmt.Errorf("open change counter: %w", err)
		}
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map change counter: %w", err)
	}
	// The mapping is page-aligned, so the counter is 8-byte aligned, as
	// atomic operations need.
	return &changeCounter{mem: mem, n: (*uint64)(unsafe.Pointer(&mem[0]))}, nil
}

func (c *changeCounter) load() uint64 { return atomic.LoadUint64(c.n) }
func (c *changeCounter) bump()        { atomic.AddUint64(c.n, 1) }

// runtimeSharesMemory: on this system every process on the database must
// map the change counter, or another's caches would miss its changes.
const runtimeSharesMemory = true

// sameOwner gives the counter file the owner of the database file when
// root made it, as SQLite does with its -wal and -shm: a server running as
// another user must be able to open it after `sudo countersign key …`.
func sameOwner(f *os.File, fi os.FileInfo, dbPath string) {
	if os.Geteuid() != 0 {
		return
	}
	db, err := os.Stat(dbPath)
	if err != nil {
		return
	}
	want, ok1 := db.Sys().(*syscall.Stat_t)
	have, ok2 := fi.Sys().(*syscall.Stat_t)
	if ok1 && ok2 && (want.Uid != have.Uid || want.Gid != have.Gid) {
		f.Chown(int(want.Uid), int(want.Gid))
	}
}
