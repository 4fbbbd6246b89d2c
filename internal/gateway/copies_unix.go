//go:build unix

package gateway

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// copiesPrefix starts the name of a call's private folder of decrypted
// uploads: countersign-upload-<pid>-<random>, so that a later process can
// tell the folders of a process that is gone.
func copiesPrefix() string { return "countersign-upload-" + strconv.Itoa(os.Getpid()) + "-" }

// sweepCopies removes, from dir, the private folders of decrypted uploads
// that a process of this user left when it ended without removing them
// (killed, or out of memory, in the middle of a call): a decrypted copy
// must not outlive its call. Folders of a running process, of another
// user, and anything that is not a plain folder of that name are left.
func sweepCopies(dir string, log *slog.Logger) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "countersign-upload-")
		if !ok || !e.IsDir() { // IsDir is false for a link
			continue
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue // running, or not ours to ask about
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err == nil {
			log.Warn("removed decrypted uploads that an ended process left behind", "process", pid)
		}
	}
}
