// Package callview renders what a request will run for a human who
// decides on it: the arguments of a call as labelled fields (each name,
// then its value as text), an edit as a diff, and a one-line summary for
// lists. Every text it returns has its hidden characters escaped
// (visible), and every rendering is bounded in the fields it makes and
// the bytes it keeps, whatever the arguments hold: a page shows the rest
// as counted, never as work done.
package callview

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/countersign/countersign/internal/limit"
	"github.com/countersign/countersign/internal/visible"
)

// Bounds of a rendering.
const (
	// MaxRaw is the largest arguments text that is decoded into fields;
	// larger arguments are shown by their size alone. The server stores at
	// most 32 KiB of arguments.
	MaxRaw = 256 << 10
	// MaxFields is how many fields, nested ones counted, a call shows.
	MaxFields = 120
	// MaxDepth is how deeply nested values are shown as fields of their
	// own; a value nested deeper is shown as compact JSON text.
	MaxDepth = 4
	// MaxText is how many bytes of values a rendering keeps in all, head
	// and folded rest together.
	MaxText = 48 << 10
	// MaxValue is how many bytes of one value are kept.
	MaxValue = 16 << 10
	// HeadLines and HeadBytes bound the part of a value shown unfolded.
	HeadLines = 4
	HeadBytes = 320
	maxName   = 120
)

// Upload is an upload a file argument names, as the server knows it.
type Upload struct {
	Reference, MIME, SHA256, URL string
	Size                         int64
}

// Field is one argument, or one member of a nested value, as a human
// reads it.
type Field struct {
	Name  string // the argument's name, or [N] for an element of a list
	Depth int    // 0 for an argument of the call; 1 to MaxDepth nested
	// Kind is "text", "number", "bool", "null", "object", "list",
	// "upload", or "more" for the line that counts fields not shown.
	Kind string
	// Head is the value's beginning shown unfolded, Rest what follows it,
	// shown folded; Cut counts the bytes of it kept by neither.
	Head, Rest string
	Cut        int
	Size       int // bytes of the value as sent (of a text: its UTF-8 bytes)
	Lines      int // lines of a text
	Count      int // members of an object or list; of "more", fields not shown
	Upload     *Upload
}

// Empty reports whether the value is an empty text.
func (f Field) Empty() bool { return f.Kind == "text" && f.Size == 0 }

// Folded reports whether part of the value is shown folded or not at all.
func (f Field) Folded() bool { return f.Rest != "" || f.Cut > 0 }

// targetKeys are the names of arguments that say what a call acts on,
// shown first and used as its main argument.
var targetKeys = []string{"file_path", "path", "notebook_path", "filePath", "file", "url", "uri", "command", "query", "name", "id", "source", "destination"}

// Fields renders the arguments of a call, a JSON object, as fields: the
// arguments that name a target first, then the short ones (a line), then
// the long ones, each in their order.
// uploads maps the ids of the uploads the call carries (from "upload:ID"
// values) to their facts. Arguments that are not an object are one field
// named "arguments".
func Fields(raw json.RawMessage, uploads map[string]*Upload) []Field {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "{}" || string(raw) == "null" {
		return nil
	}
	r := &renderer{budget: MaxText, uploads: uploads}
	if len(raw) > MaxRaw || limit.CheckJSONDepth(raw) != nil {
		return []Field{{Name: "arguments", Kind: "text", Size: len(raw), Cut: len(raw),
			Head: fmt.Sprintf("(%d bytes, too large or too deeply nested to show as fields)", len(raw))}}
	}
	members, ok := object(raw)
	if !ok {
		r.value("arguments", 0, raw)
		return r.out
	}
	// The targets in the order of targetKeys, then the short arguments,
	// then the long ones, each in their order: one pass over the members,
	// so that the work grows with their number, not with its square.
	targets := make([]int, len(targetKeys))
	var short, long []int
	for i, m := range members {
		if t := slices.Index(targetKeys, m.key); t >= 0 {
			targets[t] = i + 1 // a member's name is unique: one per key
		} else if isShort(m.value) {
			short = append(short, i)
		} else {
			long = append(long, i)
		}
	}
	order := make([]int, 0, len(members))
	for _, i := range targets {
		if i > 0 {
			order = append(order, i-1)
		}
	}
	order = append(append(order, short...), long...)
	for n, i := range order {
		if len(r.out) >= MaxFields {
			r.out = append(r.out, Field{Kind: "more", Count: len(order) - n})
			break
		}
		r.value(members[i].key, 0, members[i].value)
	}
	return r.out
}

