//go:build !unix

package datadir

import "log/slog"

// secure does nothing where there are no Unix modes: on Windows a new
// directory inherits the ACL of its parent, which a user's profile keeps
// to that user.
func secure(dir string, euid int, log *slog.Logger) error { return nil }

// checkLinks does nothing where links have no Unix owner.
func checkLinks(dir string, euid int) error { return nil }
