//go:build unix

package datadir

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/countersign/countersign/internal/testutil"
)

// nobody is the uid of another user: the tests chown to it.
const nobody = 65534

// newLog returns a logger and what it wrote.
func newLog() (*slog.Logger, *testutil.LogBuffer) {
	buf := &testutil.LogBuffer{}
	return slog.New(slog.NewTextHandler(buf, nil)), buf
}

// mode returns the permission bits of path, not following a link.
func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// write creates a file of the given mode, whatever the umask.
func write(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// needRoot skips a test that must chown to another user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testutil.Missing(t, "chowning a directory to another user needs root")
	}
}

func TestPrepareCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "data")
	log, buf := newLog()
	if err := Prepare(dir, log); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("a new data directory is %04o, want 0700", m)
	}
	if buf.String() != "" {
		t.Errorf("a new directory was logged: %s", buf)
	}
}

// A data directory that was open to others is closed, and so are its
// files, on every start; links in it are not followed, other directories
// are left alone, and each change is logged.
func TestPrepareTightens(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "countersign.db"), 0o644)
	write(t, filepath.Join(dir, "countersign.db-wal"), 0o666)
	write(t, filepath.Join(dir, "countersign.db-changes"), 0o600)
	outside := filepath.Join(root, "outside")
	write(t, outside, 0o644)
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}

	log, buf := newLog()
	if err := Prepare(dir, log); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		dir: 0o700, filepath.Join(dir, "countersign.db"): 0o600, filepath.Join(dir, "countersign.db-wal"): 0o600,
		filepath.Join(dir, "countersign.db-changes"): 0o600, outside: 0o644, filepath.Join(dir, "sub"): 0o755,
	} {
		if got := mode(t, path); got != want {
			t.Errorf("%s is %04o, want %04o", path, got, want)
		}
	}
	logs := buf.String()
	for _, want := range []string{
		`msg="the data directory was open to other users: made it 0700" dir=` + dir + " mode=0777",
		"made it 0600\" dir=" + dir + " file=countersign.db mode=0644",
		"file=countersign.db-wal mode=0666",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	if n := strings.Count(logs, "\n"); n != 3 {
		t.Errorf("%d log lines, want 3:\n%s", n, logs)
	}

	// Tight already: nothing to change, nothing said.
	log, buf = newLog()
	if err := Prepare(dir, log); err != nil || buf.String() != "" {
		t.Errorf("a second start: %v, logged %q", err, buf)
	}
}

// A directory of another user is refused, naming its owner and what to
// do, and changes nothing; its owner and root may use it.
func TestPrepareDirectoryOfAnotherUser(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "countersign.db"), 0o644)
	for _, p := range []string{dir, filepath.Join(dir, "countersign.db")} {
		if err := os.Chown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	log, buf := newLog()
	err := secure(dir, 1000, log)
	if err == nil {
		t.Fatal("a directory of another user was accepted")
	}
	owner := describeUser(nobody)
	for _, want := range []string{"belongs to " + owner, "not to " + describeUser(1000) + " who runs", "sudo -u " + userName(nobody) + " countersign", "or as root", "--data"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q lacks %q", err, want)
		}
	}
	if !strings.Contains(owner, "uid 65534") {
		t.Errorf("the owner is named %q", owner)
	}
	if mode(t, dir) != 0o777 || mode(t, filepath.Join(dir, "countersign.db")) != 0o644 || buf.String() != "" {
		t.Errorf("a refusal changed modes or logged: %04o, %q", mode(t, dir), buf)
	}

	// Its owner may; root (sudo countersign key revoke …) may too, and
	// tightens it as the owner would.
	if err := secure(dir, nobody, log); err != nil {
		t.Errorf("its owner: %v", err)
	}
	os.Chmod(dir, 0o777)
	if err := secure(dir, 0, log); err != nil {
		t.Errorf("root: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil || st.Uid != nobody || mode(t, dir) != 0o700 || mode(t, filepath.Join(dir, "countersign.db")) != 0o600 {
		t.Errorf("after root: owner %d, modes %04o %04o (%v)", st.Uid, mode(t, dir), mode(t, filepath.Join(dir, "countersign.db")), err)
	}
}

