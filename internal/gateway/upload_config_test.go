package gateway

import (
	"strings"
	"testing"
)

// TestFileArgsChecked: a file argument is one name the upstream's tool
// takes, once: path mode makes a folder of that name in the call's
// private folder, so a name with a separator or a dot name would put the
// decrypted copy elsewhere, and a second entry for the same argument was
// never reached (the first one's purposes decided) and made path mode
// fail.
func TestFileArgsChecked(t *testing.T) {
	t.Parallel()
	for arg, dup := range map[string]bool{"../../tmp/x": false, "a/b": false, `a\b`: false, "..": false, ".": false, "file": true} {
		c := NewConfig()
		c.Files.Purposes = []string{"receipt", "einvoice"}
		files := []FileArg{{Tool: "attach", Arg: arg, Purposes: []string{"receipt"}, As: "path"}}
		if dup {
			files = append(files, FileArg{Tool: "attach", Arg: arg, Purposes: []string{"einvoice"}, As: "base64"})
		}
		c.Upstreams = []UpstreamConfig{{Name: "books", Command: []string{"books-mcp"}, Files: files}}
		if err := c.Check(); err == nil || !strings.Contains(err.Error(), "attach") {
			t.Errorf("file argument %q (twice: %v): %v", arg, dup, err)
		}
	}
	c := NewConfig()
	c.Files.Purposes = []string{"receipt"}
	c.Upstreams = []UpstreamConfig{{Name: "books", Command: []string{"books-mcp"}, Files: []FileArg{
		{Tool: "attach", Arg: "file", Purposes: []string{"receipt"}, As: "path"},
		{Tool: "import", Arg: "file", Purposes: []string{"receipt"}, As: "path"},
		{Tool: "attach", Arg: "scan.v2", Purposes: []string{"receipt"}, As: "base64"}}}}
	if err := c.Check(); err != nil {
		t.Fatalf("good file arguments: %v", err)
	}
}
