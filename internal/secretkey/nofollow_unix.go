//go:build unix

package secretkey

import (
	"os"
	"syscall"
)

// noFollow makes an open fail on a symbolic link.
const noFollow = syscall.O_NOFOLLOW

// ownLikeDir gives a file root made the owner of its directory, as SQLite
// does for the files it makes beside a database: root running a command on
// the service user's data directory must leave a key file that user can
// read.
func ownLikeDir(f *os.File, dir string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
}
