package saferm

import (
	"os"
	"path/filepath"
)

// freshTemp reports whether target is a directory that the command line
// running rm made in the temporary directory (mktemp -d): directly in
// $TMPDIR or /tmp, not a link, owned by this user, and born after the
// line's shell started. Whatever it holds was put there by the line, so
// deleting it loses nothing the line did not make.
func (a *Assessor) freshTemp(target string, fi os.FileInfo) bool {
	if a.LineStart.IsZero() || !fi.IsDir() || fi.Mode()&os.ModeSymlink != 0 {
		return false
	}
	parent := filepath.Dir(target)
	if parent != evalExisting(os.TempDir()) && parent != evalExisting("/tmp") {
		return false
	}
	born, uid, ok := birth(target)
	return ok && uid == os.Getuid() && !born.Before(a.LineStart)
}
