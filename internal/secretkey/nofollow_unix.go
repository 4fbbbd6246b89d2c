//go:build unix

package secretkey

import (
	"errors"
	"syscall"
)

// noFollow makes an open fail on a symbolic link.
const noFollow = syscall.O_NOFOLLOW

func isLink(err error) bool { return errors.Is(err, syscall.ELOOP) }
