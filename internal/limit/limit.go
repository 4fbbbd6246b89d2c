// Package limit bounds what comes from outside before work is done on it:
// how deep a JSON document nests, and how long a text rendered from it for
// a human may grow. It imports nothing of the application, so that every
// role (server, hook, gateway, rm wrapper) applies the same limits.
package limit

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// MaxJSONDepth is how deeply the objects and arrays of a JSON document
// from outside may nest, the document's own outer object counted. No agent
// call needs more; a deeper document costs a decoder's recursion, and an
// indented rendering whose size grows with the square of the depth.
const MaxJSONDepth = 64

// ErrTooDeep is the error of a JSON document nested deeper than
// MaxJSONDepth.
var ErrTooDeep = fmt.Errorf("the JSON nests objects and arrays deeper than the limit of %d levels", MaxJSONDepth)

// CheckJSONDepth returns ErrTooDeep when the objects and arrays of the JSON
// text data nest deeper than MaxJSONDepth. It only counts brackets outside
// strings, in one pass and without allocating, so that it can run before
// any decoder; whether data is valid JSON is the decoder's to say, and an
// invalid text that is not too deep passes.
func CheckJSONDepth(data []byte) error {
	return CheckJSONDepthAt(data, 0)
}

// CheckJSONDepthAt is CheckJSONDepth for a JSON value that sits outer
// levels deep in the document that carries it, such as the arguments of an
// MCP call inside its message's params: the value may nest MaxJSONDepth
// less outer levels.
func CheckJSONDepthAt(data []byte, outer int) error {
	depth := outer
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			i = stringEnd(data, i+1)
		case '[', '{':
			if depth++; depth > MaxJSONDepth {
				return ErrTooDeep
			}
		case ']', '}':
			// A closing bracket with none open is not JSON, but not
			// every decoder stops there: json.Decoder takes a value and
			// leaves the rest, and its More is false before a bracket.
			// What follows is counted from the outer level again.
			depth = max(depth-1, outer)
		}
	}
	return nil
}

// stringEnd returns the index of the quote that ends the string whose
// content starts at i, or len(data) when it does not end. A quote after an
// odd number of backslashes is escaped.
func stringEnd(data []byte, i int) int {
	for {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return len(data)
		}
		q := i + j
		n := 0
		for q-n-1 >= i && data[q-n-1] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// marker is what replaces the end of a text cut at its limit.
func marker(more int) string {
	return "\n… (truncated, " + strconv.Itoa(more) + " bytes more)"
}

// Text returns s when it is at most max bytes long, and otherwise its
// beginning, cut on a character boundary, followed by a line that says
// how many bytes were left out: "… (truncated, N bytes more)". The result
// is never longer than max bytes (for max of at least 64).
func Text(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := cutPoint(s, max, len(s))
	return s[:cut] + marker(len(s)-cut)
}

// cutPoint is where to cut s, the first bytes of a text of total bytes,
// so that what is kept and the marker of the rest fit in max: the marker of
// total is the longest the rest can need. s must not end inside a
// character.
func cutPoint(s string, max, total int) int {
	cut := min(max0(max-len(marker(total))), len(s))
	for cut > 0 && cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return cut
}

// IndentJSON renders the JSON text raw indented by two spaces per level,
// as json.Indent does, but builds at most max bytes of it: what follows is
// counted, not written, and replaced by the marker of Text. Its cost grows
// with len(raw), not with the size of the indented text, which for a
// deeply nested document grows with the square of the depth. raw must be
// valid JSON (a canonical form, or a text a decoder accepted); a text that
// ends inside a string or a container is rendered as far as it goes.
func IndentJSON(raw []byte, max int) string {
	text, more := Indent(raw, max)
	if more == 0 {
		return text
	}
	cut := cutPoint(text, max, len(text)+more)
	return text[:cut] + marker(len(text)+more-cut)
}

// Indent renders the JSON text raw indented by two spaces per level, as
// json.Indent does (whitespace between tokens dropped, empty objects and
// arrays kept as {} and []), and returns at most its first max bytes, cut
// on a character boundary, with the number of bytes of the rendering that
// follow them. It writes nothing beyond max, so that its cost grows with
// len(raw), not with the rendering.
func Indent(raw []byte, max int) (string, int) {
	w := &capped{max: max0(max)}
	depth := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch c {
		case ' ', '\t', '\n', '\r':
		case '"':
			end := min(stringEnd(raw, i+1)+1, len(raw))
			w.write(raw[i:end])
			i = end - 1
		case '{', '[':
			w.byte(c)
			if j := nextToken(raw, i+1); j < len(raw) && (raw[j] == '}' || raw[j] == ']') {
				w.byte(raw[j])
				i = j
				continue
			}
			depth++
			w.newline(depth)
		case '}', ']':
			depth = max0(depth - 1)
			w.newline(depth)
			w.byte(c)
		case ',':
			w.byte(c)
			w.newline(depth)
		case ':':
			w.byte(c)
			w.byte(' ')
		default:
			w.byte(c)
		}
	}
	return w.result()
}

// IndentLines returns how many lines Indent's whole rendering of the JSON
// text raw has, without building it.
func IndentLines(raw []byte) int {
	lines := 1
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			i = stringEnd(raw, i+1)
		case '{', '[':
			if j := nextToken(raw, i+1); j < len(raw) && (raw[j] == '}' || raw[j] == ']') {
				i = j
				continue
			}
			lines += 2 // after the opening, and before the closing
		case ',':
			lines++
		}
	}
	return lines
}

func max0(n int) int { return max(n, 0) }

// nextToken returns the index of the first byte at or after i that is not
// whitespace.
func nextToken(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// capped keeps the first max bytes written to it and counts the rest.
// Once something did not fit, everything after it is counted, so that what
// is kept is a beginning of the text.
type capped struct {
	buf  []byte
	max  int
	more int
}

func (w *capped) write(b []byte) {
	if room := w.max - len(w.buf); w.more == 0 && room >= len(b) {
		w.buf = append(w.buf, b...)
	} else if w.more == 0 {
		w.buf = append(w.buf, b[:room]...)
		w.more = len(b) - room
	} else {
		w.more += len(b)
	}
}

func (w *capped) byte(c byte) {
	if w.more == 0 && len(w.buf) < w.max {
		w.buf = append(w.buf, c)
	} else {
		w.more++
	}
}

// newline writes a line break and the indentation of depth. What does not
// fit is counted without being written: a deep indentation past the limit
// costs nothing.
func (w *capped) newline(depth int) {
	n := 1 + 2*depth
	if w.more > 0 || len(w.buf)+n > w.max {
		w.more += n
		return
	}
	w.buf = append(w.buf, '\n')
	for range depth {
		w.buf = append(w.buf, ' ', ' ')
	}
}

// result returns what was kept, without a character the limit cut in two,
// and how many bytes follow it.
func (w *capped) result() (string, int) {
	kept, more := w.buf, w.more
	if more > 0 && len(kept) > 0 {
		last := len(kept) - 1
		for last > 0 && !utf8.RuneStart(kept[last]) {
			last--
		}
		if !utf8.FullRune(kept[last:]) {
			more += len(kept) - last
			kept = kept[:last]
		}
	}
	return string(kept), more
}
