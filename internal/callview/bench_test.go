package callview

import (
	"encoding/json"
	"strings"
	"testing"
)

// The largest arguments the server stores (32 KiB): a file's content.
var benchArgs = json.RawMessage(`{"content":"` + strings.Repeat(`line of a file\n`, 2150) + `","path":"/srv/notes.txt"}`)

// BenchmarkSummary is the cost of a Decided row's summary of the largest
// arguments; BenchmarkFields that of a page's fields.
func BenchmarkSummary(b *testing.B) {
	for b.Loop() {
		Summary("mcp", "write_file", benchArgs)
	}
}

func BenchmarkFields(b *testing.B) {
	for b.Loop() {
		Fields(benchArgs, nil)
	}
}

// BenchmarkValid is one pass of the standard scanner over the same
// arguments, the floor of any reading of them.
func BenchmarkValid(b *testing.B) {
	for b.Loop() {
		json.Valid(benchArgs)
	}
}
