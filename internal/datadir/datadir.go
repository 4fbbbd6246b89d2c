// Package datadir prepares the data directory of a SQLite store before
// any command opens it: created 0700 when missing, and on every start
// tightened when it is open to other users and refused when it belongs
// to one. It holds the server's keys and the sealed secrets of
// notification channels; a directory another local user can write is one
// where that user can swap the database, or plant a link where countersign
// will write.
package datadir

import (
	"fmt"
	"log/slog"
	"os"
)

// Prepare creates dir (0700) when it is missing and makes it safe to open
// a store in, on every start: a directory open to other users is made
// 0700 and its plain files 0600, each change said in log (nil discards);
// a directory owned by another user is refused, unless the process runs
// as root; a file or link in it that is neither the directory owner's nor
// root's is refused, and so is a hard link. A path to dir through a
// symbolic link of another user than this process's or root's is refused
// before anything is made. Links in it are never followed. Root may act on a
// directory of another user (sudo countersign key revoke …, on the
// service user's directory, is the common case): SQLite and the change
// counter give the files they make there the database's owner.
//
// Call it before this process opens the store: were it to open and close
// a descriptor of the database (it may, to change a mode without following
// a link), the POSIX locks SQLite holds on it in this process would go.
func Prepare(dir string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkLinks(dir, os.Geteuid()); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create the data directory: %w", err)
	}
	return secure(dir, os.Geteuid(), log)
}
