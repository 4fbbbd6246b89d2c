package saferm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// defaultRealRm lists where the real rm is looked for, in order, when none
// is configured. PATH is never searched: the wrapper is usually first in it.
var defaultRealRm = [...]string{"/bin/rm", "/usr/bin/rm"}

// ErrNoRealRm is wrapped when no usable real rm was found.
var ErrNoRealRm = errors.New("no real rm")

// FindRealRm returns the path of the rm to execute: configured when set,
// else the first usable one of /bin/rm and /usr/bin/rm (never a PATH
// lookup: the wrapper is usually first in PATH). self is the running
// wrapper's executable (os.Executable). A candidate must be absolute, an
// executable regular file after following symlinks, and not the same file
// (device and inode) as self — so a symlink or hard link to the wrapper
// configured as "real rm" is refused instead of looping. The path is
// returned as given, not resolved, so that multi-call binaries such as
// busybox still see "rm".
func FindRealRm(configured, self string) (string, error) {
	selfInfo, err := os.Stat(self)
	if err != nil {
		return "", fmt.Errorf("%w: stat wrapper %s: %v", ErrNoRealRm, self, err)
	}
	if configured != "" {
		if err := checkRealRm(configured, selfInfo); err != nil {
			return "", err
		}
		return filepath.Clean(configured), nil
	}
	var errs []error
	for _, c := range defaultRealRm {
		err := checkRealRm(c, selfInfo)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// checkRealRm explains why path cannot serve as the real rm, or returns nil.
func checkRealRm(path string, self os.FileInfo) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%w: %q is not an absolute path", ErrNoRealRm, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoRealRm, err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%w: %s is not an executable file", ErrNoRealRm, path)
	}
	if os.SameFile(fi, self) {
		return fmt.Errorf("%w: %s is this wrapper itself, not the real rm", ErrNoRealRm, path)
	}
	return nil
}
