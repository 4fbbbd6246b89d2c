package server

import "testing"

// TestAsTyped: a field a browser sends back unchanged keeps the agent's
// value exactly, though a browser changes its line breaks and NULs; a
// changed field is what was typed.
func TestAsTyped(t *testing.T) {
	for _, c := range []struct {
		was, got string
		oneLine  bool
		want     string
	}{
		{"a\r\nb\rc", "a\nb\nc", false, "a\r\nb\rc"},
		{"a\x00b", "a\uFFFDb", false, "a\x00b"},
		{"a\rb", "ab", true, "a\rb"},
		{"a\r\nb", "a\nb", true, "a\nb"}, // a one-line field drops line breaks: changed
		{"ls", "ls -la", false, "ls -la"},
		{"ls", "ls", false, "ls"},
		{"", "", true, ""},
	} {
		if got := asTyped(c.was, c.got, c.oneLine); got != c.want {
			t.Errorf("asTyped(%q, %q, %v) = %q, want %q", c.was, c.got, c.oneLine, got, c.want)
		}
	}
}
