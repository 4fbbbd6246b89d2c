package callview

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// value returns the whole shown value of a field: head and folded rest.
func value(f Field) string { return f.Head + f.Rest }

func TestFieldsTargetFirstAndLines(t *testing.T) {
	fs := Fields(json.RawMessage(`{"content":"line one\nline two","mode":"0644","path":"/tmp/notes.txt"}`), nil)
	if len(fs) != 3 || fs[0].Name != "path" || value(fs[0]) != "/tmp/notes.txt" {
		t.Fatalf("the path is not the first field: %+v", fs)
	}
	if fs[2].Name != "content" || value(fs[2]) != "line one\nline two" || fs[2].Lines != 2 || fs[2].Folded() {
		t.Errorf("the content is not shown as its lines, after the short arguments: %+v", fs[2])
	}
	if fs[1].Name != "mode" || fs[1].Kind != "text" {
		t.Errorf("the short arguments follow the target: %+v", fs[1])
	}
}

func TestFieldsEscaping(t *testing.T) {
	fs := Fields(json.RawMessage(`{"a\u202eb":"x\u001b[31mred\u200b","n":12345678901234567890,"t":true,"z":null}`), nil)
	if fs[0].Name != `a\u202eb` || value(fs[0]) != `x\x1b[31mred\u200b` {
		t.Errorf("hidden characters are not escaped: name %q value %q", fs[0].Name, value(fs[0]))
	}
	// Numbers exactly as sent; true and null as words.
	if fs[1].Kind != "number" || fs[1].Head != "12345678901234567890" || fs[2].Head != "true" || fs[3].Head != "null" {
		t.Errorf("scalars: %+v", fs[1:])
	}
	// HTML is the template's to escape: the text is kept as it is.
	fs = Fields(json.RawMessage(`{"html":"<script>alert(1)</script>"}`), nil)
	if value(fs[0]) != "<script>alert(1)</script>" {
		t.Errorf("the text changed: %q", value(fs[0]))
	}
}

func TestFieldsFolding(t *testing.T) {
	long := strings.Repeat("a line of the file\n", 100)
	raw, _ := json.Marshal(map[string]string{"content": long})
	f := Fields(raw, nil)[0]
	if strings.Count(f.Head, "\n") != HeadLines || !f.Folded() || f.Head+f.Rest != long || f.Size != len(long) || f.Lines != 101 {
		t.Errorf("a long text is not folded after its first lines with its size: head %q, %d bytes, %d lines", f.Head, f.Size, f.Lines)
	}
	// One long line is folded at HeadBytes.
	one := strings.Repeat("x", 5000)
	raw, _ = json.Marshal(map[string]string{"blob": one})
	f = Fields(raw, nil)[0]
	if len(f.Head) != HeadBytes || f.Head+f.Rest != one {
		t.Errorf("a long line: head %d bytes, all %d", len(f.Head), len(f.Head+f.Rest))
	}
	// A value beyond MaxValue is cut, and the cut counted.
	huge := strings.Repeat("y", MaxValue+1000)
	raw, _ = json.Marshal(map[string]string{"huge": huge})
	f = Fields(raw, nil)[0]
	if len(f.Head+f.Rest) != MaxValue || f.Cut != 1000 || f.Size != len(huge) {
		t.Errorf("a huge value: kept %d, cut %d, size %d", len(f.Head+f.Rest), f.Cut, f.Size)
	}
}

func TestFieldsNested(t *testing.T) {
	fs := Fields(json.RawMessage(`{"opts":{"depth":2,"tags":["a","b"]}}`), nil)
	want := []struct {
		name  string
		depth int
		kind  string
	}{{"opts", 0, "object"}, {"depth", 1, "number"}, {"tags", 1, "list"}, {"[1]", 2, "text"}, {"[2]", 2, "text"}}
	if len(fs) != len(want) {
		t.Fatalf("fields %+v", fs)
	}
	for i, w := range want {
		if fs[i].Name != w.name || fs[i].Depth != w.depth || fs[i].Kind != w.kind {
			t.Errorf("field %d is %s at %d (%s), want %s at %d (%s)", i, fs[i].Name, fs[i].Depth, fs[i].Kind, w.name, w.depth, w.kind)
		}
	}
	if fs[0].Count != 2 || fs[2].Count != 2 {
		t.Errorf("counts: %d, %d", fs[0].Count, fs[2].Count)
	}
}

