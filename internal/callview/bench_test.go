package callview

import (
	"encoding/json"
	"strconv"
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

// manyMembers is an object of numbered members, {"0":0,"1":0,…}, of at
// least size bytes.
func manyMembers(size int) json.RawMessage {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + strconv.Itoa(i) + `":0`)
	}
	b.WriteByte('}')
	return json.RawMessage(b.String())
}

// BenchmarkFieldsManyMembers is the cost of the fields of arguments of
// many small members: the largest the server stores (32 KiB), and the
// largest decoded into fields (MaxRaw).
func BenchmarkFieldsManyMembers(b *testing.B) {
	for _, size := range []int{32 << 10, MaxRaw - 16} {
		raw := manyMembers(size)
		b.Run(strconv.Itoa(len(raw)>>10)+"KiB", func(b *testing.B) {
			for b.Loop() {
				Fields(raw, nil)
			}
		})
	}
}
