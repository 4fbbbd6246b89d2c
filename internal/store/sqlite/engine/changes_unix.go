//go:build unix

package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// changeCounter is two 64-bit counters in a small file beside the
// database, mapped into the memory of every process that opens the
// database, so that a change one process commits is seen by all at the
// cost of one load. SQLite's write-ahead log already needs the processes
// on one machine, sharing memory this way. The first counts the changes to
// what caches hold; the second every commit (see Stamp).
type changeCounter struct {
	mem      []byte
	n        *uint64
	commits  *uint64
	dev, ino uint64 // the file mapped
}

// counterBytes is the size of the counter file: the two counters. A file
// of 8 bytes, made by an earlier version, is grown to it.
const counterBytes = 16

// counters are the counters this process has mapped, by database path.
// A mapping is never undone: a call still running when its DB is closed
// may read the counter, and must not fault.
var counters struct {
	sync.Mutex
	m map[string]*changeCounter
}

// openChangeCounter maps the counter file of the database at path,
// creating it when missing; a database opened again shares the mapping,
// unless the file was replaced meanwhile.
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
	if c := counters.m[abs]; c != nil && c.mapsFileAt(abs+"-changes") {
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

// mapsFileAt reports whether the file at path is still the one c maps.
func (c *changeCounter) mapsFileAt(path string) bool {
	var st syscall.Stat_t
	return syscall.Lstat(path, &st) == nil && uint64(st.Dev) == c.dev && uint64(st.Ino) == c.ino
}

// mapChangeCounter maps the counter file beside the database at dbPath.
// The file is opened without following a link, and must be a plain file
// of its own of at most a page: a process running as root bumps and may
// chown it, so a link planted there must not lead it to another file.
func mapChangeCounter(dbPath string) (*changeCounter, error) {
	path := dbPath + "-changes"
	mode := os.FileMode(0o600)
	if db, err := os.Stat(dbPath); err == nil {
		mode = db.Mode().Perm() & 0o666 // as SQLite makes its -wal and -shm
	}
	created := true
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, uint32(mode))
	if err == syscall.EEXIST {
		created = false
		fd, err = syscall.Open(path, syscall.O_RDWR|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("open change counter %s: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("open change counter: %w", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 1 || st.Size > 4096 {
		return nil, fmt.Errorf("the change counter %s is not a plain file of countersign's (a link, a directory or a large file): remove it while no countersign process runs", path)
	}
	if created {
		sameOwner(f, &st, dbPath)
	}
	if st.Size < counterBytes {
		// Growing a file to the size it already has changes nothing,
		// so two processes creating it at once agree.
		if err := f.Truncate(counterBytes); err != nil {
			return nil, fmt.Errorf("open change counter: %w", err)
		}
	}
	mem, err := syscall.Mmap(fd, 0, counterBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map change counter: %w", err)
	}
	// The mapping is page-aligned, so the counters are 8-byte aligned, as
	// atomic operations need.
	return &changeCounter{mem: mem, n: (*uint64)(unsafe.Pointer(&mem[0])), commits: (*uint64)(unsafe.Pointer(&mem[8])),
		dev: uint64(st.Dev), ino: uint64(st.Ino)}, nil
}

func (c *changeCounter) load() uint64        { return atomic.LoadUint64(c.n) }
func (c *changeCounter) bump()               { atomic.AddUint64(c.n, 1) }
func (c *changeCounter) loadCommits() uint64 { return atomic.LoadUint64(c.commits) }
func (c *changeCounter) bumpCommits()        { atomic.AddUint64(c.commits, 1) }

// runtimeSharesMemory: on this system every process on the database must
// map the change counter, or another's caches would miss its changes.
const runtimeSharesMemory = true

// sameOwner gives a counter file this process has just made the owner of
// the database file when root made it, as SQLite does with its -wal and
// -shm: a server running as another user must be able to open it after
// `sudo countersign key …`. A file that was there already keeps its owner.
func sameOwner(f *os.File, have *syscall.Stat_t, dbPath string) {
	if os.Geteuid() != 0 {
		return
	}
	db, err := os.Stat(dbPath)
	if err != nil {
		return
	}
	want, ok := db.Sys().(*syscall.Stat_t)
	if ok && (want.Uid != have.Uid || want.Gid != have.Gid) {
		f.Chown(int(want.Uid), int(want.Gid))
	}
}