// A huge or deeply nested argument is bounded: in fields, depth and the
// bytes kept.
func TestFieldsBounds(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 60) + `1` + strings.Repeat(`}`, 60)
	fs := Fields(json.RawMessage(`{"deep":`+deep+`}`), nil)
	for _, f := range fs {
		if f.Depth > MaxDepth {
			t.Fatalf("a field at depth %d", f.Depth)
		}
	}
	if last := fs[len(fs)-1]; last.Depth != MaxDepth || last.Kind != "text" || !strings.HasPrefix(value(last), `{"a":`) {
		t.Errorf("the value below MaxDepth is not shown as JSON text: %+v", last)
	}
	// Too deep for the limit: one field, its size.
	tooDeep := strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100)
	fs = Fields(json.RawMessage(`{"x":`+tooDeep+`}`), nil)
	if len(fs) != 1 || fs[0].Cut == 0 {
		t.Errorf("too deep: %+v", fs)
	}
	// Many members: MaxFields, then a count of the rest.
	var b strings.Builder
	b.WriteString(`{"list":[`)
	for i := range 5000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d"`, i)
	}
	b.WriteString(`]}`)
	fs = Fields(json.RawMessage(b.String()), nil)
	if len(fs) > MaxFields+1 || fs[len(fs)-1].Kind != "more" || fs[len(fs)-1].Count != 5000-(MaxFields-1) {
		t.Errorf("%d fields, the last %+v", len(fs), fs[len(fs)-1])
	}
	// Many long values: MaxText in all.
	m := map[string]string{}
	for i := range 20 {
		m[fmt.Sprintf("k%02d", i)] = strings.Repeat("z", 10_000)
	}
	raw, _ := json.Marshal(m)
	total, cut := 0, 0
	for _, f := range Fields(raw, nil) {
		total += len(f.Head) + len(f.Rest)
		cut += f.Cut
	}
	if total > MaxText || total+cut != 200_000 {
		t.Errorf("kept %d bytes, cut %d, of 200000", total, cut)
	}
	// Larger than MaxRaw: not decoded.
	big := `{"x":"` + strings.Repeat("q", MaxRaw) + `"}`
	if fs := Fields(json.RawMessage(big), nil); len(fs) != 1 || fs[0].Size != len(big) {
		t.Errorf("arguments beyond MaxRaw: %+v", fs)
	}
}

// TestFieldsManyMembers renders arguments of as many members as MaxRaw
// holds, {"0":0,"1":0,…} with targets and a long text among them, in the
// order of the fields: the targets, the short arguments, the long ones.
// BenchmarkFieldsManyMembers measures their cost.
func TestFieldsManyMembers(t *testing.T) {
	raw := manyMembers(MaxRaw - 1024)
	n := strings.Count(string(raw), ":")
	raw = json.RawMessage(`{"url":"https://example.com/","00":"a\nb","path":"/srv/x",` + string(raw[1:]))
	if len(raw) > MaxRaw {
		t.Fatalf("the arguments are %d bytes, more than MaxRaw", len(raw))
	}
	fs := Fields(raw, nil)
	if len(fs) != MaxFields+1 || fs[0].Name != "path" || fs[1].Name != "url" {
		t.Fatalf("%d fields, the first %+v", len(fs), fs[:2])
	}
	// The short ones in the order of their names: "0", "1", "10", "100", …
	for i, want := range []string{"0", "1", "10", "100", "1000", "10000"} {
		if fs[2+i].Name != want || fs[2+i].Kind != "number" {
			t.Errorf("field %d is %+v, not %q", 2+i, fs[2+i], want)
		}
	}
	if last := fs[len(fs)-1]; last.Kind != "more" || last.Count != n+3-MaxFields {
		t.Errorf("the last field is %+v, not %d more", last, n+3-MaxFields)
	}
	// Of few members, the long text comes after the short ones.
	fs = Fields(json.RawMessage(`{"00":"a\nb","1":0,"path":"/srv/x"}`), nil)
	if len(fs) != 3 || fs[0].Name != "path" || fs[1].Name != "1" || fs[2].Name != "00" {
		t.Errorf("the fields of few members: %+v", fs)
	}
}

