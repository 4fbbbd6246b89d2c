//go:build unix

package secretkey

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCreateLoad(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	k, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the new file: %v, %v; want mode 0600 whatever the umask", fi, err)
	}
	b, _ := os.ReadFile(path)
	if len(b) != 65 || b[64] != '\n' {
		t.Fatalf("the file holds %q; want 64 hex characters and a newline", b)
	}
	again, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if again.Verify(k.NewKeyCheck(1)) != nil {
		t.Fatalf("Load read another key than Create wrote")
	}
	if _, err := Create(path); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Create over a file: %v", err)
	}
	copied := filepath.Join(dir, "copy.key")
	if err := Copy(path, copied); err != nil {
		t.Fatal(err)
	}
	if c, err := Load(copied); err != nil || c.Verify(k.NewKeyCheck(1)) != nil {
		t.Fatalf("the copy: %v", err)
	}
}

func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.key")
	if _, err := Create(good); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	hex64 := strings.Repeat("ab", 32)
	link := filepath.Join(dir, "link.key")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]struct {
		path, want string
	}{
		"open to others": {write("loose.key", hex64, 0o640), "open to others (mode 0640)"},
		"too short":      {write("short.key", hex64[:62], 0o600), "does not hold a key"},
		"not hex":        {write("nothex.key", strings.Repeat("zz", 32), 0o600), "does not hold a key"},
		"two keys":       {write("two.key", hex64+"\n"+hex64, 0o600), "does not hold a key"},
		"a directory":    {dir, "not a regular file"},
	} {
		_, err := Load(tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "abab") {
			t.Errorf("%s: %v, want %q", name, err, tt.want)
		}
	}
	if _, err := Load(write("spaces.key", "  "+hex64+"\r\n", 0o400)); err != nil {
		t.Errorf("a key with spaces around, mode 0400: %v", err)
	}
	if _, err := Load(link); err != nil {
		t.Errorf("a link to a key file: %v", err)
	}
	if err := os.Chmod(good, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(link); err == nil || !strings.Contains(err.Error(), "open to others") {
		t.Errorf("a link to a key file open to others: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); !IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
	// Create never writes through a link someone put there.
	target := filepath.Join(dir, "target")
	trap := filepath.Join(dir, "trap.key")
	if err := os.Symlink(target, trap); err != nil {
		t.Fatal(err)
	}
	if _, err := Create(trap); err == nil {
		t.Errorf("Create through a dangling link succeeded")
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Errorf("Create wrote through a link: %v", err)
	}
}

// TestCreateAsRoot: a key file root makes in another user's directory is
// that user's, so that the server running as that user reads it.
func TestCreateAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := t.TempDir()
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	if _, err := Create(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65534 || st.Gid != 65534 || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key file is %d:%d %04o; want 65534:65534 0600", st.Uid, st.Gid, fi.Mode().Perm())
	}
}
