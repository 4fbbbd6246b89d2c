package saferm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindRealRm(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wrapperLink := filepath.Join(dir, "rm-link")
	symlink(t, self, wrapperLink)
	fake := filepath.Join(dir, "fake-rm")
	writeFile(t, fake, "#!/bin/sh\n")
	if err := os.Chmod(fake, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "not-executable")
	writeFile(t, plain, "x")
	tests := []struct {
		name, configured, want string // want: the path, or a piece of the error
		ok                     bool
	}{
		{"configured", fake, fake, true},
		{"symlink to the wrapper", wrapperLink, "wrapper itself", false},
		{"the wrapper", self, "wrapper itself", false},
		{"relative", "rm", "not an absolute path", false},
		{"not executable", plain, "not an executable file", false},
		{"a directory", dir, "not an executable file", false},
		{"missing", filepath.Join(dir, "nope"), "no such file", false},
	}
	if hard := filepath.Join(dir, "rm-hardlink"); os.Link(self, hard) == nil {
		tests = append(tests, struct {
			name, configured, want string
			ok                     bool
		}{"hard link to the wrapper", hard, "wrapper itself", false})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FindRealRm(tt.configured, self)
			if tt.ok {
				if err != nil || got != tt.want {
					t.Errorf("FindRealRm = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, ErrNoRealRm) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("FindRealRm = %q, %v; want ErrNoRealRm about %q", got, err, tt.want)
			}
		})
	}
}

func TestFindRealRmDefault(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	got, err := FindRealRm("", self)
	if _, statErr := os.Stat("/bin/rm"); statErr == nil {
		if err != nil || got != "/bin/rm" {
			t.Errorf("FindRealRm default = %q, %v; want /bin/rm", got, err)
		}
		return
	}
	if _, statErr := os.Stat("/usr/bin/rm"); statErr == nil && (err != nil || got != "/usr/bin/rm") {
		t.Errorf("FindRealRm default = %q, %v; want /usr/bin/rm", got, err)
	}
}
