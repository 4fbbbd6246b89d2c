//go:build unix

package datadir

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// secure is Prepare's check of an existing directory, as the user euid.
// The directory is tightened before its entries are looked at, so that
// once it is 0700 no one but its owner and root can add, swap or remove
// one while they are checked and changed.
func secure(dir string, euid int, log *slog.Logger) error {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("check the data directory %s: %w", dir, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("the data directory %s is not a directory", dir)
	}
	owner := int(st.Uid)
	if owner != euid && euid != 0 {
		how := "run it as root (sudo countersign …)"
		if owner != 0 {
			how = fmt.Sprintf("run it as %[1]s (sudo -u %[1]s countersign …) or as root", userName(owner))
		}
		return fmt.Errorf("the data directory %s belongs to %s, not to %s who runs this command: "+
			"%s, or give it a directory of its own with --data or COUNTERSIGN_DATA",
			dir, describeUser(owner), describeUser(euid), how)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the data directory %s: %w", dir, err)
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	var opened unix.Stat_t
	if err := unix.Fstat(fd, &opened); err != nil {
		return fmt.Errorf("check the data directory %s: %w", dir, err)
	}
	if opened.Dev != st.Dev || opened.Ino != st.Ino {
		return fmt.Errorf("the data directory %s was replaced while it was checked: is another process moving it?", dir)
	}
	if perm := opened.Mode & 0o7777; perm&0o077 != 0 {
		if err := unix.Fchmod(fd, 0o700); err != nil {
			return fmt.Errorf("make the data directory %s 0700: %w", dir, err)
		}
		log.Warn("the data directory was open to other users: made it 0700", "dir", dir, "mode", fmt.Sprintf("%04o", perm))
	}
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("read the data directory %s: %w", dir, err)
	}
	// Every entry is checked before any is changed: a refusal changes no
	// file.
	var open []string
	for _, name := range names {
		tighten, err := checkEntry(fd, dir, name, owner)
		if err != nil {
			return err
		}
		if tighten {
			open = append(open, name)
		}
	}
	for _, name := range open {
		if err := tightenFile(fd, dir, name, log); err != nil {
			return err
		}
	}
	return nil
}

// checkLinks refuses a path to the data directory that goes through a
// symbolic link of another user than euid or root. Such a link, made in
// a directory that user may write (a shared one, the working directory of
// a command), names the directory this process would make, close and
// tighten: a system directory, for root. Components that do not exist yet
// are made by Prepare, not followed.
func checkLinks(dir string, euid int) error {
	p := ""
	for _, part := range strings.Split(filepath.Clean(dir), string(filepath.Separator)) {
		switch {
		case p == "" && part == "":
			p = string(filepath.Separator) // the root of an absolute path
			continue
		case p == "" || p == string(filepath.Separator):
			p += part
		default:
			p += string(filepath.Separator) + part
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); errors.Is(err, unix.ENOENT) {
			return nil
		} else if err != nil {
			return fmt.Errorf("check the data directory %s: %w", dir, err)
		}
		if uid := int(st.Uid); st.Mode&unix.S_IFMT == unix.S_IFLNK && uid != euid && uid != 0 {
			return fmt.Errorf("the data directory %s is reached through %s, which is a link that belongs to %s (neither %s who runs this command nor root): "+
				"that user chose the directory it names; give countersign a path of your own with --data or COUNTERSIGN_DATA",
				dir, p, describeUser(uid), describeUser(euid))
		}
	}
	return nil
}

// checkEntry refuses an entry of the directory (a link is not followed)
// that is neither the directory owner's nor root's, or a plain file with
// another name (a hard link), and reports whether it is a plain file open
// to other users.
func checkEntry(dirfd int, dir, name string, owner int) (tighten bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return false, nil // removed meanwhile, like a -wal file of a store being closed
	} else if err != nil {
		return false, fmt.Errorf("check %s in the data directory %s: %w", name, dir, err)
	}
	if uid := int(st.Uid); uid != owner && uid != 0 {
		return false, fmt.Errorf("%q in the data directory %s belongs to %s, not to %s who owns the directory: "+
			"another user may have put it there while the directory was open to others; check it, then remove it or chown it to %s, while no countersign process runs",
			name, dir, describeUser(uid), describeUser(owner), userName(owner))
	}
	if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink > 1 {
		// A second name of a file elsewhere: tightening it, or SQLite
		// writing to it, would change that file. No file countersign
		// makes has one, and a hard link is no backup of a live store.
		return false, fmt.Errorf("%q in the data directory %s is a hard link (the file has %d names): "+
			"another user may have linked a file of someone else's here while the directory was open to others; check it, then remove it, while no countersign process runs",
			name, dir, st.Nlink)
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Mode&0o077 != 0, nil
}

// tightenFile makes a plain file of the directory 0600, never following a
// link that replaced it.
func tightenFile(dirfd int, dir, name string, log *slog.Logger) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return fmt.Errorf("check %s in the data directory %s: %w", name, dir, err)
	}
	err := unix.Fchmodat(dirfd, name, 0o600, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		err = chmodOpened(dirfd, name)
	}
	if errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return fmt.Errorf("make %s in the data directory %s 0600: %w", name, dir, err)
	}
	log.Warn("a file of the data directory was open to other users: made it 0600", "dir", dir, "file", name, "mode", fmt.Sprintf("%04o", st.Mode&0o7777))
	return nil
}

// chmodOpened makes a plain file 0600 through a descriptor opened without
// following a link, for a Linux older than 6.6, whose fchmodat cannot be
// told not to follow one. It opens no FIFO or device for good (O_NONBLOCK,
// and only a plain file is changed). A file its owner may not read cannot
// be opened: that owner is this process (root opens any), and the
// directory, 0700 by now, is its own, so no one else can have swapped the
// file for a link, and a plain chmod is safe.
func chmodOpened(dirfd int, name string) error {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.EACCES) && os.Geteuid() != 0 {
		return unix.Fchmodat(dirfd, name, 0o600, 0)
	}
	if errors.Is(err, unix.ELOOP) {
		return unix.ENOENT // a link now: the file is gone, and a link is not changed
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return unix.ENOENT // not the plain file it was: gone
	}
	return unix.Fchmod(fd, 0o600)
}

// describeUser names a user for a message: "countersign (uid 998)".
func describeUser(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username + " (uid " + strconv.Itoa(uid) + ")"
	}
	return "uid " + strconv.Itoa(uid)
}

// userName is the login name of uid, or "#uid" as sudo -u takes it.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return "#" + strconv.Itoa(uid)
}
