package countersign_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArchitectureMap: docs/ARCHITECTURE.md's map names every directory
// of the code under internal/, cmd/ and client/, each on a line of its
// own with what it holds, and no directory that is gone; the README keeps
// no second map.
func TestArchitectureMap(t *testing.T) {
	named := mapLines(t, "docs/ARCHITECTURE.md")
	found := map[string]bool{}
	for _, root := range []string{"internal", "cmd", "client"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			if !d.IsDir() {
				// A directory counts once it holds a file, itself or below.
				for dir := filepath.Dir(p); dir != "."; dir = filepath.Dir(dir) {
					found[filepath.ToSlash(dir)+"/"] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	delete(found, "internal/") // the two folders that hold packages are no package
	delete(found, "cmd/")
	if len(found) < 10 {
		t.Fatalf("found only %d directories: the test does not run from the module's root", len(found))
	}
	for dir := range found {
		if what, ok := named[dir]; !ok {
			t.Errorf("docs/ARCHITECTURE.md's map has no line for %s: add one saying what it holds", dir)
		} else if what == "" {
			t.Errorf("docs/ARCHITECTURE.md's line for %s does not say what it holds", dir)
		}
	}
	for dir := range named {
		if !found[dir] {
			t.Errorf("docs/ARCHITECTURE.md's map names %s, which holds nothing", dir)
		}
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "internal/") || strings.HasPrefix(line, "cmd/") {
			t.Errorf("README.md holds a map of its own (%q): link to docs/ARCHITECTURE.md instead", line)
		}
	}
}

// mapLines reads the map of the Shape section, the first code block after
// its heading: each line a directory and what it holds.
func mapLines(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	named := map[string]string{}
	section, inBlock := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "## Shape":
			section = true
		case section && strings.HasPrefix(line, "```"):
			if inBlock {
				return named
			}
			inBlock = true
		case inBlock:
			dir, what, _ := strings.Cut(line, " ")
			if strings.HasSuffix(dir, "/") {
				if _, dup := named[dir]; dup {
					t.Errorf("docs/ARCHITECTURE.md's map names %s twice", dir)
				}
				named[dir] = strings.TrimSpace(what)
			}
		}
	}
	t.Fatalf("%s has no map under ## Shape", path)
	return nil
}
