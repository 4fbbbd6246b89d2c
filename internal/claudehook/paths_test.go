package claudehook

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRealPath resolves paths as the kernel will when the call runs.
func TestRealPath(t *testing.T) {
	w := newWorld(t)
	h := w.home
	for link, target := range map[string]string{
		"proj/out":   "../outside",        // a directory that does not exist yet
		"proj/keys":  h + "/.ssh",         // absolute
		"proj/chain": "keys",              // a link to a link
		"proj/loop":  "loop",              // itself
		"proj/up":    "src/../../outside", // ".." inside a target
	} {
		if err := os.Symlink(target, filepath.Join(h, link)); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(h, ".ssh"), 0o700)
	tests := []struct{ in, want, err string }{
		{in: "proj/a.txt", want: "proj/a.txt"},
		{in: "proj/new/deeper/x", want: "proj/new/deeper/x"},
		{in: "proj/out/x", want: "outside/x"},
		{in: "proj/keys/id", want: ".ssh/id"},
		{in: "proj/chain/id", want: ".ssh/id"},
		{in: "proj/keys/../x", want: "x"}, // after the link, not lexically
		{in: "proj/up/x", want: "outside/x"},
		{in: "proj/loop/x", err: "too many levels"},
		{in: "proj/a.txt/x", err: "not a directory"},
	}
	for _, tt := range tests {
		got, err := realPath(h + "/" + tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %q, %v; want error %q", tt.in, got, err, tt.err)
		case tt.err == "" && (err != nil || got != filepath.Join(h, tt.want)):
			t.Errorf("%s: %q, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	// A write whose real path cannot be known is asked, whatever the rules.
	p := w.policy()
	r, err := parseRule("Write(./**)", Allow)
	if err != nil {
		t.Fatal(err)
	}
	p.Rules = append(p.Rules, r)
	v := p.Decide(context.Background(), &Call{Tool: "Write", Path: w.project + "/loop/x", Cwd: w.project, Project: w.project})
	if v.Action != Ask || !strings.Contains(strings.Join(v.Reasons, ";"), "cannot be known") {
		t.Errorf("write through a loop: %v %v", v.Action, v.Reasons)
	}
}