func TestFieldsUpload(t *testing.T) {
	up := &Upload{Reference: "2VZ-D49", MIME: "application/pdf", SHA256: "ab", Size: 48, URL: "/files/u1"}
	fs := Fields(json.RawMessage(`{"file":"upload:u1","other":"upload:u2"}`), map[string]*Upload{"u1": up})
	if fs[0].Kind != "upload" || fs[0].Upload != up {
		t.Errorf("the upload is not shown as one: %+v", fs[0])
	}
	if fs[1].Kind != "text" || value(fs[1]) != "upload:u2" {
		t.Errorf("an unknown upload is shown as text: %+v", fs[1])
	}
}

func TestDiff(t *testing.T) {
	d := Diff("a\nb\n", "c")
	want := []DiffLine{{"-", "a"}, {"-", "b"}, {"+", "c"}}
	if fmt.Sprint(d) != fmt.Sprint(want) {
		t.Errorf("diff %v, want %v", d, want)
	}
	d = Diff(strings.Repeat("x\n", MaxDiffLines+50), "")
	if len(d) != MaxDiffLines+1 || d[MaxDiffLines].Text != "50 more lines not shown" {
		t.Errorf("a long side: %d lines, last %v", len(d), d[len(d)-1])
	}
	if d := Diff("\u202e", ""); d[0].Text != `\u202e` {
		t.Errorf("not escaped: %v", d)
	}
}

func TestSummary(t *testing.T) {
	for _, c := range []struct {
		kind, action, args, want string
	}{
		{"tool", "Bash", `{"command":"rm -rf build\necho done"}`, `$ rm -rf build\necho done`},
		{"mcp", "write_file", `{"content":"x","path":"/tmp/a.txt"}`, "write_file path=/tmp/a.txt"},
		{"mcp", "digest", `{"file":"upload:u1"}`, "digest file=upload:u1"},
		{"mcp", "ping", `{}`, "ping"},
		{"mcp", "send", `{"body":"hi","n":1}`, "send body=hi"},
		{"mcp", "create_issue", `{"body":"a\nb","repo":"acme/app"}`, "create_issue repo=acme/app"},
		{"tool", "Edit", `{"file_path":"/home/dev/.bashrc","old_string":"a"}`, "Edit /home/dev/.bashrc"},
		{"tool", "WebFetch", `{"url":"https://example.com/x","prompt":"p"}`, "WebFetch https://example.com/x"},
		{"tool", "mcp__github__create_issue", `{"title":"t"}`, "github/create_issue title=t"},
		{"rm", "rm -r build", `{"targets":["/x/build"]}`, "rm -r build"},
		{"generic", "deploy\nprod", ``, `deploy\nprod`},
	} {
		if got := Summary(c.kind, c.action, json.RawMessage(c.args)); got != c.want {
			t.Errorf("Summary(%s, %q, %s) = %q, want %q", c.kind, c.action, c.args, got, c.want)
		}
	}
	long := Summary("tool", "Bash", json.RawMessage(`{"command":"`+strings.Repeat("é", 300)+`"}`))
	if len(long) > maxSummary+len("…") || !strings.HasSuffix(long, "…") {
		t.Errorf("a long summary is %d bytes: %q", len(long), long)
	}
}
