package claudehook

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWrapperLinks finds the rm wrapper's links in PATH: a link to this
// program, and a link to a program named countersign or countersign-agent
// elsewhere; not a plain rm.
func TestWrapperLinks(t *testing.T) {
	w := newWorld(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	agent := w.file("opt/countersign-agent", "#!/bin/sh\n")
	plain := w.file("usr/bin/rm", "#!/bin/sh\n")
	dirs := map[string]string{"a": exe, "b": agent, "c": plain}
	for d, target := range dirs {
		dir := filepath.Join(w.home, d)
		os.MkdirAll(dir, 0o755)
		if err := os.Symlink(target, filepath.Join(dir, "rm")); err != nil {
			t.Fatal(err)
		}
	}
	got := WrapperLinks(filepath.Join(w.home, "a") + ":" + filepath.Join(w.home, "b") + ":" + filepath.Join(w.home, "c") + ":relative")
	for _, want := range []string{filepath.Join(w.home, "a", "rm"), filepath.Join(w.home, "b", "rm"), agent} {
		if !slices.Contains(got, want) {
			t.Errorf("WrapperLinks lacks %s: %q", want, got)
		}
	}
	if slices.Contains(got, filepath.Join(w.home, "c", "rm")) || slices.Contains(got, plain) {
		t.Errorf("a plain rm taken for the wrapper: %q", got)
	}
}
