package saferm

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/countersign/countersign"
)

// systemProtected and homeProtected are the protected paths of every
// host and of every home (countersign.SystemProtected, HomeProtected).
// The home directory as a whole is not protected — every rm in a project
// would ask — but it and everything containing it are hard-blocked.
var (
	systemProtected = countersign.SystemProtected
	homeProtected   = countersign.HomeProtected
)

// DefaultProtectedPaths returns the protected paths every policy starts
// with, for the given home directory ("" for none).
func DefaultProtectedPaths(home string) []string {
	out := append([]string(nil), systemProtected[:]...)
	if home != "" {
		for _, h := range homeProtected {
			out = append(out, filepath.Join(home, h))
		}
	}
	return out
}

// ReadSafeRmConf reads a safe-rm configuration file: one absolute path per
// line, blank lines and # comments ignored, shell patterns expanded (as
// safe-rm does). A missing file yields nothing. Relative entries are
// skipped: the file belongs to another tool and a line it tolerates must
// not break rm here.
func ReadSafeRmConf(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || !filepath.IsAbs(line) {
			continue
		}
		out = append(out, expandPattern(line)...)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}

// expandPattern expands a shell pattern to the paths it matches, keeping it
// literally when it matches nothing or is malformed.
func expandPattern(p string) []string {
	if !hasMeta(p) {
		return []string{filepath.Clean(p)}
	}
	m, err := filepath.Glob(p)
	if err != nil || len(m) == 0 {
		return []string{p}
	}
	return m
}

// hasMeta reports whether p holds a shell pattern character.
func hasMeta(p string) bool {
	return strings.ContainsAny(p, `*?[`)
}

// withResolved returns each path together with its symlink-resolved form
// when that differs, so that /bin and /usr/bin both match on merged-/usr
// systems whichever form a target was resolved to.
func withResolved(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p == "" || p == "/" {
			continue // "/" is hard-blocked; as a protected entry it would match everything
		}
		p = filepath.Clean(p)
		out = append(out, p)
		if r := evalExisting(p); r != p && r != "/" {
			out = append(out, r)
		}
	}
	return out
}

// protectionReason tells why deleting target touches a protected path, or
// returns "". A target is protected when it is a protected path, lies
// inside one, or contains one (deleting /var deletes /var/www).
func protectionReason(target string, protected []string) string {
	for _, p := range protected {
		switch {
		case target == p || strings.HasPrefix(target, p+"/"):
			return "protected path: " + displayPath(p)
		case strings.HasPrefix(p, target+"/"):
			return fmt.Sprintf("protected path: %s (inside %s)", displayPath(p), displayPath(target))
		}
	}
	return ""
}

// resolvePatterns returns each safe pattern together with a form whose
// literal leading directories are symlink-resolved, so that /tmp/build-*
// still matches where /tmp is a symlink (targets are always resolved).
func resolvePatterns(pats []string) []string {
	out := make([]string, 0, len(pats))
	for _, pat := range pats {
		out = append(out, pat)
		dir, rest := pat, ""
		for hasMeta(dir) {
			rest = filepath.Join(filepath.Base(dir), rest)
			dir = filepath.Dir(dir)
		}
		if r := evalExisting(dir); r != dir {
			out = append(out, filepath.Join(r, rest))
		}
	}
	return out
}

// matchesSafe reports whether target, or a directory it lies in, matches
// one of the safe patterns: /tmp/build-* covers /tmp/build-1/out too.
func matchesSafe(target string, pats []string) bool {
	for p := target; ; p = filepath.Dir(p) {
		for _, pat := range pats {
			if ok, _ := filepath.Match(pat, p); ok {
				return true
			}
		}
		if p == "/" || p == "." {
			return false
		}
	}
}
