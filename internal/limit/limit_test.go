package limit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/limit"
)

func nested(open, close string, depth int, inner string) string {
	return strings.Repeat(open, depth) + inner + strings.Repeat(close, depth)
}

func TestCheckJSONDepth(t *testing.T) {
	deepObj := strings.Repeat(`{"a":`, limit.MaxJSONDepth) + `1` + strings.Repeat(`}`, limit.MaxJSONDepth)
	tooDeepObj := strings.Repeat(`{"a":`, limit.MaxJSONDepth+1) + `1` + strings.Repeat(`}`, limit.MaxJSONDepth+1)
	for _, tc := range []struct {
		name, doc string
		deep      bool
	}{
		{"scalar", `"x"`, false},
		{"empty", ``, false},
		{"arrays at the limit", nested("[", "]", limit.MaxJSONDepth, ""), false},
		{"arrays one past", nested("[", "]", limit.MaxJSONDepth+1, ""), true},
		{"9000 arrays", nested("[", "]", 9000, ""), true},
		{"objects at the limit", deepObj, false},
		{"objects one past", tooDeepObj, true},
		{"siblings do not add up", `[` + strings.Repeat(nested("[", "]", limit.MaxJSONDepth-1, "")+",", 100) + `1]`, false},
		{"brackets in strings", `{"a":"` + strings.Repeat("[{", 200) + `"}`, false},
		{"escaped quote keeps the string open", `{"a":"\"` + strings.Repeat("[", 200) + `"}`, false},
		{"escaped backslash closes it", `["\\",` + nested("[", "]", limit.MaxJSONDepth, "") + `]`, true},
		{"unterminated string", `["` + strings.Repeat("[", 200), false},
		{"close first does not end the count", `]` + nested("[", "]", 100, ""), true},
		{"nor one after the value", `{}]` + nested("[", "]", limit.MaxJSONDepth+1, ""), true},
		{"a stray close lowers nothing", `]]]` + nested("[", "]", limit.MaxJSONDepth, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := limit.CheckJSONDepth([]byte(tc.doc))
			if tc.deep != errors.Is(err, limit.ErrTooDeep) || (!tc.deep && err != nil) {
				t.Fatalf("CheckJSONDepth = %v, want too deep %v", err, tc.deep)
			}
		})
	}
	at := nested("[", "]", limit.MaxJSONDepth-2, "")
	if limit.CheckJSONDepthAt([]byte(at), 2) != nil || limit.CheckJSONDepthAt([]byte("["+at+"]"), 2) == nil {
		t.Errorf("CheckJSONDepthAt does not count the outer levels")
	}
	if msg := limit.ErrTooDeep.Error(); !strings.Contains(msg, "64") {
		t.Errorf("the error %q does not name the limit", msg)
	}
}

// randomJSON builds a random JSON value of at most depth levels.
func randomJSON(r *rand.Rand, depth int) any {
	switch n := r.IntN(9); {
	case depth > 0 && n < 2:
		m := map[string]any{}
		for i := range r.IntN(4) {
			m[fmt.Sprintf("k%d<é&", i)] = randomJSON(r, depth-1)
		}
		return m
	case depth > 0 && n < 4:
		a := []any{}
		for range r.IntN(4) {
			a = append(a, randomJSON(r, depth-1))
		}
		return a
	case n < 5:
		return "s \"q\" \\ [{}] ,: é\u2028 " + strings.Repeat("x", r.IntN(5))
	case n < 6:
		return r.Float64() * 1e6
	case n < 7:
		return nil
	case n < 8:
		return true
	}
	return -12
}

func jsonIndent(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		t.Fatalf("json.Indent(%s): %v", raw, err)
	}
	return b.String()
}

// TestIndentAsJSONIndent: within its limit, Indent writes exactly what
// json.Indent does; cut, it writes a beginning of it and counts the rest
// exactly.
func TestIndentAsJSONIndent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	docs := []string{`{}`, `[]`, `[[],{}]`, `{"a":[ ],"b":{ }}`, " { \"a\" : [ 1 , 2 ] ,\n\t\"b\" : \"x y\" } ", `"x"`, `12`}
	for range 300 {
		b, err := json.Marshal(randomJSON(r, 6))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	for _, doc := range docs {
		want := strings.TrimRight(jsonIndent(t, []byte(doc)), " \t\n\r")
		got, more := limit.Indent([]byte(doc), 1<<20)
		if lines := limit.IndentLines([]byte(doc)); lines != strings.Count(want, "\n")+1 {
			t.Fatalf("IndentLines(%s) = %d, want %d", doc, lines, strings.Count(want, "\n")+1)
		}
		if got != want || more != 0 {
			t.Fatalf("Indent(%s) = %q, %d\nwant %q", doc, got, more, want)
		}
		for _, max := range []int{0, 1, 7, len(want) / 3, len(want) - 1} {
			if max < 0 {
				continue
			}
			got, more := limit.Indent([]byte(doc), max)
			if len(got) > max || !strings.HasPrefix(want, got) || len(got)+more != len(want) || !utf8.ValidString(got) {
				t.Fatalf("Indent(%s, %d) = %q, %d: not a whole-character beginning of %q with the rest counted", doc, max, got, more, want)
			}
		}
	}
}

func TestIndentJSONBounded(t *testing.T) {
	// The worst the depth limit leaves: every element at the deepest level,
	// each on a line of its own indented 2×64 spaces.
	doc := nested("[", "]", limit.MaxJSONDepth-1, "["+strings.Repeat("1,", 16<<10)+"1]")
	full := jsonIndent(t, []byte(doc))
	const max = 16 << 10
	got := limit.IndentJSON([]byte(doc), max)
	if len(got) > max {
		t.Fatalf("IndentJSON is %d bytes, over the limit of %d", len(got), max)
	}
	body, tail, ok := strings.Cut(got, "\n… (truncated, ")
	if !ok || !strings.HasPrefix(full, body) {
		t.Fatalf("IndentJSON does not end in the marker after a beginning of the rendering: …%q", got[len(got)-80:])
	}
	if want := fmt.Sprintf("%d bytes more)", len(full)-len(body)); tail != want {
		t.Errorf("marker says %q, want %q", tail, want)
	}
	if short := `{"a":[1,2]}`; limit.IndentJSON([]byte(short), max) != jsonIndent(t, []byte(short)) {
		t.Errorf("a short text is not rendered whole")
	}
}

func TestText(t *testing.T) {
	if got := limit.Text("short", 100); got != "short" {
		t.Errorf("Text(short) = %q", got)
	}
	s := strings.Repeat("é", 1000) // 2000 bytes
	got := limit.Text(s, 500)
	if len(got) > 500 || !utf8.ValidString(got) {
		t.Fatalf("Text is %d bytes (valid UTF-8 %v), want at most 500", len(got), utf8.ValidString(got))
	}
	body, tail, ok := strings.Cut(got, "\n… (truncated, ")
	if !ok || !strings.HasPrefix(s, body) || tail != fmt.Sprintf("%d bytes more)", len(s)-len(body)) {
		t.Errorf("Text = …%q, want a beginning and the marker of the rest", got[len(got)-60:])
	}
}

func BenchmarkCheckJSONDepth(b *testing.B) {
	// 64 KiB, the API's body limit, of objects, arrays and strings with
	// brackets and escapes in them.
	doc := []byte(`{"arguments":[` + strings.Repeat(`{"a":"x\"y [ {","b":[1,2]},`, 2600) + `1]}`)
	if limit.CheckJSONDepth(doc) != nil {
		b.Fatal("the document is too deep")
	}
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		limit.CheckJSONDepth(doc)
	}
}