// A file or a link another user put in the directory is refused, and no
// file is changed.
func TestPrepareEntryOfAnotherUser(t *testing.T) {
	needRoot(t)
	for _, kind := range []string{"file", "link"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			os.Chmod(dir, 0o777)
			write(t, filepath.Join(dir, "countersign.db-wal"), 0o644)
			planted := filepath.Join(dir, "countersign.db")
			if kind == "file" {
				write(t, planted, 0o600)
			} else if err := os.Symlink("/etc/passwd", planted); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(planted, nobody, nobody); err != nil {
				t.Fatal(err)
			}
			err := secure(dir, 0, slog.New(slog.DiscardHandler))
			if err == nil || !strings.Contains(err.Error(), `"countersign.db" in the data directory`) ||
				!strings.Contains(err.Error(), "belongs to "+describeUser(nobody)) || !strings.Contains(err.Error(), "remove it or chown it") {
				t.Fatalf("a planted %s: %v", kind, err)
			}
			if m := mode(t, filepath.Join(dir, "countersign.db-wal")); m != 0o644 {
				t.Errorf("a refusal changed a file: %04o", m)
			}
		})
	}
}

// On a Linux without fchmodat2 a file is changed through a descriptor: a
// link is not followed, a file its owner cannot read is changed too.
func TestChmodOpened(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(root, "outside")
	write(t, outside, 0o644)
	write(t, filepath.Join(dir, "db"), 0o666)
	write(t, filepath.Join(dir, "unreadable"), 0o044)
	os.Symlink(outside, filepath.Join(dir, "link"))
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fd := int(d.Fd())
	for _, name := range []string{"db", "unreadable"} {
		if err := chmodOpened(fd, name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if m := mode(t, filepath.Join(dir, name)); m != 0o600 {
			t.Errorf("%s is %04o, want 0600", name, m)
		}
	}
	if err := chmodOpened(fd, "link"); err != syscall.ENOENT || mode(t, outside) != 0o644 {
		t.Errorf("a link: %v, its target %04o", err, mode(t, outside))
	}
}

// A hard link in the directory, to a file that also has a name elsewhere,
// is refused before any file is changed: making it 0600 would change the
// file outside, and SQLite would write into it.
func TestPrepareHardLink(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	os.Chmod(dir, 0o777)
	victim := filepath.Join(outside, "passwd")
	write(t, victim, 0o644)
	write(t, filepath.Join(dir, "countersign.db"), 0o644)
	if err := os.Link(victim, filepath.Join(dir, "countersign.db-wal")); err != nil {
		t.Fatal(err)
	}
	err := secure(dir, os.Geteuid(), slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), `"countersign.db-wal" in the data directory`) || !strings.Contains(err.Error(), "hard link") {
		t.Fatalf("a hard link: %v", err)
	}
	if m := mode(t, victim); m != 0o644 {
		t.Errorf("the file outside was changed: %04o", m)
	}
	if m := mode(t, filepath.Join(dir, "countersign.db")); m != 0o644 {
		t.Errorf("a refusal changed a file: %04o", m)
	}
}

// A data directory reached through a link that another user made (in a
// shared directory, where they may make one) is refused before anything
// is made or changed: that user chose the directory it names, such as a
// system directory root would otherwise close and whose files it would
// make 0600. Links of the user's own, or root's, are followed.
func TestPrepareLinkOfAnotherUser(t *testing.T) {
	needRoot(t)
	for _, tail := range []string{"", "data"} {
		shared, target := t.TempDir(), t.TempDir()
		os.Chmod(shared, 0o1777)
		os.Chmod(target, 0o755)
		write(t, filepath.Join(target, "passwd"), 0o644)
		link := filepath.Join(shared, "countersign-data")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(link, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(link, tail)
		err := Prepare(dir, slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(err.Error(), "is a link that belongs to "+describeUser(nobody)) {
			t.Errorf("%s through a link of another user: %v", dir, err)
		}
		if m, f := mode(t, target), mode(t, filepath.Join(target, "passwd")); m != 0o755 || f != 0o644 {
			t.Errorf("%s: the link's target was changed: %04o %04o", dir, m, f)
		}
		if _, err := os.Lstat(filepath.Join(target, "data")); err == nil {
			t.Errorf("%s: a directory was made through the link", dir)
		}
		if err := os.Lchown(link, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := Prepare(dir, slog.New(slog.DiscardHandler)); err != nil {
			t.Errorf("%s through a link of root: %v", dir, err)
		}
	}
}
