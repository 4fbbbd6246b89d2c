//go:build unix

package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// lockData takes the data directory for this server alone, until release
// is called or the process ends, however it ends. A second server on the
// same SQLite file would work, but the agents waiting on one would not hear
// of the decisions made on the other until their waits ran out; it is
// refused with the first one's process id. Other commands (key create,
// approver create, …) do not take the lock: they work while a server runs.
func lockData(dir string) (release func(), err error) {
	path := filepath.Join(dir, "countersign.serve.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the lock of the data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if b, err := os.ReadFile(path); err == nil {
				if pid, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil && pid > 0 {
					holder = "process " + strconv.Itoa(pid)
				}
			}
			return nil, fmt.Errorf("another countersign serve (%s) is using the data directory %s: stop it, or give this server its own --data", holder, dir)
		}
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	// The process id is for the message above; the lock is the flock,
	// which the kernel lets go of when this process ends.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