// maxShort is the longest text that isShort.
const maxShort = 200

// isShort reports whether a value reads as one short line: a number, a
// word, or a text of one line of at most maxShort bytes.
func isShort(raw json.RawMessage) bool {
	switch firstByte(raw) {
	case '{', '[':
		return false
	case '"':
	default: // a number, true, false or null
		return len(raw) <= maxShort
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return len(raw) <= maxShort
	}
	return len(s) <= maxShort && !strings.Contains(s, "\n")
}

// member is a member of a JSON object.
type member struct {
	key   string
	value json.RawMessage
}

// object returns the members of a JSON object in the order of their
// names, which is their order in the canonical form (RFC 8785) that the
// server stores, or false when raw is not one. One pass of the decoder,
// which a reading token by token costs several times over.
func object(raw json.RawMessage) ([]member, bool) {
	if firstByte(raw) != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	out := make([]member, 0, len(m))
	for k, v := range m {
		out = append(out, member{k, v})
	}
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.key, b.key) })
	return out, true
}

// list returns the elements of a JSON array, or false when raw is not one.
func list(raw json.RawMessage) ([]json.RawMessage, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return nil, false
	}
	var out []json.RawMessage
	for dec.More() {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

type renderer struct {
	out     []Field
	budget  int
	uploads map[string]*Upload
}

// value appends the field of one value, and those of its members.
func (r *renderer) value(name string, depth int, raw json.RawMessage) {
	f := Field{Name: limit.Text(visible.Line(name), maxName), Depth: depth, Size: len(raw)}
	switch c := firstByte(raw); {
	case c == '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		f.Size = len(s)
		if id, ok := strings.CutPrefix(s, "upload:"); ok && r.uploads[id] != nil {
			f.Kind, f.Upload = "upload", r.uploads[id]
			r.out = append(r.out, f)
			return
		}
		f.Kind = "text"
		f.Lines = strings.Count(s, "\n") + 1
		r.text(&f, s)
		r.out = append(r.out, f)
	case c == '{' || c == '[':
		var names []string
		var values []json.RawMessage
		if c == '{' {
			f.Kind = "object"
			members, _ := object(raw)
			for _, m := range members {
				names, values = append(names, m.key), append(values, m.value)
			}
		} else {
			f.Kind = "list"
			values, _ = list(raw)
			for i := range values {
				names = append(names, "["+strconv.Itoa(i+1)+"]")
			}
		}
		f.Count = len(values)
		if depth >= MaxDepth && f.Count > 0 {
			// Deeper than fields go: the value as compact JSON text.
			f.Kind = "text"
			r.text(&f, string(raw))
			r.out = append(r.out, f)
			return
		}
		r.out = append(r.out, f)
		for i := range values {
			if len(r.out) >= MaxFields {
				r.out = append(r.out, Field{Kind: "more", Depth: depth + 1, Count: len(values) - i})
				return
			}
			r.value(names[i], depth+1, values[i])
		}
	case c == 't' || c == 'f':
		f.Kind, f.Head = "bool", string(raw)
		r.out = append(r.out, f)
	case c == 'n':
		f.Kind, f.Head = "null", "null"
		r.out = append(r.out, f)
	default:
		f.Kind = "number"
		r.text(&f, string(raw))
		r.out = append(r.out, f)
	}
}

func firstByte(raw json.RawMessage) byte {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

// text sets the head and rest of a field from s, within the value's and
// the rendering's budgets.
func (r *renderer) text(f *Field, s string) {
	keep := min(len(s), MaxValue, r.budget)
	for keep > 0 && keep < len(s) && !utf8.RuneStart(s[keep]) {
		keep--
	}
	f.Cut = len(s) - keep
	s = s[:keep]
	r.budget -= keep
	head := headEnd(s)
	f.Head, f.Rest = visible.String(s[:head]), visible.String(s[head:])
}

// headEnd is where the unfolded part of s ends: after HeadLines lines or
// HeadBytes bytes, on a line or character boundary.
func headEnd(s string) int {
	end := 0
	for range HeadLines {
		i := strings.IndexByte(s[end:], '\n')
		if i < 0 {
			end = len(s)
			break
		}
		end += i + 1
	}
	if end > HeadBytes {
		end = HeadBytes
		for end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
	}
	if end == len(s)-1 && s[end] == '\n' {
		end = len(s)
	}
	return end
}

// DiffLine is a line of an edit: "-" removed, "+" added.
type DiffLine struct {
	Op, Text string
}

// MaxDiffLines bounds the lines of each side of an edit shown.
const MaxDiffLines = 200

// Diff shows an edit that replaces old with new as removed and added
// lines, each side bounded to MaxDiffLines lines of at most MaxValue bytes
// in all; a cut side ends with a line that counts what it leaves out.
func Diff(old, new string) []DiffLine {
	var out []DiffLine
	for _, side := range []struct{ op, s string }{{"-", old}, {"+", new}} {
		if side.s == "" {
			continue
		}
		s := strings.TrimSuffix(side.s, "\n")
		total := strings.Count(s, "\n") + 1
		kept := 0
		for n := 0; n < MaxDiffLines && kept < MaxValue && s != ""; n++ {
			line, rest, _ := strings.Cut(s, "\n")
			line = limit.Text(line, max(64, MaxValue-kept))
			kept += len(line)
			out = append(out, DiffLine{side.op, visible.String(line)})
			s = rest
			total--
		}
		if total > 0 && s != "" {
			out = append(out, DiffLine{"…", fmt.Sprintf("%d more lines not shown", total)})
		}
	}
	return out
}

// Str returns the string argument key of a JSON object, or "".
func Str(raw json.RawMessage, key string) string {
	members, ok := object(raw)
	if !ok {
		return ""
	}
	for _, m := range members {
		if m.key == key {
			var s string
			json.Unmarshal(m.value, &s)
			return s
		}
	}
	return ""
}

// Target returns the argument that names what a call acts on (a path, a
// URL, a command), or else its first argument that is a short text, or
// else its first text, and its name; empty when there is none.
func Target(raw json.RawMessage) (key, value string) {
	if len(raw) > MaxRaw {
		return "", ""
	}
	members, ok := object(raw)
	if !ok {
		return "", ""
	}
	for _, k := range targetKeys {
		for _, m := range members {
			var s string
			if m.key == k && json.Unmarshal(m.value, &s) == nil && s != "" {
				return k, s
			}
		}
	}
	for _, m := range members {
		var s string
		if json.Unmarshal(m.value, &s) == nil && s != "" && isShort(m.value) {
			return m.key, s
		}
	}
	for _, m := range members {
		var s string
		if json.Unmarshal(m.value, &s) == nil && s != "" {
			return m.key, s
		}
	}
	return "", ""
}

// MCPTool splits the name Claude Code gives a tool of an MCP server,
// mcp__SERVER__TOOL.
func MCPTool(name string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(name, "mcp__")
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, "__")
	return server, tool, ok && server != "" && tool != ""
}

// maxSummary bounds a summary.
const maxSummary = 200

// Summary says in one line what a request does, for a list: the command
// of an rm or a Bash call, the tool of an MCP call and its main argument,
// the target of another Claude Code tool. Hidden characters and line
// breaks are escaped; it is at most about maxSummary bytes.
func Summary(kind, action string, args json.RawMessage) string {
	var s string
	switch {
	case kind == "tool" && action == "Bash":
		if cmd := Str(args, "command"); cmd != "" {
			s = "$ " + cmd
		} else {
			s = action
		}
	case kind == "mcp" || kind == "tool":
		tool := action
		if server, name, ok := MCPTool(action); ok {
			tool = server + "/" + name
		}
		s = tool
		if k, v := Target(args); v != "" {
			if kind == "mcp" || strings.HasPrefix(action, "mcp__") {
				s += " " + k + "=" + v
			} else {
				s += " " + v
			}
		}
	default:
		s = action
	}
	return cutLine(visible.Line(s), maxSummary)
}

// cutLine keeps the first n bytes of a line, on a character boundary,
// and marks the cut with "…".
func cutLine(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
